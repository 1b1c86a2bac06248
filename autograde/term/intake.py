"""Turn what an instructor downloads into the grader's layout,
``SUBMISSIONS/<student_id>/<notebook>.ipynb``, so that grading itself does not change.

Layouts, one adapter each (``registry.py``): ``folders`` and ``pattern`` (``folders.py``),
``exchange`` (``exchange.py``), ``canvas`` (``canvas.py``), ``moodle`` (``moodle.py``); decided for
the whole source from the names at its top (``layouts.py``) unless ``layout=`` says which. The
adapter's reader says whose each file is, which notebook and when; this module places the newest
file per notebook, unpacks a student's own zip, maps the roster's ids and applies the timestamps.
``take_in`` is ``grade``'s whole intake (its facts, kept by the ledger, and what it says),
``check_extensions`` its check of the extensions file against the students found.

Everything read is untrusted (``source.py``: limits, zips, links). Whatever cannot be used is a
named problem (``Intake.problems``), never a silent skip, and costs only its own student; an input
that cannot be used at all raises ``UnusableInput``."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from ..course import Course, UnusableInput
from ..ledger.facts import IntakeFacts, IntakeProblem, LmsStudent
from ..ledger.folder import Ledger
from ..matching import Found, by_cells, grade_ids, normalize, walk_notebooks
from ..model import STUDENT_ID, Disputed, MiB
from .adapter import RosterRow
from .candidates import Candidate, exchange_time, why_not
from .folders import pattern_time
from .layouts import choose_layout
from .registry import ADAPTERS, adapter
from .source import (
    Entry,
    Limits,
    Listed,
    Refused,
    Source,
    list_folder,
    odd_characters,
    problem,
    shown,
    zip_directory,
)

MAX_CSV_BYTES = 10 * 1024 * 1024  # a roster or timestamps CSV
MARKER = ".intake.json"  # in DEST: what the intake wrote there (a later intake may then replace it)
RESUBMITTED = re.compile(r"-\d{1,3}$")  # Canvas's "name-1.ipynb" for a second file of one name

__all__ = [
    "MARKER",
    "Intake",
    "Limits",
    "Source",
    "check_extensions",
    "choose_layout",
    "exchange_time",
    "pattern_time",
    "read_roster",
    "read_submissions",
    "take_in",
    "zip_directory",
]


@dataclass
class Intake:
    folder: Path  # SUBMISSIONS in the grader's layout
    layout: str
    # student -> notebook ("*": any) -> submitted at (UTC)
    times: dict[str, dict[str, datetime]] = field(default_factory=dict)
    problems: list[IntakeProblem] = field(default_factory=list)
    roster: dict[str, RosterRow] = field(default_factory=dict)  # student -> their roster row
    missing: list[str] = field(default_factory=list)  # roster students who submitted nothing
    notes: list[str] = field(default_factory=list)
    # student -> notebooks the LMS marked late
    late: dict[str, list[str]] = field(default_factory=dict)
    # student -> what the LMS called them (canvas, moodle)
    students: dict[str, dict] = field(default_factory=dict)
    # student -> notebook -> its times, which disagreed
    disputed: dict[str, dict[str, Disputed]] = field(default_factory=dict)
    # student -> their notebooks as the intake decided them (placed layouts)
    found: dict[str, Found] = field(default_factory=dict)


def read_submissions(
    source: Path,
    dest: Path,
    notebooks: tuple[str, ...],
    assignment: str,
    layout: str | None = None,
    pattern: str | None = None,
    roster: Path | None = None,
    timestamps: Path | None = None,
    *,
    limits: Limits = Limits(),
    trust_owners: bool = False,
    ids_by_name: dict[str, set[str]] | None = None,
) -> Intake:
    """Read ``source`` (a folder or a zip) in ``layout`` (recognised when None) into ``dest`` in the
    grader's layout. ``source`` is returned as it is (``Intake.folder``) when it already is in that
    layout and no roster id needs a folder renamed; otherwise ``dest`` is filled (it must be new,
    empty, or an earlier intake's, which is replaced). ``roster``: a CSV of ``student_id`` [,
    ``lms_id``, ``name``...]; ``timestamps``: a CSV of ``student_id`` [, ``notebook``],
    ``submitted_at``. ``trust_owners``: take exchange folders owned by someone other than the
    student they name. ``ids_by_name``: each notebook's grade ids; with them the intake decides
    which file is each placed student's notebook (``Intake.found``), a file named like no notebook
    by its graded cells, and grading takes that decision as it is (a folder used as it is is read
    once, by grading)."""
    source, dest = Path(source), Path(dest)
    _check_request(source, layout, pattern)
    problems: list[IntakeProblem] = []
    people = read_roster(roster, problems) if roster else {}
    lms_ids = {who.lms_id: student for student, who in people.items() if who.lms_id}
    stamps = read_timestamps(timestamps, notebooks, problems) if timestamps else []
    wanted = layout or ("pattern" if pattern else None)
    root: tuple[str, ...] = ()
    odd: list[str] = []
    # a folder is listed fully only below where its layout starts (course/submitted/, ...)
    if source.is_dir():
        shallow = _names_at_top(source, limits)
        found, root, odd = (
            choose_layout([e.parts for e in shallow], assignment, wanted)
            if shallow
            else (wanted or "folders", (), [])
        )
        if found == "folders" and not root and not _renamed(source, lms_ids):
            return _as_it_is(source, notebooks, people, lms_ids, stamps, problems)
    _check_dest(source, dest)
    with Source(source, limits, root) as files:
        if files.archive is not None:
            found, root, odd = choose_layout([e.parts for e in files.entries], assignment, wanted)
        entries = [
            e.named(e.parts[len(root) :]) for e in files.entries if e.parts[: len(root)] == root
        ]
        _note_layout(files, found, root, odd)
        context = {
            "assignment": assignment,
            "pattern": pattern or "",
            "limits": limits,
            "trust_owners": trust_owners,
            "root": root,
        }
        candidates = adapter(found).read(files, entries, context)
        with (
            tempfile.TemporaryDirectory(prefix="course-intake-zips-") as scratch,
            contextlib.ExitStack() as opened,
        ):
            # learner (as the source names them) -> bytes their zips took in scratch
            spent: dict[str, int] = defaultdict(int)
            candidates = unpack_zips(files, candidates, Path(scratch), opened, spent)
            _fresh_dest(dest)
            intake = Intake(
                dest, found, problems=files.problems + problems, roster=people, notes=files.notes
            )
            _place(files, candidates, notebooks, people, lms_ids, intake, spent, ids_by_name)
    _apply_stamps(intake, stamps, lms_ids)
    submitted = {p.name for p in dest.iterdir() if p.is_dir()}
    intake.missing = sorted(set(people) - submitted)
    _write_marker(dest, intake, found, len(submitted))
    return intake


def _check_request(source: Path, layout: str | None, pattern: str | None) -> None:
    """UnusableInput for a layout no adapter has, a pattern without the pattern layout (or that
    layout without one), or a source that is neither a folder nor a file."""
    if layout is not None:
        adapter(layout)  # UnusableInput when no adapter has that name
    if pattern is not None and layout not in (None, "pattern"):
        raise UnusableInput(f"a pattern is for the pattern layout, not {layout}")
    if layout == "pattern" and not pattern:
        raise UnusableInput(
            "the pattern layout needs a pattern: a regular expression with a "
            "(?P<student_id>...) group"
        )
    if not source.is_dir() and not source.is_file():
        raise UnusableInput(f"{source}: no such folder or zip file")


def _note_layout(files: Source, found: str, root: tuple[str, ...], odd: list[str]) -> None:
    """The intake's notes on the layout: the part of the source read, and the entries named like
    another layout that were read as ``found``."""
    if root:
        files.notes.append(f"only {shown('/'.join(root))}/ was read")
    if odd:
        files.notes.append(
            f"read as {found} (the names of most entries); {len(odd)} named like "
            f"another layout were read as {found} too: " + ", ".join(shown(n, 80) for n in odd[:10])
        )


def _write_marker(dest: Path, intake: Intake, found: str, students: int) -> None:
    """The intake's marker in ``dest`` (MARKER): the layout read, how many students were placed,
    the problems and the notes."""
    marker = {
        "layout": found,
        "students": students,
        "problems": [p.to_json() for p in intake.problems],
        "notes": intake.notes,
    }
    (dest / MARKER).write_text(json.dumps(marker, indent=1, ensure_ascii=False), encoding="utf-8")


def unpack_zips(
    files: Source,
    candidates: list[Candidate],
    scratch: Path,
    opened: contextlib.ExitStack,
    spent: dict[str, int],
) -> list[Candidate]:
    """A student's own zip of notebooks: the notebooks in it become that student's files (their
    time, late mark and LMS names those of the zip), read with the limits an LMS zip is read with.
    One level only: a zip inside it is not opened. A zip in a folder is read where it is, through
    the handle checked against its listing; one inside a zip is copied out first, its declared size
    counted against its learner's budget (``spent``), and not copied when that budget cannot hold
    it. Whatever cannot be read is that student's named problem."""
    found = []
    for item in candidates:
        if not item.filename.lower().endswith(".zip"):
            found.append(item)
            continue
        try:
            if isinstance(item.entry.ref, Listed):
                inner = opened.enter_context(
                    Source(
                        Path(item.entry.name),
                        files.limits,
                        handle=files.open(item.entry),
                        listed=item.entry.ref,
                        label="it",
                    )
                )
            else:
                inner = opened.enter_context(_copied_out(files, item, scratch, spent))
        except (Refused, UnusableInput) as exc:
            files.problems.append(
                problem(
                    shown(item.entry.name),
                    shown(item.raw_id),
                    f"a zip of notebooks that cannot be opened: {exc}",
                )
            )
            continue
        files.notes.append(
            f"{shown(item.raw_id)}: {shown(item.filename)} unpacked ({len(inner.entries)} files)"
        )
        for bad in inner.problems:
            files.problems.append(
                problem(f"{shown(item.entry.name)}/{bad.file}", shown(item.raw_id), bad.problem)
            )
        for entry in inner.entries:
            named = entry.named((*item.entry.parts, *entry.parts))
            why = why_not(entry, files.limits) or (
                "a zip inside a zip: not opened" if entry.parts[-1].lower().endswith(".zip") else ""
            )
            if why:
                files.problems.append(problem(shown(named.name), shown(item.raw_id), why))
                continue
            found.append(replace(item, entry=named, filename=entry.parts[-1], source=inner))
    return found


