"""Turn what an instructor downloads into the grader's layout, ``SUBMISSIONS/<student_id>/<notebook>.ipynb``,
so that grading itself does not change.

Layouts (``LAYOUTS``), told apart by their names unless ``layout=`` says which:

- ``folders``: the grader's own layout, a folder per student. A folder is used as it is; a zip of one is
  extracted.
- ``exchange``: nbgrader's ``submitted/<student>/<assignment>/`` (what ``nbgrader collect`` writes),
  given as the course folder, as ``submitted/`` itself, or zipped; or the exchange's
  ``inbound/<student>+<assignment>+<timestamp>[+<random>]/``, where the newest submission of each
  student is used, as ``nbgrader collect`` does. ``timestamp.txt`` gives the submission time.
- ``canvas``: Canvas's "Download submissions" zip, flat files named
  ``<name>_[LATE_]<user id>_<file id>_<file name>`` (``LATE_anon_<id>_<file id>_<file name>`` when
  the assignment is graded anonymously); the file name may end in ``-1``, ``-2`` when Canvas renamed a
  resubmitted file.
- ``moodle``: Moodle's "Download all submissions" zip: a folder per participant named
  ``<Full Name>_<participant id>_assignsubmission_file[_]``, or flat files
  ``<Full Name>_<participant id>_assignsubmission_file_<file name>``.
- ``pattern``: any other naming, through a regular expression with the named groups ``student_id``
  (required), ``file_id`` (which notebook; the file's own name when absent) and ``timestamp``, matched
  from the start of each file's path, as nbgrader's ``FileNameCollectorPlugin`` matches it.

Everything read is untrusted: a zip is checked whole before anything is written (entry count, declared
sizes), each member by name and kind (no path that climbs out or is absolute, no link, no device), and
extracted member by member into a name built here, never the member's own path, stopping when more comes
out than it declared. Whatever cannot be used is a named problem (``Intake.problems``), never a silent
skip; an input that cannot be used at all raises ``UnusableInput``.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
import shutil
import stat
import zipfile
import zlib
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .course import UnusableInput
from .matching import MAX_FILES as MAX_NOTEBOOKS_PER_STUDENT
from .matching import normalize, walk_notebooks
from .model import MAX_NOTEBOOK_BYTES, STUDENT_ID, GiB

LAYOUTS = ("folders", "exchange", "canvas", "moodle", "pattern")
MAX_TOTAL_BYTES = 2 * GiB  # declared by a zip's members, all together, and written by the intake
MAX_FILES = 20_000  # members of a zip, or files and folders under a source folder
MAX_DEPTH = 16  # folders below a source folder that are looked into
MAX_CSV_BYTES = 10 * 1024 * 1024  # a roster or timestamps CSV
MAX_STAMP_BYTES = 200  # nbgrader's timestamp.txt holds one line of about 30 characters
MARKER = ".intake.json"  # in DEST: what the intake wrote there (a later intake may then replace it)
CHUNK = 1 << 20

# what zip tools and Jupyter add beside the files: not submissions (counted in a note)
SKIPPED = {".ipynb_checkpoints", "__MACOSX", ".DS_Store", "Thumbs.db"}
ARCHIVES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar")
NBGRADER_FILES = {"timestamp.txt", "submission_secret.txt"}  # what nbgrader submit writes beside the notebooks

# Canvas (lib/content_zipper.rb): [sortable name (lower case, only word characters, "_<digits>_" taken
# out), "LATE" when late, user id].join("_"), then "_<attachment id>_<file name>". With anonymous
# grading the name is left out and the id is "anon_<anonymous id>". Older Canvas wrote "late".
CANVAS_ANON = re.compile(r"(?P<late>(?i:late)_)?(?P<user>anon_[A-Za-z0-9]+)_(?P<attachment>\d+)_(?P<file>.+)")
CANVAS_FILE = re.compile(r"(?P<late0>(?i:late)_)?(?P<name>.*?)_(?P<late>(?i:late)_)?(?P<user>\d+)_(?P<attachment>\d+)_(?P<file>.+)")
CANVAS_TEXT = re.compile(r"(?:(?i:late)_)?(?:.*?_)?(?:(?i:late)_)?(?P<user>\d+|anon_[A-Za-z0-9]+)_(?:text|link)\.html")
# Moodle (mod/assign/classes/downloader.php): clean_filename(full name, "_" made " ", "_" participant id)
# "_assignsubmission_file" then "/" and the file's path (with a "_" before the "/" up to Moodle 4.0),
# or, with "download submissions in folders" off, "_" and the file name.
MOODLE_FOLDER = re.compile(r"(?P<name>.*)_(?P<user>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?")
MOODLE_FLAT = re.compile(r"(?P<name>.*)_(?P<user>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<file>.+)")
RESUBMITTED = re.compile(r"-\d{1,3}$")  # Canvas's "name-1.ipynb" for a second file of one name
# what nbgrader writes in timestamp.txt and inbound folder names ("%Y-%m-%d %H:%M:%S.%f %Z"), and ISO 8601
STAMP = re.compile(
    r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d{1,9})?)?( ?Z| ?[+-]\d\d:?\d\d| [A-Za-z][A-Za-z0-9_+-]{0,31}(/[A-Za-z0-9_+-]{1,32}){0,2})?"
)


@dataclass(frozen=True)
class Limits:
    total_bytes: int = MAX_TOTAL_BYTES
    file_bytes: int = MAX_NOTEBOOK_BYTES  # a larger notebook is a named problem, not extracted
    files: int = MAX_FILES
    depth: int = MAX_DEPTH
    per_student: int = MAX_NOTEBOOKS_PER_STUDENT  # the grader looks at no more .ipynb files of one student


@dataclass
class Intake:
    folder: Path  # SUBMISSIONS in the grader's layout
    layout: str
    times: dict[str, dict[str, datetime]] = field(default_factory=dict)  # student -> notebook ("*": any) -> submitted at (UTC)
    problems: list[dict] = field(default_factory=list)  # {"file", "student_id", "problem"}
    roster: dict[str, dict] = field(default_factory=dict)  # student -> {"lms_id", "name", other roster columns}
    missing: list[str] = field(default_factory=list)  # roster students who submitted nothing
    notes: list[str] = field(default_factory=list)
    late: dict[str, list[str]] = field(default_factory=dict)  # student -> notebooks the LMS marked late
    students: dict[str, dict] = field(default_factory=dict)  # student -> what the LMS called them (canvas, moodle)


@dataclass(frozen=True)
class Entry:
    """A file of the source: its path there (in parts), declared size, date, and where to read it."""

    parts: tuple[str, ...]
    size: int
    date: float  # the zip entry's date or the file's mtime (seconds): the order of last resort
    ref: object  # zipfile.ZipInfo or Path
    refused: str = ""  # why it may not be read (a link, a device, encrypted)

    @property
    def name(self) -> str:
        return "/".join(self.parts)


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


class Refused(ValueError):
    """A member that cannot be extracted (corrupt, or more data than it declared)."""


def problem(file: str, student: str | None, text: str) -> dict:
    return {"file": file, "student_id": student, "problem": text}


def shown(name: str, limit: int = 300) -> str:
    """A name from the source, safe to print (control characters escaped, cut short)."""
    text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
    return text if len(text) <= limit else text[:limit] + "..."


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
) -> Intake:
    """Read ``source`` (a folder or a zip) in ``layout`` (recognised when None) into ``dest`` in the
    grader's layout. ``source`` is returned as it is (``Intake.folder``) when it already is in that
    layout and no roster id needs a folder renamed; otherwise ``dest`` is filled (it must be new, empty,
    or an earlier intake's, which is replaced). ``roster``: a CSV of ``student_id`` [, ``lms_id``,
    ``name``...]; ``timestamps``: a CSV of ``student_id`` [, ``notebook``], ``submitted_at``."""
    source, dest = Path(source), Path(dest)
    if layout is not None and layout not in LAYOUTS:
        raise UnusableInput(f"layout {layout!r}: use one of {', '.join(LAYOUTS)}")
    if pattern is not None and layout not in (None, "pattern"):
        raise UnusableInput(f"a pattern is for the pattern layout, not {layout}")
    if layout == "pattern" and not pattern:
        raise UnusableInput("the pattern layout needs a pattern: a regular expression with a (?P<student_id>...) group")
    if not source.is_dir() and not source.is_file():
        raise UnusableInput(f"{source}: no such folder or zip file")
    problems: list[dict] = []
    people = read_roster(roster, problems) if roster else {}
    lms_ids = {who["lms_id"]: student for student, who in people.items() if who.get("lms_id")}
    stamps = read_timestamps(timestamps, notebooks, problems) if timestamps else []
    wanted = layout or ("pattern" if pattern else None)
    root: tuple[str, ...] = ()
    if source.is_dir():  # a folder is listed fully only below where its layout starts (course/submitted/, ...)
        shallow, _ = list_folder(source, limits, max_depth=5, strict=False)  # course/submitted/<s>/<a>/timestamp.txt is 4 down
        found, root = choose_layout([e.parts for e in shallow], assignment, wanted) if shallow else (wanted or "folders", ())
        if found == "folders" and not root and not _renamed(source, lms_ids):
            return _as_it_is(source, notebooks, people, lms_ids, stamps, problems)
    _check_dest(source, dest)
    with Source(source, limits, root) as files:
        if files.archive is not None:
            found, root = choose_layout([e.parts for e in files.entries], assignment, wanted)
        entries = [Entry(e.parts[len(root) :], e.size, e.date, e.ref, e.refused) for e in files.entries if e.parts[: len(root)] == root]
        if root:
            files.notes.append(f"only {shown('/'.join(root))}/ was read")
        reader = {"folders": _read_folders, "exchange": _read_exchange, "canvas": _read_canvas, "moodle": _read_moodle, "pattern": _read_pattern}
        candidates = reader[found](files, entries, assignment, pattern or "", limits)
        _fresh_dest(dest)
        intake = Intake(dest, found, problems=files.problems + problems, roster=people, notes=files.notes)
        _place(files, candidates, notebooks, people, lms_ids, intake)
    _apply_stamps(intake, stamps, lms_ids)
    submitted = {p.name for p in dest.iterdir() if p.is_dir()}
    intake.missing = sorted(set(people) - submitted)
    marker = {"layout": found, "students": len(submitted), "problems": intake.problems, "notes": intake.notes}
    (dest / MARKER).write_text(json.dumps(marker, indent=1, ensure_ascii=False), encoding="utf-8")
    return intake


def _renamed(source: Path, lms_ids: dict[str, str]) -> bool:
    """Whether a student folder of ``source`` is named by an LMS id the roster maps to another id."""
    return any(lms_ids.get(p.name, p.name) != p.name for p in source.iterdir() if p.is_dir())


def _as_it_is(source: Path, notebooks, people: dict, lms_ids: dict, stamps: list, problems: list[dict]) -> Intake:
    """The grader's layout already: ``source`` is used as it is; the roster and times are checked against it."""
    intake = Intake(source, "folders", problems=problems, roster=people)
    folders = sorted(p for p in source.iterdir() if p.is_dir() and not p.name.startswith("."))
    sent = {p.name for p in folders if walk_notebooks(p, 1)[0]}
    if people:
        for folder in folders:
            if folder.name not in people:
                intake.problems.append(problem(shown(folder.name), shown(folder.name), "not on the roster: graded under its folder's name"))
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
        raise UnusableInput(f"{dest} holds files the intake did not write: give a new or empty folder")


