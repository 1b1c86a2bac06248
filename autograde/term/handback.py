"""``python -m autograde feedback OUT``: the feedback pages handed back to the students, in the
format of the system they go back through; each format is an adapter's
(``registry.handback_formats``):

- ``zip`` (``folders.py``): ``OUT/handback/<student_id>.zip``, one per student, holding that
  student's pages;
- ``exchange`` (``exchange.py``): the course-folder layout nbgrader's ``release_feedback`` reads;
- ``canvas`` (``canvas.py``): one ``OUT/handback/canvas_feedback.zip`` for Canvas's "Re-upload
  submissions";
- ``moodle`` (``moodle.py``): one ``OUT/handback/moodle_feedback.zip`` for Moodle's "Upload multiple
  feedback files in a zip".

For the LMS layouts the names come from the intake's facts (the ledger's: the name and id the LMS
gave each student's files); a student the intake did not see from that LMS is listed, not guessed.
Only the pages ``grade`` wrote are read (the ledger's ``pages``); nothing is run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..course import Course, UnusableInput
from ..ledger.facts import LmsStudent
from ..ledger.folder import Ledger, Page
from .adapter import HandBackJob
from .registry import handback_formats


@dataclass
class HandBackInfo:
    """What a hand-back did: how many students and pages went back through the system, the students
    it could not hand back through it, and the notebooks nbgrader cannot deliver (they came in a
    zip)."""

    students: int = 0
    pages: int = 0
    unmatched: list[str] = field(default_factory=list)
    zipped: dict[str, list[str]] = field(default_factory=dict)


def hand_back(course: Course, out: Path, format: str = "zip") -> tuple[Path, HandBackInfo]:
    """Write the handback in ``format``; returns (where, what was handed back)."""
    formats = handback_formats()
    if format not in formats:
        raise UnusableInput(f"--format {format}: use one of {', '.join(formats)}")
    ledger = Ledger(out, course)
    pages = ledger.pages()
    ledger.out.handback.mkdir(exist_ok=True)
    done = formats[format].handback(HandBackJob(course, ledger.out, pages, ledger.intake.students))
    return done.where, HandBackInfo(
        students=len(pages) - len(done.unmatched),
        pages=sum(len(f) for s, f in pages.items() if s not in done.unmatched),
        unmatched=done.unmatched,
        zipped=done.zipped,
    )


def lms_name(format: str, lms: LmsStudent, page: Page) -> str:
    """A page's name in the LMS's own layout (from the names its download used): the adapter's
    ``page_name``."""
    return handback_formats()[format].page_name(lms, page)