def _copied_out(files: Source, item: Candidate, scratch: Path, spent: dict[str, int]) -> Source:
    """A learner's zip inside a zip, copied into ``scratch`` (zipfile cannot seek in a compressed
    member) when their budget still holds its declared size, and opened there."""
    budget = files.limits.student_bytes
    if spent[item.raw_id] + item.entry.size > budget:
        raise Refused(
            f"{item.entry.size / MiB:,.1f} MiB, more than the {budget / MiB:g} MiB one "
            "learner's files may come to: not copied"
        )
    spent[item.raw_id] += item.entry.size
    target = scratch / f"{len(list(scratch.iterdir()))}.zip"
    files.copy(item.entry, target)
    return Source(target, files.limits, label="it")


def _names_at_top(source: Path, limits: Limits) -> list[Entry]:
    """A look at the names in ``source``, down to 4 folders (course/submitted/<s>/<a>/ is 3 down),
    to tell its layout."""
    top = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return list_folder(top, limits, max_depth=4, strict=False, base=source)[0]
    finally:
        os.close(top)


def _renamed(source: Path, lms_ids: dict[str, str]) -> bool:
    """Whether a student folder of ``source`` is named by an LMS id the roster maps to another
    id."""
    return any(lms_ids.get(p.name, p.name) != p.name for p in source.iterdir() if p.is_dir())


