"""``python -m autograde feedback OUT``: the feedback pages handed back to the students.

- ``zip``: ``OUT/handback/<student_id>.zip``, one per student, holding that student's pages;
- ``exchange``: ``OUT/handback/exchange/feedback/<student_id>/<assignment>/<notebook>.html``, the
  course-folder layout from which nbgrader's ``release_feedback`` hands pages out on a JupyterHub, with
  each submission's ``timestamp.txt`` and ``submission_secret.txt`` (kept by the intake); a student whose
  submission did not come through the exchange is listed: nbgrader cannot release their pages; so is one
  whose notebook came in their own zip (``zipped``): ``fetch_feedback`` finds a page only by a ``.ipynb``
  of the learner's submission;
- ``canvas``: one ``OUT/handback/canvas_feedback.zip`` whose files are named as Canvas names a
  submission (``name_userid_submissionid_file``): Canvas's "Re-upload submissions" attaches each file
  to the student the name says;
- ``moodle``: one ``OUT/handback/moodle_feedback.zip`` with a folder per participant named as Moodle's
  download names it (``Full Name_12345_assignsubmission_file_``): Moodle's "Upload multiple feedback
  files in a zip" gives each folder's files to that participant.

For the two LMS layouts the names come from the intake (``OUT/intake.json``: the name and id the LMS
gave each student's files); a student the intake did not see from that LMS is listed, not guessed.
Only files that ``grade`` wrote under ``OUT/feedback/`` are read; nothing is run.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

from ..course import Course, UnusableInput

FORMATS = ("zip", "canvas", "moodle", "exchange")
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
    if format not in FORMATS:
        raise UnusableInput(f"--format {format}: use one of {', '.join(FORMATS)}")
    pages = _pages(out)
    target = out / "handback"
    target.mkdir(exist_ok=True)
    unmatched: list[str] = []
    unreachable: dict[str, list[str]] = {}
    if format == "zip":
        for student, files in pages.items():
            _write_zip(target / f"{student}.zip", [(f"{student}/{p.name}", p) for p in files])
        where = target
    elif format == "exchange":
        names = _lms_names(out)
        for student, files in pages.items():
            folder = target / "exchange" / "feedback" / student / course.assignment
            folder.mkdir(parents=True, exist_ok=True)
            for page in files:
                (folder / page.name).write_bytes(page.read_bytes())
            # release_feedback reads both beside the pages; fetch_feedback finds a page by the secret's hash
            sent = names.get(student, {})
            # fetch_feedback finds a page by the hash of the secret and a .ipynb the learner's own submission holds:
            # a notebook that came in a zip has none, so its page can be released but never fetched
            zipped = sorted(set(sent.get("zipped") or []) & {p.stem for p in files})
            if zipped:
                unreachable[student] = zipped
            if sent.get("layout") == "exchange" and sent.get("secret") and sent.get("timestamp"):
                (folder / "timestamp.txt").write_text(sent["timestamp"], encoding="utf-8")
                (folder / "submission_secret.txt").write_text(sent["secret"], encoding="utf-8")
            if zipped or not (sent.get("layout") == "exchange" and sent.get("secret") and sent.get("timestamp")):
                unmatched.append(student)
        where = target / "exchange"
    else:
        names = _lms_names(out)
        entries = []
        for student, files in pages.items():
            lms = names.get(student, {})
            if lms.get("layout") != format:
                unmatched.append(student)
                continue
            entries += [(_lms_name(format, lms, page), page) for page in files]
        if not entries:
            raise UnusableInput(
                f"no student of {out} came from a {format} download (the intake saw: "
                f"{', '.join(sorted({n.get('layout', '?') for n in names.values()})) or 'no LMS'}): use the format of the LMS they came from"
            )
        where = target / f"{format}_feedback.zip"
        _write_zip(where, entries)
    return where, {
        "students": len(pages) - len(unmatched),
        "pages": sum(len(f) for s, f in pages.items() if s not in unmatched),
        "unmatched": unmatched,
        "zipped": unreachable,
    }


def _safe(text: str) -> str:
    return re.sub(r"[^\w.@+-]+", "_", str(text)).strip("_") or "_"


def _lms_name(format: str, lms: dict, page: Path) -> str:
    """A page's name in the LMS's own layout (from the names its download used)."""
    if format == "canvas":
        # Canvas's re-upload attaches a file as a comment under the submission attachment its name gives: each
        # page goes under the file the student sent for that notebook (the newest file's id where none is known)
        attachment = (lms.get("attachments") or {}).get(page.stem) or lms.get("submission_id", "0")
        # the re-upload takes the FIRST two all-digit fields: a sortable name that holds one ("lory_1001", as
        # Canvas's own download writes it) would give the page to user 1001; the name is only a label, so its
        # all-digit fields are left out
        name = "_".join(part for part in _safe(lms["name"]).split("_") if not part.isdigit()) or "student"
        return f"{name}_{_safe(lms['lms_id'])}_{_safe(attachment)}_feedback_{page.name}"
    # Moodle's importer (feedback/file/importziplib.php) splits a path's first part on "_" and needs the
    # participant id second: the name may hold spaces, never "_" (nor a path), as Moodle's own download writes it
    name = re.sub(r"[\x00-\x1f\x7f_/\\:*?\"<>|]+", " ", str(lms["name"])).strip(" .") or "Participant"
    return f"{name}_{_safe(lms['lms_id'])}_assignsubmission_file/{page.name}"


def _write_zip(path: Path, entries: list[tuple[str, Path]]) -> None:
    tmp = path.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, page in entries:
            zf.write(page, name)
    tmp.replace(path)
