"""A file that may be a student's notebook, as an adapter's reader finds it (``Candidate``), and why a
file cannot be one (``why_not``): the rules every layout shares.

Each reader takes the listed entries and returns candidates (a file, the id the source gives its owner,
its time); what cannot be used is a named problem of the source, never a silent skip and never a guess.
The owner comes only from the part of the name that the LMS or nbgrader wrote, read the way that system's
own importer reads it; the name the learner gave the file is only a file name. Every value a learner wrote
(times, zones, names) is parsed totally: a value that cannot be read is that student's problem, never an
exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from .source import Entry, Limits, Source

ARCHIVES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar")


@dataclass
class Candidate:
    """A file that may be a student's notebook: whose (as the source names them), and how new."""

    raw_id: str
    entry: Entry
    filename: str  # the name the student gave the file
    when: datetime | None = None  # its submission time, where the source says
    order: float = 0.0  # newer is larger, where no time is known
    basis: str = "file date"  # what ``order`` is
    late: bool = False
    lms: dict = field(default_factory=dict)  # what the LMS called the student
    source: Source | None = None  # where ``entry`` is read from when not the source itself (a student's own zip)


def why_not(entry: Entry, limits: Limits, filename: str | None = None) -> str:
    """Why a file cannot be a submitted notebook ('' when it can)."""
    name = (filename or entry.parts[-1]).lower()
    if entry.refused:
        return entry.refused
    if name.endswith(".zip"):
        return ""  # a student's zip of notebooks: opened as an LMS zip is (unpack_zips)
    if name.endswith(ARCHIVES):
        return "an archive other than a zip inside the submission: not opened (submit the notebooks, or a .zip of them)"
    if not name.endswith(".ipynb"):
        return "not a notebook (.ipynb): not used"
    if entry.size > limits.file_bytes and not name.endswith(".zip"):
        return f"{entry.size / 2**20:.1f} MB, over the {limits.file_bytes / 2**20:g} MB limit for a submitted notebook: not extracted"
    return ""