def _as_it_is(
    source: Path,
    notebooks,
    people: dict,
    lms_ids: dict,
    stamps: list,
    problems: list[IntakeProblem],
) -> Intake:
    """The grader's layout already: ``source`` is used as it is; the roster and times are checked
    against it."""
    intake = Intake(source, "folders", problems=problems, roster=people)
    folders = sorted(p for p in source.iterdir() if p.is_dir() and not p.name.startswith("."))
    sent = {p.name for p in folders if walk_notebooks(p, 1)[0]}
    if people:
        for folder in folders:
            if folder.name not in people:
                intake.problems.append(
                    problem(
                        shown(folder.name),
                        shown(folder.name),
                        "not on the roster: graded under its folder's name",
                    )
                )
        intake.missing = sorted(set(people) - sent)
    _apply_stamps(intake, stamps, lms_ids, {p.name for p in folders})
    return intake


def _check_dest(source: Path, dest: Path) -> None:
    src, out = source.resolve(), dest.resolve()
    if src == out or src in out.parents or out in src.parents:
        raise UnusableInput(f"{dest} must be outside {source}, and {source} outside it")
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise UnusableInput(f"{dest} is not a folder")
    if dest.is_dir() and any(dest.iterdir()) and not (dest / MARKER).is_file():
        raise UnusableInput(
            f"{dest} holds files the intake did not write: give a new or empty folder"
        )


