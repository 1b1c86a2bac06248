"""What each layout says of a file: whose it is, which notebook, when it was submitted.

Each reader takes the listed entries and returns candidates (a file, the id the source gives its owner,
its time); what cannot be used is a named problem of the source, never a silent skip and never a guess.
The owner comes only from the part of the name that the LMS or nbgrader wrote, read the way that system's
own importer reads it (``layouts.py``); the name the learner gave the file is only a file name. Every
value a learner wrote (times, zones, names) is parsed totally: a value that cannot be read is that
student's problem, never an exception.
"""

from __future__ import annotations

import logging
import os
import pwd
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..course import UnusableInput
from .layouts import CANVAS_ANON, CANVAS_TEXT, MOODLE_FLAT, MOODLE_FOLDER, canvas_splits, inbound_name
from .source import Entry, Limits, Refused, Source, problem, shown

ARCHIVES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar")
NBGRADER_FILES = {"timestamp.txt", "submission_secret.txt"}  # what nbgrader submit writes beside the notebooks
MAX_STAMP_BYTES = 200  # nbgrader's timestamp.txt holds one line of about 30 characters
# what nbgrader writes in timestamp.txt and inbound folder names ("%Y-%m-%d %H:%M:%S.%f %Z"), and ISO 8601
STAMP = re.compile(
    r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d{1,9})?)?( ?Z| ?[+-]\d\d:?\d\d| [A-Za-z][A-Za-z0-9_+-]{0,31}(/[A-Za-z0-9_+-]{1,32}){0,2})?"
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


def read_folders(files: Source, entries: list[Entry], context: dict) -> list[Candidate]:
    found = []
    for entry in entries:
        if len(entry.parts) < 2:
            files.problems.append(problem(shown(entry.name), None, "a file outside any student's folder: not used"))
            continue
        why = why_not(entry, context["limits"])
        if why:
            files.problems.append(problem(shown(entry.name), shown(entry.parts[0]), why))
        else:
            found.append(Candidate(entry.parts[0], entry, entry.parts[-1], order=entry.date))
    return found


# -- nbgrader's exchange -------------------------------------------------------------------------------------------------


def exchange_time(text: str) -> datetime:
    """A time as nbgrader writes it (timestamp.txt, an inbound folder's name), read by nbgrader's own
    ``parse_utc``; ValueError when it is not one, or not a time that UTC can hold. A named zone must be one
    the system knows (nbgrader would read an unknown one as UTC); a numeric zone is joined to the time
    first (``parse_utc`` reads ``-0500`` after a space as seconds)."""
    import dateutil.tz
    from nbgrader.utils import parse_utc

    text = text.strip()
    if not STAMP.fullmatch(text):
        raise ValueError(f"{shown(text, 60)!r} is not a time nbgrader writes")
    parts = text.split(" ")
    if len(parts) == 3 and re.fullmatch(r"[+-]\d\d:?\d\d|Z", parts[2]):
        text = f"{parts[0]} {parts[1]}{parts[2]}"
    elif len(parts) == 3 and dateutil.tz.gettz(parts[2]) is None:
        raise ValueError(f"unknown time zone {parts[2]!r}")
    try:
        when = parse_utc(text)
    except Exception as exc:  # a learner's text in a third-party parser: whatever it raises, the time is unknown
        raise ValueError(f"{shown(text, 60)!r} is not a time UTC can hold ({type(exc).__name__})") from None
    return when.replace(tzinfo=UTC)


def _stamp_of(files: Source, entry: Entry, student: str) -> datetime | None:
    try:
        return exchange_time(files.read(entry, MAX_STAMP_BYTES).decode("utf-8", "replace"))
    except ValueError as exc:  # Refused too
        files.problems.append(problem(shown(entry.name), shown(student), f"timestamp.txt: {exc}; the submission time is not known"))
        return None


def _owner(inside: list[Entry]) -> int | None:
    """The owner (uid) of a submission folder, from the files listed in it; None for a zip's members."""
    for entry in inside:
        if isinstance(entry.ref, Path):
            try:
                return os.stat(entry.ref.parents[len(entry.parts) - 1], follow_symlinks=False).st_uid
            except (OSError, IndexError):
                return None
    return None


def foreign_owner(uid: int | None, student: str) -> str:
    """The name of a folder's owner when it is someone other than the student it claims, the person
    running the intake and root ('' otherwise): on a shared exchange each student owns what they submit,
    so such a folder is someone else's (nbgrader collect's "cheating attempt?")."""
    if uid is None or uid in (0, os.geteuid()):
        return ""
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
    return "" if name == student else name


