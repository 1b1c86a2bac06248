"""What a system that students submit through is to the term: an ``Adapter``, one per system
(Canvas, Moodle, nbgrader's exchange, plain folders), each in its own module, listed in
``registry.py``.

An adapter knows that system's naming, ids, times and output formats:

- ``claims``: whether a name at the top of a download is one this system writes (the layout vote,
  ``layouts.py``); ``start`` and ``unnamed``: where in a folder its layout starts, and whether a
  source whose top names no layout is still its own (nbgrader's course folder);
- ``read``: whose each listed file is, which notebook, when (``Candidate``s; what cannot be used is
  a named problem of the source);
- ``id_kind``: what id its download names students by, said when a roster matches too few of them;
- ``handback``: how feedback pages go back through it (a ``HandBackJob`` in, a ``HandBack`` out),
  under ``handback_format``; an LMS's ``page_name``: the name a page goes back under;
- ``export``: how grades go into it (an ``ExportJob`` in; the files written, the students left out),
  under ``export_format``.

An adapter reads no OUT file: the commands give it the ledger's objects (the pages, the intake's
facts, the score table) and OUT's layout to write into.

The shared machinery stays outside the adapters: ``source.py`` (zips and folders within limits),
``candidates.py`` (a file that may be a notebook), ``intake.py`` (placement, roster, times),
``handback.py`` and ``export.py`` (the commands), and the helpers below that several adapters use.
"""

from __future__ import annotations

import datetime as dt
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..course import Course, UnusableInput
from ..ledger.facts import LmsStudent
from ..ledger.folder import Page
from ..ledger.late import LateSpec
from ..ledger.layout import Out
from ..ledger.tables import ScoreTable


@dataclass
class HandBack:
    """What a hand-back wrote: where, the students it could not hand back through the system, and
    the notebooks of a student that nbgrader cannot deliver (they came in the student's own zip)."""

    where: Path
    unmatched: list[str] = field(default_factory=list)
    zipped: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class HandBackJob:
    """What a hand-back is given: the course, OUT's layout (where it writes), every student's pages
    (the ledger's), and what each student's download said of them (the intake's facts)."""

    course: Course
    out: Out
    pages: dict[str, list[Page]]
    names: dict[str, LmsStudent]


@dataclass(frozen=True)
class RosterRow:
    """A roster's row for one student (``intake.read_roster``): their LMS id and name ('' where not
    given), and the roster's other columns (email, section, login, ...), by their lower-case
    names."""

    lms_id: str = ""
    name: str = ""
    other: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Person:
    """What the LMS and the roster say of a student, for an LMS's grade file: the system their
    download came from and its id for them, their name, email, section, login, SIS id and ID number,
    and the roster's LMS id (``roster_lms_id``) where it gives one."""

    layout: str = ""
    lms_id: str = ""
    name: str = ""
    email: str = ""
    section: str = ""
    login: str = ""
    sis_user_id: str = ""
    id_number: str = ""
    roster_lms_id: str = ""

    @classmethod
    def seen(cls, who: LmsStudent) -> Person:
        """A student as their download named them."""
        return cls(who.layout, who.lms_id or "", who.name or "")

    def with_roster(self, row: RosterRow) -> Person:
        """The roster's non-empty columns over what the download said."""
        columns = {**row.other, "lms_id": row.lms_id, "name": row.name}
        given = {k: v for k, v in columns.items() if v and k in self.__dataclass_fields__}
        return replace(self, **given, roster_lms_id=row.lms_id or self.roster_lms_id)


@dataclass
class ExportJob:
    """What an LMS export is given: the final table (its penalty settled once), what the download
    and the roster say of each student (``people``), the late spec, who sent anything (``sent``),
    the edition each wrote in (``editions``), and the instructor's options."""

    course: Course
    out: Out
    table: ScoreTable
    people: dict[str, Person]
    spec: LateSpec
    sent: set[str] = field(default_factory=set)
    editions: dict[str, str] = field(default_factory=dict)
    target: Path | None = None
    column: str | None = None
    assignment_id: str | None = None
    omit_unmatched: bool = False
    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))


@dataclass(frozen=True)
class Adapter:
    name: str  # the layout's name (grade --layout)
    read: Callable  # (Source, [Entry], context) -> [Candidate]
    # (top-level name, is a folder, assignment) -> its own?
    claims: Callable[[str, bool, str], bool] | None = None
    # (tops, assignment) -> where it starts
    start: Callable[[dict[str, set[str]], str], tuple[str, ...]] | None = None
    # a top naming no layout: its own?
    unnamed: Callable[[dict[str, set[str]], str], tuple[str, ...] | None] | None = None
    id_kind: str = ""  # what its download names students by ('' for no roster check)
    handback_format: str = ""  # feedback --format
    handback: Callable[[HandBackJob], HandBack] | None = None
    # (what its download called a student, a page) -> its name handed back
    page_name: Callable[[LmsStudent, Page], str] | None = None
    export_format: str = ""  # export --format
    # -> (files written, students left out)
    export: Callable[[ExportJob], tuple[list[Path], list[str]]] | None = None


def safe(text: str) -> str:
    """A name's part as a file name may hold it."""
    return re.sub(r"[^\w.@+-]+", "_", str(text)).strip("_") or "_"


def write_zip(path: Path, entries: list[tuple[str, Page]]) -> None:
    tmp = path.with_suffix(".zip.tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, page in entries:
            page.zip_into(zf, name)
    tmp.replace(path)


def lms_zip(system: str, name_of: Callable[[LmsStudent, Page], str], job: HandBackJob) -> HandBack:
    """One zip of every page, each named as the LMS ``system`` named its download (``name_of``); a
    student who did not come from that LMS is listed, not guessed. None of them: refused (wrong
    format)."""
    entries, unmatched = [], []
    for student, files in job.pages.items():
        lms = job.names.get(student, LmsStudent())
        if lms.layout != system:
            unmatched.append(student)
            continue
        entries += [(name_of(lms, page), page) for page in files]
    if not entries:
        raise UnusableInput(
            f"no student of {job.out.root} came from a {system} download (the intake saw: "
            f"{', '.join(sorted({n.layout or '?' for n in job.names.values()})) or 'no LMS'}): "
            "use the format of the LMS they came from"
        )
    where = job.out.lms_feedback(system)
    write_zip(where, entries)
    return HandBack(where, unmatched)


def refuse_unmatched(students: list[str], what: str, where: str, omit: bool) -> None:
    """An LMS file carries no student the LMS cannot be told: refused, naming them, unless left out
    on purpose."""
    if students and not omit:
        raise UnusableInput(
            f"{len(students)} student(s) have no {what}: "
            f"{', '.join(students[:20])}{' ...' if len(students) > 20 else ''}. "
            f"Give it in {where}, or pass --omit-unmatched to leave them out of the file"
        )