def _fresh_dest(dest: Path) -> None:
    """An empty ``dest`` (an earlier intake's folder, checked by _check_dest, is removed first)."""
    if dest.is_dir():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)


# -- the grader's layout
# ---------------------------------------------------------------------------------------------


def notebook_name(filename: str, notebooks: tuple[str, ...]) -> tuple[str, str]:
    """The course notebook a submitted file stands for, and how that was told ('' for its exact
    name). A file named like no notebook of the course keeps a safe form of its own name (the grader
    may still match it by its graded cells): then the second value says so."""
    stem = filename[:-6] if filename.lower().endswith(".ipynb") else filename
    if stem in notebooks:
        return stem, ""
    by_lower = {name.lower(): name for name in notebooks}
    for guess in (normalize(stem), normalize(RESUBMITTED.sub("", normalize(stem)))):
        if guess in by_lower:
            return by_lower[guess], "renamed"
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem).strip("._-")[:100] or "notebook"
    return safe, "unknown"


def student_id(raw: str, people: dict, lms_ids: dict[str, str]) -> tuple[str | None, str]:
    """The student id for an id the source gives, and a problem ('' for none). With a roster, an LMS
    id it maps is replaced; an id it lacks is kept (a student the roster missed still gets graded,
    and the problem says so, so that the roster can be fixed and the intake run again)."""
    student, why = lms_ids.get(raw, raw), ""
    if people and student not in people:
        why = "not on the roster: kept under the id the download gives"
    if not STUDENT_ID.fullmatch(student):
        odd = odd_characters(student)
        told = f"its name holds {odd}: " if odd else ""
        return None, (
            f"{told}cannot be a student id (use letters, digits, '_', '.', '@', '+' or "
            "'-'): not written"
        )
    return student, why


def newest(group: list[Candidate]) -> tuple[Candidate, str]:
    """The newest of several files for one notebook, and the basis: by submission time when each has
    one and they differ, else by ``order`` (Canvas's file id, the zip entry's date or the file's
    mtime)."""
    if all(c.when is not None for c in group):
        best = max(group, key=lambda c: (c.when, c.order, c.entry.name))
        tied = [c for c in group if c.when == best.when]
        if len(tied) == 1:
            return best, "submission time"
        group = tied
    return max(group, key=lambda c: (c.order, c.entry.name)), group[0].basis