def _exchange_folders(files: Source, entries: list[Entry], context: dict) -> dict[tuple[str, str], list[Entry]]:
    """Each submission folder's files, by (student, folder): in ``submitted`` form ``<student>/<assignment>/``
    (what collect writes), in ``inbound`` form ``<student>+<assignment>+<timestamp>[+<random>]/`` only (a
    learner can make any folder in inbound/: no other shape is read there). Other assignments' folders are noted."""
    assignment, inbound = context["assignment"], context["form"] == "inbound"
    name = inbound_name(assignment)
    folders: dict[tuple[str, str], list[Entry]] = defaultdict(list)
    others: Counter = Counter()
    for entry in entries:
        match = name.fullmatch(entry.parts[0]) if inbound and len(entry.parts) > 1 else None
        if match:
            folders[(match["user"], entry.parts[0])].append(Entry(entry.parts[1:], entry.size, entry.date, entry.ref, entry.refused))
        elif not inbound and len(entry.parts) > 2 and entry.parts[1] == assignment:
            folders[(entry.parts[0], entry.parts[1])].append(Entry(entry.parts[2:], entry.size, entry.date, entry.ref, entry.refused))
        elif not inbound and len(entry.parts) > 2:
            others[entry.parts[1]] += 1
        elif inbound and len(entry.parts) > 1 and len(bits := entry.parts[0].rsplit("+", 3)) == 4:
            others[bits[1]] += 1
        else:
            shape = f"<student>+{assignment}+<time>/" if inbound else f"<student>/{assignment}/"
            files.problems.append(problem(shown(entry.name), None, f"not inside {shape}: not used"))
    for other, count in sorted(others.items()):
        files.notes.append(f"{count} files of another assignment ({shown(other)}) were not read")
    return folders


def read_exchange(files: Source, entries: list[Entry], context: dict) -> list[Candidate]:
    """nbgrader's submitted/ or inbound/ folders. In inbound/, the newest submission of each student is
    the one whose folder name says the latest time, as ``nbgrader collect`` sorts them; a folder owned by
    someone other than the student it names is not taken unless the instructor said so (``trust_owners``).
    The submission time is timestamp.txt's, as nbgrader reads it, else the folder name's."""
    assignment, limits = context["assignment"], context["limits"]
    newest: dict[str, tuple[tuple, str, list[Entry], datetime | None]] = {}
    for (student, folder), inside in sorted(_exchange_folders(files, entries, context).items()):
        owner = "" if context.get("trust_owners") else foreign_owner(_owner(inside), student)
        if owner:
            files.problems.append(
                problem(
                    shown(folder),
                    shown(student),
                    f"claims to be {shown(student)}'s but is owned by {shown(owner)} (a submission made in another's name?): "
                    "not used; if it is theirs, run again with --trust-owners",
                )
            )
            continue
        stamp = next((e for e in inside if e.parts == ("timestamp.txt",)), None)
        secret = next((e for e in inside if e.parts == ("submission_secret.txt",)), None)
        where = (folder,) if context["form"] == "inbound" else (student, folder)  # the folder's path in the source
        when = _stamp_of(files, Entry((*where, *stamp.parts), stamp.size, stamp.date, stamp.ref, stamp.refused), student) if stamp else None
        named = None
        if folder != assignment:
            try:
                named = exchange_time(inbound_name(assignment).fullmatch(folder)["stamp"])
            except ValueError as exc:
                files.problems.append(problem(shown(folder), shown(student), f"{exc}: the submission's time is not known"))
        handed = _handback_files(files, stamp if when is not None else None, secret)
        this = ((named is not None, named or datetime.min.replace(tzinfo=UTC), folder), folder, inside, when if when is not None else named, handed)
        held = newest.get(student)
        if held is not None:  # collect's order: the time in the folder's name, never a file the learner wrote
            this, older = (this, held) if this[0] > held[0] else (held, this)
            files.notes.append(
                f"{shown(student)}: an older submission ({shown(older[1])}) was not used: the newest by the time in its "
                "folder's name is kept, as nbgrader collect keeps it"
            )
        newest[student] = this
    found = []
    for student, (_order, folder, inside, when, handed) in newest.items():
        where = (folder,) if context["form"] == "inbound" else (student, folder)
        for entry in inside:
            if entry.parts[-1] in NBGRADER_FILES and len(entry.parts) == 1:
                continue
            named_entry = Entry((*where, *entry.parts), entry.size, entry.date, entry.ref, entry.refused)
            why = why_not(named_entry, limits)
            if why:
                files.problems.append(problem(shown(named_entry.name), shown(student), why))
            else:
                lms = {"layout": "exchange", **handed}
                found.append(Candidate(student, named_entry, entry.parts[-1], when=when, order=entry.date, lms=lms))
    return found