def _fresh_dest(dest: Path) -> None:
    """An empty ``dest`` (an earlier intake's folder, checked by _check_dest, is removed first)."""
    if dest.is_dir():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)


# -- the source: a folder or a zip, listed once within the limits ------------------------------------------------


class Source:
    """The files of a folder or a zip, listed within ``limits``; read member by member with the caps."""

    def __init__(self, path: Path, limits: Limits, under: tuple[str, ...] = ()):
        self.path, self.limits, self.written = path, limits, 0
        self.archive: zipfile.ZipFile | None = None
        self.problems: list[dict] = []
        if path.is_dir():  # only the files ``under`` that folder of it (their paths start with it)
            found, self.notes = list_folder(path.joinpath(*under), limits, limits.depth, strict=True)
            self.entries = [Entry((*under, *e.parts), e.size, e.date, e.ref, e.refused) for e in found]
        else:
            self.archive = open_zip(path, limits)
            self.entries, self.problems, self.notes = zip_entries(self.archive, limits)

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc) -> None:
        if self.archive is not None:
            self.archive.close()

    def open(self, entry: Entry):
        if entry.refused:
            raise Refused(entry.refused)
        if self.archive is not None:
            return self.archive.open(entry.ref)  # type: ignore[arg-type]
        fd = os.open(entry.ref, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # type: ignore[arg-type]
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # changed since it was listed
            os.close(fd)
            raise Refused("not a plain file")
        return os.fdopen(fd, "rb")

    def read(self, entry: Entry, limit: int) -> bytes:
        """A small file whole (nbgrader's timestamp.txt); Refused when it is larger than ``limit``."""
        if entry.size > limit:
            raise Refused(f"{entry.size:,} bytes, more than the {limit} a timestamp takes")
        try:
            with self.open(entry) as handle:
                data = handle.read(limit + 1)
        except (OSError, zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
            raise Refused(f"could not be read ({type(exc).__name__}: {exc})") from None
        if len(data) > limit:
            raise Refused(f"more than the {limit} bytes a timestamp takes")
        return data

    def copy(self, entry: Entry, target: Path) -> None:
        """Write ``entry`` to ``target`` (a new file), stopping when more comes out than it declared."""
        try:
            target.parent.mkdir(exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise Refused(f"could not be written ({type(exc).__name__}: {exc})") from None
        got = 0
        try:
            with os.fdopen(fd, "wb") as out, self.open(entry) as handle:
                while chunk := handle.read(CHUNK):
                    got += len(chunk)
                    if got > entry.size:
                        raise Refused(f"more data than the {entry.size:,} bytes it declares (a zip bomb?): not extracted")
                    if self.written + got > self.limits.total_bytes:
                        raise UnusableInput(f"{self.path}: more than {self.limits.total_bytes / GiB:g} GiB would be extracted")
                    out.write(chunk)
        except (OSError, zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
            _remove(target)
            raise Refused(f"could not be extracted ({type(exc).__name__}: {exc})") from None
        except BaseException:
            _remove(target)
            raise
        self.written += got


def _remove(target: Path) -> None:
    """A file that was not fully written, and its student's folder when that is left empty."""
    target.unlink(missing_ok=True)
    try:
        target.parent.rmdir()
    except OSError:  # it holds the student's other notebooks
        pass


def zip_directory(path: Path) -> tuple[int, int] | None:
    """(entries, bytes) of the central directory a zip's end record declares, read before ``zipfile``
    builds an object for each entry (a directory of millions would fill the memory first). None: no
    end record was found (``zipfile`` then says what is wrong)."""
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        tail_size = min(size, 22 + 0xFFFF + 20)
        handle.seek(size - tail_size)
        tail = handle.read(tail_size)
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or at + 22 > len(tail):
            return None
        count, length = int.from_bytes(tail[at + 10 : at + 12], "little"), int.from_bytes(tail[at + 12 : at + 16], "little")
        locator = tail[at - 20 : at] if at >= 20 else b""
        if locator[:4] == b"PK\x06\x07":  # zip64: the numbers are in the zip64 end record
            handle.seek(int.from_bytes(locator[8:16], "little"))
            record = handle.read(56)
            if record[:4] == b"PK\x06\x06":
                count, length = int.from_bytes(record[32:40], "little"), int.from_bytes(record[40:48], "little")
    return count, length


def open_zip(path: Path, limits: Limits) -> zipfile.ZipFile:
    """The zip at ``path``, refused whole (UnusableInput) when it is not one, or holds more entries or
    declares more bytes than the limits allow (checked before anything is extracted)."""
    try:
        directory = zip_directory(path)
        # an entry takes 46 bytes and its name (up to 1,000 here) and extra fields (a few dozen) in the directory
        if directory is not None and (directory[0] > limits.files or directory[1] > limits.files * 2048):
            raise UnusableInput(f"{path} holds {directory[0]:,} entries, more than the {limits.files:,} the intake reads: refused whole")
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise UnusableInput(f"{path} is not a readable zip file ({type(exc).__name__}: {exc})") from None
    infos = archive.infolist()
    total = sum(info.file_size for info in infos)
    if len(infos) > limits.files or total > limits.total_bytes:
        archive.close()
        what = f"{len(infos):,} entries" if len(infos) > limits.files else f"{total / GiB:.2f} GiB once extracted"
        raise UnusableInput(
            f"{path} holds {what}, more than the intake reads ({limits.files:,} entries, {limits.total_bytes / GiB:g} GiB): refused whole"
        )
    return archive


def unsafe_name(name: str) -> str:
    """Why a zip member's name may not be used ('' when it may)."""
    if any(not c.isprintable() for c in name):
        return "control characters in its name"
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        return "an absolute path: refused"
    if ".." in re.split(r"[/\\]", name):
        return "a path that climbs out of the archive (..): refused"
    if len(name) > 1000:
        return "a name over 1,000 characters"
    return ""


def zip_entries(archive: zipfile.ZipFile, limits: Limits) -> tuple[list[Entry], list[dict], list[str]]:
    """The zip's files, each checked by name and kind; refused names are problems, refused kinds
    (links, devices, encrypted) are entries marked refused, so that whose they are can be told."""
    entries, problems, skipped = [], [], 0
    for info in archive.infolist():
        why = unsafe_name(info.filename)
        if why:
            problems.append(problem(shown(info.filename), None, why))
            continue
        parts = tuple(p for p in re.split(r"[/\\]", info.filename) if p not in ("", "."))
        kind = stat.S_IFMT(info.external_attr >> 16)
        if info.is_dir() or kind == stat.S_IFDIR or not parts:
            continue
        if SKIPPED & set(parts):
            skipped += 1
            continue
        refused = ""
        if kind == stat.S_IFLNK:
            refused = "a symbolic link: refused (submissions must be plain files)"
        elif kind not in (0, stat.S_IFREG):
            refused = "not a plain file (a device, pipe or socket): refused"
        elif info.flag_bits & 0x1:
            refused = "encrypted: cannot be read"
        try:
            date = datetime(*info.date_time).timestamp()
        except (ValueError, OverflowError):  # a zero or impossible date
            date = 0.0
        entries.append(Entry(parts, info.file_size, date, info, refused))
    notes = [f"skipped {skipped} files that zip tools and Jupyter add (__MACOSX, .ipynb_checkpoints, .DS_Store)"] if skipped else []
    return entries, problems, notes


def list_folder(folder: Path, limits: Limits, max_depth: int, strict: bool) -> tuple[list[Entry], list[str]]:
    """The files under ``folder``, nearest the top first, down to ``max_depth`` folders, following no
    link. More than ``limits.files`` files and folders: UnusableInput when ``strict``, else the list so
    far (enough to recognise a layout by)."""
    entries: list[Entry] = []
    notes: list[str] = []
    queue = deque([(folder, ())])
    seen = skipped = 0
    too_deep = False
    while queue:
        current, parts = queue.popleft()
        try:
            with os.scandir(current) as listing:
                items = []
                for item in listing:
                    seen += 1
                    if seen > limits.files:
                        if strict:
                            raise UnusableInput(f"{folder} holds more than {limits.files:,} files and folders: refused whole")
                        return entries, notes
                    items.append(item)
        except OSError as exc:
            notes.append(f"{shown('/'.join(parts)) or folder.name} could not be read ({type(exc).__name__})")
            continue
        for item in sorted(items, key=lambda i: i.name):
            here = (*parts, item.name)
            if item.name in SKIPPED:
                skipped += 1
            elif item.is_symlink():
                entries.append(Entry(here, 0, 0.0, Path(item.path), "a symbolic link: refused (submissions must be plain files)"))
            elif item.is_dir(follow_symlinks=False):
                too_deep |= len(here) >= max_depth
                if len(here) < max_depth:
                    queue.append((Path(item.path), here))
            else:
                info = item.stat(follow_symlinks=False)
                refused = "" if stat.S_ISREG(info.st_mode) else "not a plain file (a device, pipe or socket): refused"
                entries.append(Entry(here, info.st_size, info.st_mtime, Path(item.path), refused))
    if skipped:
        notes.append(f"skipped {skipped} files and folders that zip tools and Jupyter add (__MACOSX, .ipynb_checkpoints, .DS_Store)")
    if too_deep and strict:
        notes.append(f"folders more than {max_depth} levels down were not read")
    return entries, notes


# -- which layout ----------------------------------------------------------------------------------------------------


def inbound_name(assignment: str) -> re.Pattern:
    """An exchange inbound folder's name: ``<student>+<assignment>+<timestamp>[+<random>]``."""
    return re.compile(rf"(?P<user>.+)\+{re.escape(assignment)}\+(?P<stamp>[^+]+)(?:\+[^+]*)?")


def look(paths: list[tuple[str, ...]], assignment: str) -> tuple[str | None, tuple[str, ...]]:
    """The layout ``paths`` look like, and the folder it starts in (() for the top)."""
    tops = {p[0] for p in paths if len(p) > 1}
    flat = [p[0] for p in paths if len(p) == 1]
    if "submitted" in tops:
        return "exchange", ("submitted",)
    if "inbound" in tops:
        return "exchange", ("inbound",)
    inbound = inbound_name(assignment)
    if any(len(p) == 3 and p[1:] == (assignment, "timestamp.txt") for p in paths) or any(inbound.fullmatch(t) for t in tops):
        return "exchange", ()
    if any(MOODLE_FOLDER.fullmatch(t) for t in tops) or any(MOODLE_FLAT.fullmatch(f) for f in flat):
        return "moodle", ()
    if any(CANVAS_ANON.fullmatch(f) or CANVAS_FILE.fullmatch(f) for f in flat):
        return "canvas", ()
    return ("folders" if tops else None), ()


def choose_layout(paths: list[tuple[str, ...]], assignment: str, layout: str | None = None) -> tuple[str, tuple[str, ...]]:
    """(layout, the folder it starts in): ``layout`` when given, else the one ``paths`` look like. A
    download re-zipped inside one folder (a single folder holding folders or LMS files, and no file of
    its own) is looked into."""
    if layout == "pattern":
        return "pattern", ()
    found = [look(paths, assignment)]
    tops = {p[0] for p in paths}
    if len(tops) == 1 and all(len(p) > 1 for p in paths):
        inner, root = look([p[1:] for p in paths], assignment)
        wrapper = found[0][0] in (None, "folders") and inner is not None and (inner != "folders" or all(len(p) > 2 for p in paths))
        found.insert(0 if wrapper else 1, (inner, (*tops, *root)))
    if layout is not None:
        return layout, next((root for name, root in found if name == layout), ())
    for name, root in found:
        if name is not None:
            return name, root
    raise UnusableInput(
        "the layout of the submissions could not be told from their names: give it (folders, exchange, canvas, moodle, "
        "or pattern with a regular expression)"
    )


# -- what each layout says of a file -----------------------------------------------------------------------------------


def why_not(entry: Entry, limits: Limits, filename: str | None = None) -> str:
    """Why a file cannot be a submitted notebook ('' when it can)."""
    name = (filename or entry.parts[-1]).lower()
    if entry.refused:
        return entry.refused
    if name.endswith(ARCHIVES):
        return "an archive inside the submission: not opened (submit the notebooks themselves)"
    if not name.endswith(".ipynb"):
        return "not a notebook (.ipynb): not used"
    if entry.size > limits.file_bytes:
        return f"{entry.size / 2**20:.1f} MB, over the {limits.file_bytes / 2**20:g} MB limit for a submitted notebook: not extracted"
    return ""


def _read_folders(files: Source, entries: list[Entry], assignment: str, pattern: str, limits: Limits) -> list[Candidate]:
    found = []
    for entry in entries:
        if len(entry.parts) < 2:
            files.problems.append(problem(shown(entry.name), None, "a file outside any student's folder: not used"))
            continue
        why = why_not(entry, limits)
        if why:
            files.problems.append(problem(shown(entry.name), shown(entry.parts[0]), why))
        else:
            found.append(Candidate(entry.parts[0], entry, entry.parts[-1], order=entry.date))
    return found


def exchange_time(text: str) -> datetime:
    """A time as nbgrader writes it (timestamp.txt, an inbound folder's name), read by nbgrader's own
    ``parse_utc``; ValueError when it is not one. A named zone must be one the system knows (nbgrader
    would read an unknown one as UTC); a numeric zone is joined to the time first (``parse_utc`` reads
    ``-0500`` after a space as seconds)."""
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
    when = parse_utc(text)
    return when.replace(tzinfo=UTC)


def _stamp_of(files: Source, entry: Entry, student: str) -> datetime | None:
    try:
        return exchange_time(files.read(entry, MAX_STAMP_BYTES).decode("utf-8", "replace"))
    except ValueError as exc:  # Refused too
        files.problems.append(problem(shown(entry.name), shown(student), f"timestamp.txt: {exc}; the submission time is not known"))
        return None


def _exchange_folders(files: Source, entries: list[Entry], assignment: str) -> dict[tuple[str, str], list[Entry]]:
    """Each submission folder's files, by (student, folder): ``<student>/<assignment>/`` (submitted)
    or ``<student>+<assignment>+<timestamp>/`` (inbound). Other assignments' folders are noted."""
    inbound = inbound_name(assignment)
    folders: dict[tuple[str, str], list[Entry]] = defaultdict(list)
    others: Counter = Counter()
    for entry in entries:
        match = inbound.fullmatch(entry.parts[0]) if len(entry.parts) > 1 else None
        if match:
            folders[(match["user"], entry.parts[0])].append(Entry(entry.parts[1:], entry.size, entry.date, entry.ref, entry.refused))
        elif len(entry.parts) > 2 and entry.parts[1] == assignment:
            folders[(entry.parts[0], entry.parts[1])].append(Entry(entry.parts[2:], entry.size, entry.date, entry.ref, entry.refused))
        elif len(entry.parts) > 2 or (len(entry.parts) == 2 and "+" in entry.parts[0]):
            others[entry.parts[1] if len(entry.parts) > 2 else entry.parts[0].split("+")[1]] += 1
        else:
            files.problems.append(problem(shown(entry.name), None, f"not inside <student>/{assignment}/: not used"))
    for name, count in sorted(others.items()):
        files.notes.append(f"{count} files of another assignment ({shown(name)}) were not read")
    return folders


def _later(a: tuple, b: tuple) -> bool:
    """Whether submission ``a`` (time or None, folder, files) is newer than ``b``: by time, then name."""
    key = lambda s: (s[0] is not None, s[0] or datetime.min.replace(tzinfo=UTC), s[1])  # noqa: E731
    return key(a) > key(b)


def _read_exchange(files: Source, entries: list[Entry], assignment: str, pattern: str, limits: Limits) -> list[Candidate]:
    """nbgrader's submitted/ or inbound/ folders: the newest submission of each student (nbgrader
    collect's rule), its time from timestamp.txt (or, in inbound/, from the folder's name)."""
    newest: dict[str, tuple[datetime | None, str, list[Entry]]] = {}
    for (student, folder), inside in sorted(_exchange_folders(files, entries, assignment).items()):
        stamp = next((e for e in inside if e.parts == ("timestamp.txt",)), None)
        when = _stamp_of(files, Entry((student, folder, *stamp.parts), stamp.size, stamp.date, stamp.ref, stamp.refused), student) if stamp else None
        if when is None and folder != assignment:
            try:
                when = exchange_time(inbound_name(assignment).fullmatch(folder)["stamp"])
            except ValueError as exc:
                files.problems.append(problem(shown(folder), shown(student), f"{exc}: the submission time is not known"))
        this = (when, folder, inside)
        held = newest.get(student)
        if held is not None:
            this, older = (this, held) if _later(this, held) else (held, this)
            files.notes.append(f"{shown(student)}: an older submission ({shown(older[1])}) was not used, as nbgrader collect keeps the newest")
        newest[student] = this
    found = []
    for student, (when, folder, inside) in newest.items():
        for entry in inside:
            if entry.parts[-1] in NBGRADER_FILES and len(entry.parts) == 1:
                continue
            named = Entry((student, folder, *entry.parts), entry.size, entry.date, entry.ref, entry.refused)
            why = why_not(named, limits)
            if why:
                files.problems.append(problem(shown(named.name), shown(student), why))
            else:
                found.append(Candidate(student, named, entry.parts[-1], when=when, order=entry.date))
    return found


def _read_canvas(files: Source, entries: list[Entry], assignment: str, pattern: str, limits: Limits) -> list[Candidate]:
    found = []
    for entry in entries:
        name = entry.parts[-1]
        match = (CANVAS_ANON.fullmatch(name) or CANVAS_FILE.fullmatch(name)) if len(entry.parts) == 1 else None
        if match is None:
            other = CANVAS_TEXT.fullmatch(name) if len(entry.parts) == 1 else None
            why = (
                "a text entry or web address, not a file: not a notebook"
                if other
                else "not named like a file of Canvas's download (name_userid_fileid_filename): not used"
            )
            files.problems.append(problem(shown(entry.name), other["user"] if other else None, why))
            continue
        why = why_not(entry, limits, match["file"])
        if why:
            files.problems.append(problem(shown(entry.name), match["user"], why))
            continue
        late = bool(match["late"] or match.groupdict().get("late0"))
        lms = {"layout": "canvas", "lms_id": match["user"], "name": match.groupdict().get("name") or "", "submission_id": match["attachment"]}
        found.append(Candidate(match["user"], entry, match["file"], order=int(match["attachment"]), basis="Canvas file id", late=late, lms=lms))
    return found


def _read_moodle(files: Source, entries: list[Entry], assignment: str, pattern: str, limits: Limits) -> list[Candidate]:
    found = []
    for entry in entries:
        top = entry.parts[0]
        match = MOODLE_FOLDER.fullmatch(top) if len(entry.parts) > 1 else MOODLE_FLAT.fullmatch(top)
        if match is None:
            why = "not named like Moodle's download (Full Name_participant id_assignsubmission_file; a team without a group has no id): not used"
            files.problems.append(problem(shown(entry.name), None, why))
            continue
        filename = entry.parts[-1] if len(entry.parts) > 1 else match["file"]
        why = why_not(entry, limits, filename)
        if match["plugin"] != "file" and not why:
            why = f"from Moodle's {match['plugin']} submission, not a file submission: not used"
        if why:
            files.problems.append(problem(shown(entry.name), match["user"], why))
            continue
        lms = {"layout": "moodle", "lms_id": match["user"], "name": match["name"], "folder": top if len(entry.parts) > 1 else ""}
        found.append(Candidate(match["user"], entry, filename, order=entry.date, basis="file date in the zip", lms=lms))
    return found


class _Quiet(logging.Logger):
    """nbgrader's plugin logs a warning for each file its pattern misses: each is a problem here instead."""

    def __init__(self) -> None:
        super().__init__("autograde.intake.pattern", logging.CRITICAL + 1)


def pattern_time(text: str) -> tuple[datetime, bool]:
    """A file name's timestamp (ISO 8601, or what nbgrader's parse_utc reads) in UTC, and whether it had a zone."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        when = exchange_time(text)  # nbgrader's reading; ValueError when it fails too
        return when, True
    return (when.astimezone(UTC), True) if when.tzinfo else (when.replace(tzinfo=UTC), False)


def _read_pattern(files: Source, entries: list[Entry], assignment: str, pattern: str, limits: Limits) -> list[Candidate]:
    """Files named as ``pattern`` says, matched by nbgrader's FileNameCollectorPlugin (``re.match`` on
    the file's path from the top of the source, where nbgrader gives it the absolute path)."""
    from nbgrader.plugins.zipcollect import FileNameCollectorPlugin

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
        why = why_not(entry, limits) or ("" if student else "does not match the pattern (or its student_id is empty): not used")
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


# -- the grader's layout ---------------------------------------------------------------------------------------------


def notebook_name(filename: str, notebooks: tuple[str, ...]) -> tuple[str, str]:
    """The course notebook a submitted file stands for, and how that was told ('' for its exact name).
    A file named like no notebook of the course keeps a safe form of its own name (the grader may still
    match it by its graded cells): then the second value says so."""
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
    """The student id for an id the source gives, and a problem ('' for none). With a roster, an LMS id
    it maps is replaced; an id it lacks is kept (a student the roster missed still gets graded, and the
    problem says so, so that the roster can be fixed and the intake run again)."""
    student, why = lms_ids.get(raw, raw), ""
    if people and student not in people:
        why = "not on the roster: kept under the id the download gives"
    if not STUDENT_ID.fullmatch(student):
        return None, "cannot be a student id (use letters, digits, '_', '.', '@', '+' or '-'): not written"
    return student, why


def newest(group: list[Candidate]) -> tuple[Candidate, str]:
    """The newest of several files for one notebook, and the basis: by submission time when each has
    one and they differ, else by ``order`` (Canvas's file id, the zip entry's date or the file's mtime)."""
    if all(c.when is not None for c in group):
        best = max(group, key=lambda c: (c.when, c.order, c.entry.name))
        tied = [c for c in group if c.when == best.when]
        if len(tied) == 1:
            return best, "submission time"
        group = tied
    return max(group, key=lambda c: (c.order, c.entry.name)), group[0].basis


def _place(files: Source, candidates: list[Candidate], notebooks, people: dict, lms_ids: dict, intake: Intake) -> None:
    """Write each student's newest file for each notebook into ``intake.folder``, noting what was chosen."""
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
    kept: Counter = Counter()
    for (student, stem), group in sorted(groups.items()):
        chosen, basis = newest(group)
        if len(group) > 1:
            others = ", ".join(shown(c.entry.name) for c in group if c is not chosen)
            intake.notes.append(
                f"newest of {len(group)} files for {student}/{stem} kept ({shown(chosen.entry.name)}, by {basis}); not used: {others}"
            )
        if kept[student] >= files.limits.per_student:
            intake.problems.append(problem(shown(chosen.entry.name), student, f"more than {files.limits.per_student} notebooks: not written"))
            continue
        try:
            files.copy(chosen.entry, intake.folder / student / f"{stem}.ipynb")
        except Refused as exc:
            intake.problems.append(problem(shown(chosen.entry.name), student, str(exc)))
            continue
        kept[student] += 1
        _record(intake, student, stem, chosen, notebook_name(chosen.filename, notebooks)[1])


def _record(intake: Intake, student: str, stem: str, chosen: Candidate, how: str) -> None:
    """What the intake learned of one written notebook: its time, late flag, LMS names, renaming."""
    if how == "renamed":
        intake.notes.append(f"{student}: {shown(chosen.filename)} taken as {stem}.ipynb")
    elif how == "unknown":
        intake.notes.append(
            f"{student}: {shown(chosen.filename)} is named like no notebook of the course: kept as {stem}.ipynb "
            "(the grader matches it by its graded cells, or lists it as not of this course)"
        )
    if chosen.when is not None:
        intake.times.setdefault(student, {})[stem] = chosen.when
    if chosen.late:
        intake.late.setdefault(student, []).append(stem)
        intake.notes.append(f"{student}/{stem}: marked late by the LMS ({shown(chosen.entry.name)})")
    if chosen.lms:
        held = intake.students.get(student)
        if held is None or int(chosen.lms.get("submission_id") or 0) > int(held.get("submission_id") or 0):
            intake.students[student] = dict(chosen.lms)


def _apply_stamps(intake: Intake, stamps: list, lms_ids: dict, present: set[str] | None = None) -> None:
    """The timestamps CSV's times, over those the source gave. A row without a notebook gives the
    student's time for every notebook (the key ``*``)."""
    present = present if present is not None else {p.name for p in intake.folder.iterdir() if p.is_dir()}
    for where, raw, notebook, when in stamps:
        student = lms_ids.get(raw, raw)
        if student not in present:
            intake.problems.append(problem(where, shown(raw), "a time for a student who submitted nothing here: not used"))
            continue
        intake.times.setdefault(student, {})[notebook or "*"] = when


# -- the roster and the timestamps CSVs --------------------------------------------------------------------------------


def csv_rows(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """A CSV's rows as (line, {column (lower case): value}); UnusableInput when it cannot be read or
    lacks a ``required`` column."""
    try:
        if path.stat().st_size > MAX_CSV_BYTES:
            raise UnusableInput(f"{path} is over {MAX_CSV_BYTES // 2**20} MB: not a roster or timestamps file")
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInput(f"{path} could not be read ({type(exc).__name__}: {exc})") from None
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = [(name or "").strip().lower() for name in reader.fieldnames or []]
        absent = [c for c in required if c not in header]
        if absent:
            raise UnusableInput(f"{path} has no {', '.join(absent)} column (its columns: {', '.join(header) or 'none'})")
        rows = []
        for row in reader:
            values = {(k or "").strip().lower(): (v if isinstance(v, str) else "").strip() for k, v in row.items()}
            if any(values.values()):
                rows.append((reader.line_num, values))
    except csv.Error as exc:
        raise UnusableInput(f"{path} is not a CSV file ({exc})") from None
    return rows


def read_roster(path: Path, problems: list[dict] | None = None) -> dict[str, dict]:
    """{student_id: {"lms_id", "name", and the roster's other columns}} from a CSV with a ``student_id``
    column (and ``lms_id``, ``name``, ...). A row that cannot be used is added to ``problems``, or
    raises UnusableInput when no list is given."""
    roster: dict[str, dict] = {}
    lms_ids: dict[str, str] = {}
    for line, row in csv_rows(Path(path), ("student_id",)):
        sid, lms_id = row.get("student_id", ""), row.get("lms_id", "")
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
            problems.append(problem(f"{Path(path).name}:{line}", None, f"{why}: the row is not used"))
            continue
        roster[sid] = {**{k: v for k, v in row.items() if k and k != "student_id"}, "lms_id": lms_id, "name": row.get("name", "")}
        if lms_id:
            lms_ids[lms_id] = sid
    if not roster:
        raise UnusableInput(f"{path} lists no student")
    return roster


def read_timestamps(path: Path, notebooks: tuple[str, ...], problems: list[dict]) -> list[tuple[str, str, str | None, datetime]]:
    """(where, student, notebook or None, submitted at in UTC) for each row of a CSV with the columns
    ``student_id``, ``submitted_at`` (ISO 8601 with its zone) and, optionally, ``notebook``. A row that
    cannot be used is a problem."""
    found = []
    for line, row in csv_rows(Path(path), ("student_id", "submitted_at")):
        where = f"{Path(path).name}:{line}"
        notebook = row.get("notebook", "").removesuffix(".ipynb") or None
        try:
            when = datetime.fromisoformat(row["submitted_at"])
        except ValueError:
            when = None
        if notebook is not None and notebook not in notebooks:
            problems.append(problem(where, shown(row["student_id"]), f"{shown(notebook, 60)} is not a notebook of the course: the row is not used"))
        elif when is None or when.tzinfo is None:
            why = "has no time zone" if when else "is not an ISO 8601 time"
            problems.append(problem(where, shown(row["student_id"]), f"submitted_at {shown(row['submitted_at'], 60)!r} {why}: the row is not used"))
        else:
            found.append((where, row["student_id"], notebook, when.astimezone(UTC)))
    return found