def _place(
    files: Source,
    candidates: list[Candidate],
    notebooks,
    people: dict,
    lms_ids: dict,
    intake: Intake,
    spent: dict[str, int],
    ids_by_name=None,
) -> None:
    """Write each student's newest file for each notebook into ``intake.folder``, noting what was
    chosen; a student whose chosen files come to more than their budget gets none copied
    (``_over_budget``). With ``ids_by_name``, which file is each notebook is decided here, once
    (``_identify``)."""
    _check_roster_ids(intake.layout, {item.raw_id for item in candidates}, people, lms_ids)
    groups: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    told: set[str] = set()
    for item in candidates:
        student, why = student_id(item.raw_id, people, lms_ids)
        if why and (student is None or item.raw_id not in told):
            told.add(item.raw_id)
            intake.problems.append(problem(shown(item.entry.name), shown(item.raw_id), why))
        if student is None:
            continue
        groups[(student, notebook_name(item.filename, notebooks)[0])].append(item)
    picked: dict[str, list[tuple[str, Candidate]]] = defaultdict(list)
    for (student, stem), group in sorted(groups.items()):
        chosen, basis = newest(group)
        if len(group) > 1:
            others = ", ".join(shown(c.entry.name) for c in group if c is not chosen)
            intake.notes.append(
                f"newest of {len(group)} files for {student}/{stem} kept "
                f"({shown(chosen.entry.name)}, by {basis}); not used: {others}"
            )
        if len(picked[student]) >= files.limits.per_student:
            intake.problems.append(
                problem(
                    shown(chosen.entry.name),
                    student,
                    f"more than {files.limits.per_student} notebooks: not written",
                )
            )
            continue
        picked[student].append((stem, chosen))
    scratch = defaultdict(int)
    for raw, size in spent.items():
        scratch[student_id(raw, people, lms_ids)[0]] += size
    for student, picks in picked.items():
        if _over_budget(student, picks, scratch[student], files.limits, intake):
            continue
        placed = []
        for stem, chosen in picks:
            try:
                (chosen.source or files).copy(
                    chosen.entry, intake.folder / student / f"{stem}.ipynb"
                )
            except Refused as exc:
                intake.problems.append(problem(shown(chosen.entry.name), student, str(exc)))
                continue
            how = notebook_name(chosen.filename, notebooks)[1]
            _record(intake, student, stem, chosen, how)
            placed.append((stem, chosen, how))
        if ids_by_name is not None:
            intake.found[student] = _identify(
                intake, student, placed, notebooks, ids_by_name, files.limits.file_bytes
            )


def _identify(
    intake: Intake,
    student: str,
    placed: list,
    notebooks,
    ids_by_name: dict[str, set[str]],
    max_bytes: int,
) -> Found:
    """Which placed file is each of ``student``'s notebooks, decided once: a file named like a
    notebook is it; one named like none is the notebook whose graded cells it holds (or, holding no
    one notebook's, none: ignored); of two files for one notebook the newest is kept, as for two
    files of one name."""
    folder = intake.folder / student
    files: dict[str, tuple[Path, Candidate]] = {}
    notes: list[str] = []
    for stem, chosen, how in placed:
        path, notebook = folder / f"{stem}.ipynb", stem
        if how == "unknown":
            notebook = by_cells(path, notebooks, ids_by_name, max_bytes)
            if notebook is None:
                notes.append(f"ignored {path.name}: not a notebook of this course")
                continue
            notes.append(f"{path.name} matched by its graded cells → {notebook}.ipynb")
        if notebook in files:
            kept, basis = newest([files[notebook][1], chosen])
            other = path if kept is files[notebook][1] else files[notebook][0]
            notes.append(
                f"2 files for {notebook}.ipynb; graded "
                f"{(path if kept is chosen else files[notebook][0]).name} (newest by "
                f"{basis})"
            )
            if kept is chosen:
                files[notebook] = (path, chosen)
            intake.notes.append(
                f"{student}: {other.name} not graded: a newer file is {notebook}.ipynb"
            )
            continue
        files[notebook] = (path, chosen)
    return Found({name: files[name][0] if name in files else None for name in notebooks}, notes)