def _handback_files(files: Source, stamp: Entry | None, secret: Entry | None) -> dict[str, str]:
    """What nbgrader's release_feedback needs beside a student's pages, from their submission: its
    ``timestamp.txt`` (when it was read as a time) and ``submission_secret.txt`` (the key fetch_feedback
    finds the pages by). A secret that is not one short word of letters and digits is not kept."""
    kept = {}
    for key, entry in (("timestamp", stamp), ("secret", secret)):
        if entry is None:
            continue
        try:
            text = files.read(entry, MAX_STAMP_BYTES).decode("utf-8").strip()
        except (Refused, UnicodeDecodeError):
            continue
        if key == "timestamp" or re.fullmatch(r"[A-Za-z0-9_-]{1,128}", text):
            kept[key] = text
    return kept


# -- Canvas ------------------------------------------------------------------------------------------------------------


def canvas_files(names: list[str]) -> tuple[dict[str, dict], dict[str, str]]:
    """Whose each of a Canvas download's file names is: ({name: its reading}, {name: why none}).

    A name may allow several readings (a sortable name ending in ``_<digits>`` looks like an id, and so may
    the start of a file name). The true one is always among them and agrees with the rest of the download:
    Canvas writes the same name before all of one user's files, and every attachment id once. So a name
    with one reading fixes its user's name and its attachment id; a reading that contradicts a fixed one is
    dropped, until nothing changes. A name left with more than one reading is nobody's (a named problem):
    it is never given to a guessed student. A learner can make only their own file's name ambiguous."""
    anonymous = bool(names) and all(CANVAS_ANON.fullmatch(n) for n in names)
    readings: dict[str, list[dict]] = {}
    for name in names:
        splits = [] if anonymous else canvas_splits(name)
        if CANVAS_ANON.fullmatch(name) and not splits:  # a named file always has its true split: this one is anonymous
            m = CANVAS_ANON.fullmatch(name)
            readings[name] = [{"name": "", "late": bool(m["late"]), "user": m["user"], "attachment": m["attachment"], "file": m["file"]}]
        else:
            readings[name] = splits
    fixed_name: dict[str, str] = {}
    fixed_attachment: dict[str, str] = {}
    chosen: dict[str, dict] = {}
    why: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for name in sorted(readings):
            if name in chosen or name in why:
                continue
            left = [
                r for r in readings[name] if fixed_name.get(r["user"], r["name"]) == r["name"] and fixed_attachment.get(r["attachment"], name) == name
            ]
            if len(left) == 1:
                chosen[name] = left[0]
                fixed_name[left[0]["user"]], fixed_attachment[left[0]["attachment"]] = left[0]["name"], name
                changed = True
            elif not left:
                why[name] = "not named like a file of Canvas's download (name_userid_fileid_filename): not used"
    for name in readings:
        if name not in chosen and name not in why:
            users = " or ".join(sorted({r["user"] for r in readings[name]}))
            why[name] = (
                f"its name can be read as the file of Canvas user {users}, and nothing else in the download tells which: "
                "not used (the learner's own name or file name looks like an id; rename it as Canvas would and run again)"
            )
    return chosen, why


def read_canvas(files: Source, entries: list[Entry], context: dict) -> list[Candidate]:
    flat = [e for e in entries if len(e.parts) == 1 and not CANVAS_TEXT.fullmatch(e.parts[0])]
    chosen, why = canvas_files([e.parts[0] for e in flat])
    found = []
    for entry in entries:
        name = entry.parts[-1]
        if len(entry.parts) == 1 and CANVAS_TEXT.fullmatch(name):
            user = CANVAS_TEXT.fullmatch(name)["user"]
            files.problems.append(problem(shown(entry.name), user, "a text entry or web address, not a file: not a notebook"))
            continue
        match = chosen.get(name) if len(entry.parts) == 1 else None
        if match is None:
            reason = why.get(name, "inside a folder, not a file of Canvas's download (name_userid_fileid_filename): not used")
            files.problems.append(problem(shown(entry.name), None, reason))
            continue
        reason = why_not(entry, context["limits"], match["file"])
        if reason:
            files.problems.append(problem(shown(entry.name), match["user"], reason))
            continue
        lms = {"layout": "canvas", "lms_id": match["user"], "name": match["name"], "submission_id": match["attachment"]}
        order = int(match["attachment"])
        found.append(Candidate(match["user"], entry, match["file"], order=order, basis="Canvas file id", late=match["late"], lms=lms))
    return found


