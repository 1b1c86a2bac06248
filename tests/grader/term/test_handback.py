"""What the hand-back writes, read by the rules of the LMS that imports it: Canvas's "Re-upload
submissions" takes the first two all-digit "_" fields of a name as user id and attachment id, and
the attachment must be one of that user's submitted files (Assignment#generate_comments_from_files);
each page goes under its own file."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from test_intake import NB1, NB2, intake, notebook, write_zip

from autograde.course import Course, UnusableInput
from autograde.term.handback import hand_back


def canvas_reupload(name: str) -> tuple[str, str]:
    """(user id, attachment id) as Canvas's re-upload reads a file name."""
    digits = [field for field in name.split("_") if field.isdigit()]
    return digits[0], digits[1]


def graded_out(tmp_path: Path, members: dict[str, bytes]) -> Path:
    """An OUT as grade leaves it for the hand-back: the intake's findings and a page per
    notebook."""
    result = intake(write_zip(tmp_path / "canvas.zip", members), tmp_path)
    out = tmp_path / "out"
    for student in (p.name for p in result.folder.iterdir() if p.is_dir()):
        for nb in (result.folder / student).glob("*.ipynb"):
            page = out / "feedback" / student / f"{nb.stem}.html"
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(f"<p>{student} {nb.stem}</p>")
    (out / "intake.json").write_text(
        json.dumps({"layout": result.layout, "students": result.students})
    )
    return out


def test_each_canvas_page_goes_under_the_file_the_student_sent_for_it(tmp_path):
    sent = {
        f"doealice_1001_9001_{NB1}.ipynb": notebook("alice", NB1),
        f"doealice_1001_9002_{NB2}.ipynb": notebook("alice", NB2),
    }
    out = graded_out(tmp_path, sent)
    where, info = hand_back(Course.load(), out, "canvas")
    with zipfile.ZipFile(where) as zf:
        read = {name.split("_feedback_")[1]: canvas_reupload(name) for name in zf.namelist()}
    assert read == {f"{NB1}.html": ("1001", "9001"), f"{NB2}.html": ("1001", "9002")}
    assert info.unmatched == []
    with pytest.raises(UnusableInput, match="no student .* came from a moodle download"):
        hand_back(Course.load(), out, "moodle")