def _over_budget(
    student: str, picks: list[tuple[str, Candidate]], scratch: int, limits: Limits, intake: Intake
) -> bool:
    """Whether what ``student``'s chosen files come to (apparent sizes: a sparse file counts whole;
    a notebook in a zip by its declared size; a zip copied out of a zip by its own) is past their
    budget: then it is their named problem and none of their files is read; every other student is
    unaffected."""
    total = scratch + sum(chosen.entry.size for _, chosen in picks)
    if total <= limits.student_bytes:
        return False
    largest = sorted(picks, key=lambda pick: -pick[1].entry.size)
    listed = ", ".join(
        f"{shown(c.entry.parts[-1], 80)} {c.entry.size / MiB:,.1f} MiB" for _, c in largest[:3]
    )
    intake.problems.append(
        problem(
            shown(largest[0][1].entry.name),
            student,
            f"the files to be read come to {total / MiB:,.1f} MiB "
            f"({listed}{', ...' if len(picks) > 3 else ''}"
            f"{f'; zips copied out {scratch / MiB:,.1f} MiB' if scratch else ''}), more "
            f"than the {limits.student_bytes / MiB:g} MiB "
            "one learner's submission may take: none of them was read (every other student is)",
        )
    )
    return True


def _check_roster_ids(layout: str, raw: set[str], people: dict, lms_ids: dict) -> None:
    """A roster whose ids match under half of the download's stops the intake: every student it
    misses would be graded under an LMS id and every one on it listed as missing (a class of zeros
    in the LMS file)."""
    id_kind = ADAPTERS[layout].id_kind if layout in ADAPTERS else ""
    if not people or len(raw) < 2 or not id_kind:
        return
    matched = sum(1 for r in raw if r in lms_ids or r in people)
    if matched * 2 < len(raw):
        sample = ", ".join(shown(r, 40) for r in sorted(raw)[:5])
        raise UnusableInput(
            f"the roster's lms_id column matches {matched} of the {len(raw)} students in "
            f"the {layout} download (e.g. {sample}). "
            f"{id_kind}: put those ids in lms_id, or run without --roster"
        )


def _record(intake: Intake, student: str, stem: str, chosen: Candidate, how: str) -> None:
    """What the intake learned of one written notebook: its time, late flag, LMS names, renaming."""
    if how == "renamed":
        intake.notes.append(f"{student}: {shown(chosen.filename)} taken as {stem}.ipynb")
    elif how == "unknown":
        intake.notes.append(
            f"{student}: {shown(chosen.filename)} is named like no notebook of the "
            f"course: kept as {stem}.ipynb "
            "(the grader matches it by its graded cells, or lists it as not of this course)"
        )
    if chosen.when is not None:
        intake.times.setdefault(student, {})[stem] = chosen.when
    if chosen.disputed:
        intake.disputed.setdefault(student, {})[stem] = chosen.disputed
    if chosen.late:
        intake.late.setdefault(student, []).append(stem)
        intake.notes.append(
            f"{student}/{stem}: marked late by the LMS ({shown(chosen.entry.name)})"
        )
    if chosen.lms:
        held = intake.students.get(student)
        attachments = dict((held or {}).get("attachments", {}))
        # Canvas: each file's own attachment id (a page handed back goes under it)
        if chosen.lms.get("submission_id"):
            attachments[stem] = chosen.lms["submission_id"]
        if held is None or int(chosen.lms.get("submission_id") or 0) > int(
            held.get("submission_id") or 0
        ):
            intake.students[student] = dict(chosen.lms)
        if attachments:
            intake.students[student]["attachments"] = attachments
        zipped = list((held or {}).get("zipped", [])) + (
            [stem] if chosen.source is not None else []
        )
        # notebooks that came in the student's own zip (nbgrader's fetch_feedback cannot find their
        # pages)
        if zipped:
            intake.students[student]["zipped"] = zipped