# -- Moodle ------------------------------------------------------------------------------------------------------------


def read_moodle(files: Source, entries: list[Entry], context: dict) -> list[Candidate]:
    found = []
    for entry in entries:
        top = entry.parts[0]
        match = MOODLE_FOLDER.fullmatch(top) if len(entry.parts) > 1 else MOODLE_FLAT.fullmatch(top)
        if match is None:
            why = "not named like Moodle's download (Full Name_participant id_assignsubmission_file; a team without a group has no id): not used"
            files.problems.append(problem(shown(entry.name), None, why))
            continue
        filename = entry.parts[-1] if len(entry.parts) > 1 else match["file"]
        why = why_not(entry, context["limits"], filename)
        if match["plugin"] != "file" and not why:
            why = f"from Moodle's {match['plugin']} submission, not a file submission: not used"
        if why:
            files.problems.append(problem(shown(entry.name), match["user"], why))
            continue
        lms = {"layout": "moodle", "lms_id": match["user"], "name": match["name"], "folder": top if len(entry.parts) > 1 else ""}
        found.append(Candidate(match["user"], entry, filename, order=entry.date, basis="file date in the zip", lms=lms))
    return found


# -- a pattern of the instructor's ---------------------------------------------------------------------------------------


class _Quiet(logging.Logger):
    """nbgrader's plugin logs a warning for each file its pattern misses: each is a problem here instead."""

    def __init__(self) -> None:
        super().__init__("autograde.term.pattern", logging.CRITICAL + 1)


def pattern_time(text: str) -> tuple[datetime, bool]:
    """A file name's timestamp (ISO 8601, or what nbgrader's parse_utc reads) in UTC, and whether it had a
    zone; ValueError when it is neither, or not a time UTC can hold."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return exchange_time(text), True  # nbgrader's reading; ValueError when it fails too
    try:
        return (when.astimezone(UTC), True) if when.tzinfo else (when.replace(tzinfo=UTC), False)
    except OverflowError:
        raise ValueError(f"{shown(text, 60)!r} is not a time UTC can hold") from None


def read_pattern(files: Source, entries: list[Entry], context: dict) -> list[Candidate]:
    """Files named as the pattern says, matched by nbgrader's FileNameCollectorPlugin (``re.match`` on
    the file's path from the top of the source, where nbgrader gives it the absolute path)."""
    from nbgrader.plugins.zipcollect import FileNameCollectorPlugin

    pattern = context["pattern"]
    try:
        groups = re.compile(pattern).groupindex
    except re.error as exc:
        raise UnusableInput(f"the pattern is not a regular expression: {exc}") from None
    if "student_id" not in groups:
        raise UnusableInput("the pattern needs a (?P<student_id>...) group (and may have file_id and timestamp)")
    plugin = FileNameCollectorPlugin(named_regexp=pattern, valid_ext=[".ipynb"], log=_Quiet())
    found, naive = [], 0
    for entry in entries:
        path = entry.name[:-6] + ".ipynb" if entry.name.lower().endswith(".ipynb") else entry.name
        # the plugin skips other files unmatched: matched here only to say whose they are
        info = plugin.collect(path) if path.endswith(".ipynb") else (m.groupdict() if (m := re.match(pattern, path)) else None)
        student = (info or {}).get("student_id")
        why = why_not(entry, context["limits"]) or ("" if student else "does not match the pattern (or its student_id is empty): not used")
        if why:
            files.problems.append(problem(shown(entry.name), shown(student) if student else None, why))
            continue
        file_id = info.get("file_id")
        filename = Path(os.path.splitext(file_id)[0]).name + ".ipynb" if file_id else entry.parts[-1]
        when = None
        if info.get("timestamp"):
            try:
                when, zoned = pattern_time(info["timestamp"])
                naive += not zoned
            except ValueError as exc:
                files.problems.append(problem(shown(entry.name), shown(student), f"its timestamp is not understood ({exc}): its time is not known"))
        found.append(Candidate(student, entry, filename, when=when, order=entry.date))
    if naive:
        files.notes.append(f"{naive} timestamps without a time zone were read as UTC, as nbgrader does")
    return found


READERS = {"folders": read_folders, "exchange": read_exchange, "canvas": read_canvas, "moodle": read_moodle, "pattern": read_pattern}


__all__ = ["READERS", "Candidate", "Refused", "exchange_time", "pattern_time", "why_not"]
