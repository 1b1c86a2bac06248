"""``python -m autograde feedback OUT``: the feedback pages handed back to the students, in the format of the
system they go back through; each format is an adapter's (``registry.handback_formats``):

- ``zip`` (``folders.py``): ``OUT/handback/<student_id>.zip``, one per student, holding that student's pages;
- ``exchange`` (``exchange.py``): the course-folder layout nbgrader's ``release_feedback`` reads;
- ``canvas`` (``canvas.py``): one ``OUT/handback/canvas_feedback.zip`` for Canvas's "Re-upload submissions";
- ``moodle`` (``moodle.py``): one ``OUT/handback/moodle_feedback.zip`` for Moodle's "Upload multiple
  feedback files in a zip".

For the LMS layouts the names come from the intake (``OUT/intake.json``: the name and id the LMS gave each
student's files); a student the intake did not see from that LMS is listed, not guessed. Only files that
``grade`` wrote under ``OUT/feedback/`` are read; nothing is run.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..course import Course, UnusableInput
from .registry import handback_formats

INTAKE_FILE = "intake.json"  # in OUT: what the intake learned of each student (grading writes it)


def _pages(out: Path) -> dict[str, list[Path]]:
    folder = out / "feedback"
    if not folder.is_dir():
        raise UnusableInput(f"{out} has no feedback/ folder: grade into it first (`python -m autograde grade SUBMISSIONS --out {out}`)")
    found = {}
    for student in sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()):
        pages = sorted(p for p in student.glob("*.html") if p.is_file() and not p.is_symlink())
        if pages:
            found[student.name] = pages
    return found


def _lms_names(out: Path) -> dict[str, dict]:
    try:
        return json.loads((out / INTAKE_FILE).read_text(encoding="utf-8")).get("students", {})
    except (OSError, ValueError):
        return {}


def hand_back(course: Course, out: Path, format: str = "zip") -> tuple[Path, dict]:
    """Write the handback in ``format``; returns (where, {"students": n, "pages": n, "unmatched": [...]})."""
    formats = handback_formats()
    if format not in formats:
        raise UnusableInput(f"--format {format}: use one of {', '.join(formats)}")
    pages = _pages(out)
    target = out / "handback"
    target.mkdir(exist_ok=True)
    done = formats[format].handback(course, out, pages, target, _lms_names(out))
    return done.where, {
        "students": len(pages) - len(done.unmatched),
        "pages": sum(len(f) for s, f in pages.items() if s not in done.unmatched),
        "unmatched": done.unmatched,
        "zipped": done.zipped,
    }


def lms_name(format: str, lms: dict, page: Path) -> str:
    """A page's name in the LMS's own layout (from the names its download used): the adapter's ``page_name``."""
    return handback_formats()[format].page_name(lms, page)