def _apply_stamps(
    intake: Intake, stamps: list, lms_ids: dict, present: set[str] | None = None
) -> None:
    """The timestamps CSV's times, over those the source gave. A row without a notebook gives the
    student's time for every notebook (the key ``*``)."""
    present = (
        present if present is not None else {p.name for p in intake.folder.iterdir() if p.is_dir()}
    )
    for where, raw, notebook, when in stamps:
        student = lms_ids.get(raw, raw)
        if student not in present:
            intake.problems.append(
                problem(
                    where, shown(raw), "a time for a student who submitted nothing here: not used"
                )
            )
            continue
        intake.times.setdefault(student, {})[notebook or "*"] = when


# -- the roster and the timestamps CSVs
# --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CsvRow:
    """A row of a roster or timestamps CSV: its line, and its values by column (lower case)."""

    line: int
    values: dict[str, str]

    def get(self, column: str) -> str:
        """The value in ``column`` ("" when the file has no such column)."""
        return self.values.get(column, "")


def csv_rows(path: Path, required: tuple[str, ...]) -> list[CsvRow]:
    """A CSV's rows that hold any value; UnusableInput when it cannot be read or lacks a
    ``required`` column."""
    try:
        if path.stat().st_size > MAX_CSV_BYTES:
            raise UnusableInput(
                f"{path} is over {MAX_CSV_BYTES // 2**20} MB: not a roster or timestamps file"
            )
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInput(f"{path} could not be read ({type(exc).__name__}: {exc})") from None
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = [(name or "").strip().lower() for name in reader.fieldnames or []]
        absent = [c for c in required if c not in header]
        if absent:
            raise UnusableInput(
                f"{path} has no {', '.join(absent)} column (its columns: "
                f"{', '.join(header) or 'none'})"
            )
        rows = []
        for row in reader:
            values = {
                (k or "").strip().lower(): (v if isinstance(v, str) else "").strip()
                for k, v in row.items()
            }
            if any(values.values()):
                rows.append(CsvRow(reader.line_num, values))
    except csv.Error as exc:
        raise UnusableInput(f"{path} is not a CSV file ({exc})") from None
    return rows


def read_roster(path: Path, problems: list[IntakeProblem] | None = None) -> dict[str, RosterRow]:
    """Each student's row, by student id, from a CSV with a ``student_id`` column (and ``lms_id``,
    ``name``, ...). A row that cannot be used is added to ``problems``, or raises UnusableInput when
    no list is given."""
    roster: dict[str, RosterRow] = {}
    lms_ids: dict[str, str] = {}
    for row in csv_rows(Path(path), ("student_id",)):
        line, sid, lms_id = row.line, row.get("student_id"), row.get("lms_id")
        why = ""
        if not STUDENT_ID.fullmatch(sid):
            why = f"student_id {shown(sid, 60)!r} cannot be a student id"
        elif sid in roster:
            why = f"student {sid} is listed twice"
        elif lms_id and lms_id in lms_ids:
            why = f"lms_id {shown(lms_id, 60)} is given to {lms_ids[lms_id]} and {sid}"
        if why:
            if problems is None:
                raise UnusableInput(f"{path} line {line}: {why}")
            problems.append(
                problem(f"{Path(path).name}:{line}", None, f"{why}: the row is not used")
            )
            continue
        other = {
            k: v for k, v in row.values.items() if k and k not in ("student_id", "lms_id", "name")
        }
        roster[sid] = RosterRow(lms_id, row.get("name"), other)
        if lms_id:
            lms_ids[lms_id] = sid
    if not roster:
        raise UnusableInput(f"{path} lists no student")
    return roster


