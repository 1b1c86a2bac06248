"""A file that may be a student's notebook, as an adapter's reader finds it (``Candidate``), why a
file cannot be one (``why_not``), and a time as nbgrader writes it (``exchange_time``: the
exchange's and a pattern's): the rules several layouts share.

Each reader takes the listed entries and returns candidates (a file, the id the source gives its
owner, its time); what cannot be used is a named problem of the source, never a silent skip and
never a guess. The owner comes only from the part of the name that the LMS or nbgrader wrote, read
the way that system's own importer reads it; the name the learner gave the file is only a file name.
Every value a learner wrote (times, zones, names) is parsed totally: a value that cannot be read is
that student's problem, never an exception."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..model import Disputed
from .source import Entry, Limits, Source, odd_characters, shown

ARCHIVES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar")
# what nbgrader writes in timestamp.txt and inbound folder names ("%Y-%m-%d %H:%M:%S.%f %Z"), and
# ISO 8601
STAMP = re.compile(
    r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d{1,9})?)?( ?Z| ?[+-]\d\d:?\d\d| "
    r"[A-Za-z][A-Za-z0-9_+-]{0,31}(/[A-Za-z0-9_+-]{1,32}){0,2})?",
    re.ASCII,  # digits are 0-9 only: an Arabic-Indic or full-width year is no time nbgrader writes
)


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
    # where ``entry`` is read from when not the source itself (a student's own zip)
    source: Source | None = None
    disputed: Disputed | None = None  # its times, when they disagreed


def why_not(entry: Entry, limits: Limits, filename: str | None = None) -> str:
    """Why a file cannot be a submitted notebook ('' when it can)."""
    name = (filename or entry.parts[-1]).lower()
    if entry.refused:
        return entry.refused
    if name.endswith(".zip"):
        return ""  # a student's zip of notebooks: opened as an LMS zip is (unpack_zips)
    if name.endswith(ARCHIVES):
        return (
            "an archive other than a zip inside the submission: not opened (submit the "
            "notebooks, or a .zip of them)"
        )
    if not name.endswith(".ipynb"):
        return "not a notebook (.ipynb): not used"
    if entry.size > limits.file_bytes and not name.endswith(".zip"):
        return (
            f"{entry.size / 2**20:.1f} MB, over the {limits.file_bytes / 2**20:g} MB limit "
            "for a submitted notebook: not extracted"
        )
    return ""


def unreadable(text: str) -> str:
    """Why a learner's time is unreadable where a look at it would not tell: an invisible or
    space-like character, or digits other than 0-9 (said as ' (it holds ...)'; '' otherwise)."""
    odd = odd_characters(text.replace(" ", "x"))  # the spaces nbgrader writes are its own
    if odd:
        return f" (it holds {odd})"
    other = next((c for c in text if c.isdigit() and not c.isascii()), "")
    return (
        f" (its digits must be 0-9; it holds U+{ord(other):04X} {unicodedata.name(other, '')})"
        if other
        else ""
    )


def exchange_time(text: str) -> datetime:
    """A time as nbgrader writes it (timestamp.txt, an inbound folder's name), read by nbgrader's
    own ``parse_utc``; ValueError when it is not one, or not a time that UTC can hold. A named zone
    must be one the system knows (nbgrader would read an unknown one as UTC); a numeric zone is
    joined to the time first (``parse_utc`` reads ``-0500`` after a space as seconds)."""
    import dateutil.tz
    from nbgrader.utils import parse_utc

    text = text.strip(" \t\r\n")
    if not STAMP.fullmatch(text):
        raise ValueError(f"{shown(text, 60)!r} is not a time nbgrader writes{unreadable(text)}")
    parts = text.split(" ")
    if len(parts) == 3 and re.fullmatch(r"[+-]\d\d:?\d\d|Z", parts[2]):
        text = f"{parts[0]} {parts[1]}{parts[2]}"
    elif len(parts) == 3 and dateutil.tz.gettz(parts[2]) is None:
        raise ValueError(f"unknown time zone {parts[2]!r}")
    try:
        when = parse_utc(text)
    # a learner's text in a third-party parser: whatever it raises, the time is unknown
    except Exception as exc:
        raise ValueError(
            f"{shown(text, 60)!r} is not a time UTC can hold ({type(exc).__name__})"
        ) from None
    return when.replace(tzinfo=UTC)