def read_timestamps(
    path: Path, notebooks: tuple[str, ...], problems: list[IntakeProblem]
) -> list[tuple[str, str, str | None, datetime]]:
    """(where, student, notebook or None, submitted at in UTC) for each row of a CSV with the
    columns ``student_id``, ``submitted_at`` (ISO 8601 with its zone) and, optionally, ``notebook``.
    A row that cannot be used is a problem."""
    found = []
    for row in csv_rows(Path(path), ("student_id", "submitted_at")):
        where, student, submitted = (
            f"{Path(path).name}:{row.line}",
            row.get("student_id"),
            row.get("submitted_at"),
        )
        notebook = row.get("notebook").removesuffix(".ipynb") or None
        try:
            # datetime reads any script's digits: a time is read from 0-9 only
            if not submitted.isascii():
                raise ValueError(submitted)
            when = datetime.fromisoformat(submitted)
            when = when.astimezone(UTC) if when.tzinfo else when
        except (ValueError, OverflowError):  # not a time, or not one UTC can hold
            when = None
        if notebook is not None and notebook not in notebooks:
            problems.append(
                problem(
                    where,
                    shown(student),
                    f"{shown(notebook, 60)} is not a notebook of the course: the row is not used",
                )
            )
        elif when is None or when.tzinfo is None:
            why = "has no time zone" if when else "is not an ISO 8601 time UTC can hold"
            problems.append(
                problem(
                    where,
                    shown(student),
                    f"submitted_at {shown(submitted, 60)!r} {why}: the row is not used",
                )
            )
        else:
            found.append((where, student, notebook, when))
    return found


def facts(intake: Intake) -> IntakeFacts:
    """What the intake found, as the ledger keeps it for the commands after it."""
    return IntakeFacts(
        layout=intake.layout,
        students={student: LmsStudent.from_json(who) for student, who in intake.students.items()},
        missing=tuple(intake.missing),
        late_in_lms={student: tuple(notebooks) for student, notebooks in intake.late.items()},
        problems=tuple(intake.problems),
        notes=tuple(intake.notes),
    )


def take_in(
    course: Course,
    submissions: Path,
    dest: Path,
    ledger: Ledger,
    layout: str | None = None,
    pattern: str | None = None,
    roster: Path | None = None,
    timestamps: Path | None = None,
    trust_owners: bool = False,
) -> Intake:
    """``grade``'s intake: SUBMISSIONS in any layout, as the grader's folders in ``dest``; what the
    intake found goes to the ledger (``ledger.intake``: kept in OUT for the commands after it), and
    its layout, problems and notes are said on stdout."""
    # every grade id, test cells too
    ids = {name: grade_ids(course.solutions / f"{name}.ipynb") for name in course.notebooks}
    intake = read_submissions(
        submissions,
        dest,
        course.notebooks,
        course.assignment,
        layout,
        pattern,
        roster,
        timestamps,
        trust_owners=trust_owners,
        ids_by_name=ids,
    )
    ledger.write_intake(facts(intake))
    if intake.layout != "folders" or intake.problems:
        print(
            f"intake: {intake.layout} layout, {len(intake.students) or '?'} student(s) named "
            f"by the LMS, {len(intake.problems)} problem(s)"
        )
    for problem_found in intake.problems:
        print(
            f"  intake problem: {problem_found.file or problem_found.student_id}: "
            f"{problem_found.problem}"
        )
    for note in intake.notes:
        print(f"  intake note: {note}")
    return intake


def check_extensions(extensions: dict, intake: Intake) -> None:
    """An extension keyed by a student's LMS id instead of their student id would be given to
    nobody: the run stops and says whose id it is."""
    students = {p.name for p in intake.folder.iterdir() if p.is_dir()} | set(intake.roster)
    lms_ids = {
        **{s: who.get("lms_id") for s, who in intake.students.items()},
        **{s: row.lms_id for s, row in intake.roster.items()},
    }
    by_lms = {str(lms_id): s for s, lms_id in lms_ids.items() if lms_id}
    wrong = [
        f"{key} (the LMS id of {by_lms[key]})"
        for key in sorted(extensions)
        if key not in students and key in by_lms
    ]
    if wrong:
        raise UnusableInput(
            f"the extensions file names students by their LMS id: {', '.join(wrong[:5])}. "
            "Its student_id column must hold the grader's student ids"
        )
