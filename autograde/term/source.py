"""The source of an intake, a folder or a zip, listed once within the limits and read member by
member.

Everything read is untrusted: a zip is checked whole before anything is written (its directory as
the zip library itself finds it: entry count and size), each member by name and kind (no path that
climbs out or is absolute, no link, no device), and extracted member by member into a name built by
the caller, never the member's own path, stopping when more comes out than it declared.

A folder may be live: on a hub every learner can write into the exchange's ``inbound/`` while it is
read. It is listed from a handle on its top folder taken once, one folder at a time (``openat``
without following a link), and each file is kept with what it was when listed: every folder on its
path (device, inode, owner, change time) and the file itself (device, inode, size, modification and
change times). A file is reached again only that way, each folder checked to be the one listed (the
handle on the last folder reached is kept for the next file in it), never by its path's name, so a
folder swapped for a link or for another folder after the listing is refused, not followed; a file
replaced, renamed over, written to, or grown or shrunk since it was listed is refused too, and a
copy is exactly the bytes listed. One top-level folder (one student's, one submission's) may hold
only ``per_folder`` entries: past it that folder alone is refused, a named problem of its own
student. What one learner's files may come to is their budget (``Limits.student_bytes``), summed by
the intake before anything of theirs is copied (``intake.py``)."""

from __future__ import annotations

import os
import re
import stat
import unicodedata
import zipfile
import zlib
from collections import Counter, deque
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from struct import error as struct_error

from ..course import UnusableInput
from ..errors import GraderError
from ..ledger.facts import IntakeProblem
from ..matching import MAX_FILES as MAX_NOTEBOOKS_PER_STUDENT
from ..model import MAX_NOTEBOOK_BYTES, MiB

# one learner's files read in all: the course's six notebooks with outputs are a few MB
MAX_STUDENT_BYTES = 48 * MiB
# members of a zip (built by the LMS), or files and folders under a source folder in all
MAX_FILES = 20_000
# files and folders under one top-level folder of a source: one student's or one submission's
MAX_PER_FOLDER = 1_000
MAX_DEPTH = 16  # folders below a source folder that are looked into
# a zip directory entry: 46 bytes, a name of up to 1,000 and a few extra fields
DIRECTORY_BYTES_PER_ENTRY = 1_100
CHUNK = 1 << 20
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

# what zip tools and Jupyter add beside the files: not submissions (counted in a note)
SKIPPED = {".ipynb_checkpoints", "__MACOSX", ".DS_Store", "Thumbs.db"}
CHANGED = (
    "not the file that was listed any more (replaced, renamed over or written to after the "
    "intake listed it): not read"
)


@dataclass(frozen=True)
class Limits:
    # one learner's files that would be read, all together (apparent sizes; a zip by what it
    # extracts)
    student_bytes: int = MAX_STUDENT_BYTES
    file_bytes: int = MAX_NOTEBOOK_BYTES  # a larger notebook is a named problem, not extracted
    files: int = MAX_FILES
    depth: int = MAX_DEPTH
    # the grader looks at no more .ipynb files of one student
    per_student: int = MAX_NOTEBOOKS_PER_STUDENT
    # entries under one top-level folder; past it, that folder alone is refused
    per_folder: int = MAX_PER_FOLDER
    # files and folders under a source folder in all (memory); its top-level folders are capped each
    folder_files: int = 10 * MAX_FILES


@dataclass(frozen=True)
class Folder:
    """A folder on the path of a listed file, as it was when listed."""

    name: str
    dev: int
    ino: int
    uid: int
    ctime_ns: int


@dataclass(frozen=True)
class Listed:
    """A file of a folder source as it was listed: the folders it was reached through, from the
    source's top down to its own, and the file's own identity and times. ``path`` is for messages
    only: the file is never opened by that name."""

    path: Path
    folders: tuple[Folder, ...]
    name: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    uid: int

    def same(self, info: os.stat_result) -> bool:
        """Whether ``info`` (an open file's) is this file, unchanged since it was listed."""
        now = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        return stat.S_ISREG(info.st_mode) and now == (
            self.dev,
            self.ino,
            self.size,
            self.mtime_ns,
            self.ctime_ns,
        )

    def changed_ns(self, depth: int) -> int:
        """The latest change time of the file and of the ``depth`` folders above it (its own first):
        what no learner can set back (``utime`` sets the change time to now)."""
        return max(
            [self.ctime_ns, *(f.ctime_ns for f in self.folders[len(self.folders) - depth :])]
        )


@dataclass(frozen=True)
class Entry:
    """A file of the source: its path there (in parts), declared size, date, and where to read
    it."""

    parts: tuple[str, ...]
    size: int
    date: float  # the zip entry's date or the file's mtime (seconds): the order of last resort
    ref: object  # zipfile.ZipInfo, or Listed (a folder's file)
    refused: str = ""  # why it may not be read (a link, a device, encrypted)

    @property
    def name(self) -> str:
        return "/".join(self.parts)

    def named(self, parts: tuple[str, ...]) -> Entry:
        """The same file under other parts (its path from another folder)."""
        return Entry(parts, self.size, self.date, self.ref, self.refused)


class Refused(GraderError, ValueError):
    """A member that cannot be extracted (corrupt, changed since it was listed, or more data than it
    declared)."""


def problem(file: str, student: str | None, text: str) -> IntakeProblem:
    """A file the intake cannot use: which, whose (None: nobody's it can tell), and why."""
    return IntakeProblem(file, student, text)


def shown(name: str, limit: int = 300) -> str:
    """A name from the source, safe to print (characters that print nothing or move the text escaped
    as ``\\xNN`` or ``\\uNNNN``, cut short)."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    text = "".join(
        c
        if c.isprintable() and not _invisible(c)
        else (f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}")
        for c in text
    )
    return text if len(text) <= limit else text[:limit] + "..."


def _invisible(c: str) -> bool:
    """A character that shows as nothing or as a space where a name is printed, or turns the text
    around it (a format character: zero-width, byte-order mark, a bidirectional override), other
    than the plain space."""
    return c != " " and (
        c.isspace()
        or unicodedata.category(c) in ("Cf", "Cc", "Cs", "Co", "Cn", "Zs", "Zl", "Zp")
        or not c.isprintable()
    )


def odd_characters(name: str) -> str:
    """Which character of ``name`` is whitespace or invisible, said so a person can find it
    (``'U+00A0 NO-BREAK SPACE after "alice"'``); '' when none is."""
    for at, c in enumerate(name):
        if c.isspace() or _invisible(c):
            label = unicodedata.name(c, "(a control character)")
            where = f'after "{shown(name[:at], 40)}"' if at else "at its start"
            return f"U+{ord(c):04X} {label} {where}"
    return ""


class Source:
    """The files of a folder or a zip, listed within ``limits``; read member by member with the
    caps. ``handle`` (with ``listed``): a zip read where it is, through a handle checked against its
    listing (a learner's own zip in a folder source). ``label``: what a message calls it (its
    path)."""

    def __init__(
        self,
        path: Path,
        limits: Limits,
        under: tuple[str, ...] = (),
        handle=None,
        listed: Listed | None = None,
        label: str = "",
    ):
        self.path, self.limits, label = path, limits, label or str(path)
        self.archive: zipfile.ZipFile | None = None
        self.top: int | None = None  # a folder source's handle on its top folder, taken once
        self.handle, self.listed = handle, listed
        # the folder last reached (checked) and a handle on it
        self.near: tuple[tuple[Folder, ...], int] | None = None
        self.problems: list[IntakeProblem] = []
        if handle is not None:
            try:
                self.archive = open_zip(handle, limits, label)
            except BaseException:
                handle.close()
                raise
            self.entries, self.problems, self.notes = zip_entries(self.archive, limits)
        # only the files ``under`` that folder of it (their paths start with it)
        elif path.is_dir():
            # the instructor's own path
            self.top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                start = folders_under(self.top, under, path)
                found, self.notes = list_folder(
                    self.top,
                    limits,
                    limits.depth,
                    strict=True,
                    start=start,
                    base=path.joinpath(*under),
                )
            except BaseException:
                self.close()
                raise
            self.entries = [e.named((*under, *e.parts)) for e in found]
        else:
            self.archive = open_zip(path, limits, label)
            self.entries, self.problems, self.notes = zip_entries(self.archive, limits)

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.archive is not None:
            self.archive.close()
        if self.handle is not None:
            self.handle.close()
        if self.top is not None:
            os.close(self.top)
            self.top = None
        if self.near is not None:
            os.close(self.near[1])
            self.near = None

    def open(self, entry: Entry):
        """A file object on ``entry``: a zip's member, or a folder's file reached through the
        folders it was listed in and checked to be the file listed (Refused when it is not)."""
        if entry.refused:
            raise Refused(entry.refused)
        if self.archive is not None:
            return self.archive.open(entry.ref)  # type: ignore[arg-type]
        listed = entry.ref
        assert isinstance(listed, Listed) and self.top is not None
        # a handle on a folder stays on it, wherever it is moved
        if self.near is None or self.near[0] != listed.folders:
            if self.near is not None:
                os.close(self.near[1])
                self.near = None
            self.near = (listed.folders, descend(self.top, listed.folders))
        try:
            fd = os.open(listed.name, FILE_FLAGS, dir_fd=self.near[1])
        except OSError as exc:
            raise Refused(
                f"could not be opened where it was listed ({type(exc).__name__}): moved "
                "or removed since"
            ) from None
        if not listed.same(os.fstat(fd)):
            os.close(fd)
            raise Refused(CHANGED)
        return os.fdopen(fd, "rb")

    def unchanged(self, entry: Entry, handle) -> None:
        """After a file was read: Refused when it (or, for a learner's zip read where it is, that
        zip) changed meanwhile."""
        if isinstance(entry.ref, Listed) and not entry.ref.same(os.fstat(handle.fileno())):
            raise Refused(CHANGED.replace("after the intake listed it", "while it was read"))
        if self.listed is not None and not self.listed.same(os.fstat(self.handle.fileno())):
            raise Refused("its zip was written to while it was read: not used")

    def read(self, entry: Entry, limit: int) -> bytes:
        """A small file whole (nbgrader's timestamp.txt); Refused when it is larger than
        ``limit``."""
        if entry.size > limit:
            raise Refused(f"{entry.size:,} bytes, more than the {limit} a timestamp takes")
        try:
            with self.open(entry) as handle:
                data = handle.read(limit + 1)
                self.unchanged(entry, handle)
        except (
            OSError,
            zipfile.BadZipFile,
            zlib.error,
            EOFError,
            NotImplementedError,
            RuntimeError,
        ) as exc:
            raise Refused(f"could not be read ({type(exc).__name__}: {exc})") from None
        if len(data) > limit:
            raise Refused(f"more than the {limit} bytes a timestamp takes")
        return data

    def copy(self, entry: Entry, target: Path) -> None:
        """Write ``entry`` to ``target`` (a new file): exactly the bytes listed or declared, else
        Refused and nothing left behind."""
        try:
            target.parent.mkdir(exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise Refused(f"could not be written ({type(exc).__name__}: {exc})") from None
        got = 0
        try:
            with os.fdopen(fd, "wb") as out, self.open(entry) as handle:
                while chunk := handle.read(min(CHUNK, entry.size - got + 1)):
                    got += len(chunk)
                    if got > entry.size:
                        if self.archive is not None:
                            raise Refused(
                                f"more data than the {entry.size:,} bytes it declares "
                                "(a zip bomb?): not extracted"
                            )
                        raise Refused(
                            f"grew past the {entry.size:,} bytes listed while it was read: not used"
                        )
                    out.write(chunk)
                if got < entry.size:
                    raise Refused(
                        f"gave {got:,} of the {entry.size:,} bytes "
                        f"{'it declares' if self.archive else 'listed'} (it shrank?): "
                        "not used"
                    )
                self.unchanged(entry, handle)
        except (
            OSError,
            zipfile.BadZipFile,
            zlib.error,
            EOFError,
            NotImplementedError,
            RuntimeError,
        ) as exc:
            _remove(target)
            raise Refused(f"could not be extracted ({type(exc).__name__}: {exc})") from None
        except BaseException:
            _remove(target)
            raise


def descend(top: int, folders: tuple[Folder, ...]) -> int:
    """A new handle on the last of ``folders``, reached from ``top`` one folder at a time without
    following a link, each checked to be the folder listed (device and inode). Refused when one is
    not."""
    fd = os.dup(top)
    try:
        for folder in folders:
            try:
                inner = os.open(folder.name, FOLDER_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise Refused(
                    f"its folder {shown(folder.name, 80)}/ cannot be reached as it was "
                    f"listed ({type(exc).__name__}: replaced by a link?): not read"
                ) from None
            os.close(fd)
            fd = inner
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) != (folder.dev, folder.ino):
                raise Refused(
                    f"its folder {shown(folder.name, 80)}/ is not the folder that was "
                    "listed any more "
                    "(moved or replaced while the intake read it): not read"
                )
        return fd
    except BaseException:
        os.close(fd)
        raise


def folders_under(top: int, under: tuple[str, ...], path: Path) -> tuple[Folder, ...]:
    """The folders ``under`` (a layout's start, such as ``inbound``) below ``top``, each a real
    folder."""
    found: list[Folder] = []
    for name in under:
        fd = descend(top, tuple(found))
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError as exc:
            raise UnusableInput(
                f"{path.joinpath(*under)} could not be read ({type(exc).__name__})"
            ) from None
        finally:
            os.close(fd)
        if not stat.S_ISDIR(info.st_mode):
            raise UnusableInput(f"{path.joinpath(*under)} is not a folder (a link?)")
        found.append(Folder(name, info.st_dev, info.st_ino, info.st_uid, info.st_ctime_ns))
    return tuple(found)


def _remove(target: Path) -> None:
    """A file that was not fully written, and its student's folder when that is left empty."""
    target.unlink(missing_ok=True)
    try:
        target.parent.rmdir()
    except OSError:  # it holds the student's other notebooks
        pass


def zip_directory(path) -> tuple[int, int] | None:
    """(entries, bytes) of a zip's central directory, as the zip library finds it (the very end
    record ``zipfile.ZipFile`` will read, zip64 included), before it builds an object for each
    entry: a directory of millions would fill the memory first. ``path``: a path or an open binary
    file. None: the library finds no end record (then ``zipfile`` says what is wrong)."""
    if not isinstance(path, (str, os.PathLike)):
        # the library's own search: what ZipFile reads is what is checked
        record = zipfile._EndRecData(path)
    else:
        with open(path, "rb") as handle:
            record = zipfile._EndRecData(handle)
    if not record:
        return None
    return int(record[zipfile._ECD_ENTRIES_TOTAL]), int(record[zipfile._ECD_SIZE])


def open_zip(path, limits: Limits, label: str) -> zipfile.ZipFile:
    """The zip at ``path`` (a path or an open binary file), refused whole (UnusableInput, naming it
    ``label``) when it is not one, or holds more entries than the limits allow (checked before
    anything is extracted). ZipFile reads exactly the directory's declared size and makes an entry
    of every 46 bytes or more in it, so the size is bounded as well as the count the end record
    claims. What its members would come to is counted where they are taken: against their learner's
    budget."""
    try:
        directory = zip_directory(path)
        if directory is not None and (
            directory[0] > limits.files or directory[1] > limits.files * DIRECTORY_BYTES_PER_ENTRY
        ):
            what = (
                f"{directory[0]:,} entries"
                if directory[0] > limits.files
                else (f"a directory of {directory[1]:,} bytes")
            )
            raise UnusableInput(
                f"{label} holds {what}, more than the intake reads ({limits.files:,} entries, "
                f"{limits.files * DIRECTORY_BYTES_PER_ENTRY:,} bytes of directory): refused whole"
            )
        archive = zipfile.ZipFile(path)
    except (
        OSError,
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        ValueError,
        EOFError,
        struct_error,
    ) as exc:
        raise UnusableInput(
            f"{label} is not a readable zip file ({type(exc).__name__}: {exc})"
        ) from None
    if len(archive.infolist()) > limits.files:
        archive.close()
        raise UnusableInput(
            f"{label} holds {len(archive.infolist()):,} entries, more than the "
            f"intake reads ({limits.files:,}): refused whole"
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


def zip_entries(
    archive: zipfile.ZipFile, limits: Limits
) -> tuple[list[Entry], list[IntakeProblem], list[str]]:
    """The zip's files, each checked by name and kind; refused names are problems, refused kinds
    (links, devices, encrypted) are entries marked refused, so that whose they are can be told."""
    entries, problems, skipped = [], [], 0
    per_top: Counter = Counter()
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
        if len(parts) > 1:
            per_top[parts[0]] += 1
            if per_top[parts[0]] > limits.per_folder:
                if per_top[parts[0]] == limits.per_folder + 1:
                    entries.append(crowded(parts[0], limits))
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
    notes = (
        [
            f"skipped {skipped} files that zip tools and Jupyter add (__MACOSX, "
            ".ipynb_checkpoints, .DS_Store)"
        ]
        if skipped
        else []
    )
    return (
        [e for e in entries if per_top[e.parts[0]] <= limits.per_folder or e.refused == CROWDED],
        problems,
        notes,
    )


CROWDED = (
    "more files and folders than one student's folder may hold: not read (the rest of the class is)"
)


def crowded(top: str, limits: Limits) -> Entry:
    """What stands for a top-level folder over ``limits.per_folder`` entries: one refused entry
    inside it, so that its own student (and only they) gets the problem."""
    return Entry((top, f"(over {limits.per_folder:,} entries)"), 0, 0.0, None, CROWDED)


def list_folder(
    top: int,
    limits: Limits,
    max_depth: int,
    strict: bool,
    start: tuple[Folder, ...] = (),
    base: Path = Path("."),
) -> tuple[list[Entry], list[str]]:
    """The files under the folder ``start`` leads to from the handle ``top``, nearest the top first,
    down to ``max_depth`` folders, following no link: each folder opened from the one above it
    (``descend``) and each entry kept as it was (``Listed``). ``base``: that folder's path, for
    messages.

    ``strict`` (the listing that is read): a top-level folder holding more than
    ``limits.per_folder`` files and folders is refused whole, as one refused entry inside it (its
    student's problem), and more than ``limits.folder_files`` in all raises UnusableInput. Otherwise
    (a look at the names, to recognise the layout) no folder below the top gives more than
    ``limits.per_folder`` names, and the list so far is returned once ``limits.folder_files`` were
    seen."""
    entries: list[Entry] = []
    notes: list[str] = []
    queue: deque[tuple[tuple[str, ...], tuple[Folder, ...]]] = deque([((), start)])
    seen = skipped = 0
    too_deep = False
    per_top: Counter = Counter()
    crowded_tops: set[str] = set()
    while queue:
        parts, folders = queue.popleft()
        if parts and parts[0] in crowded_tops:
            continue
        try:
            fd = descend(top, folders)
        except Refused as exc:
            notes.append(f"{shown('/'.join(parts)) or base.name}: {exc}")
            continue
        try:
            try:
                names, stop = _names(fd, parts, limits, strict, seen, per_top)
            except OSError as exc:
                notes.append(
                    f"{shown('/'.join(parts)) or base.name} could not be read "
                    f"({type(exc).__name__})"
                )
                continue
            seen += len(names)
            if stop == "all":
                if strict:
                    raise UnusableInput(
                        f"{base} holds more than {limits.folder_files:,} files "
                        "and folders: refused whole"
                    )
                return entries, notes
            if stop == "crowded":
                crowded_tops.add(parts[0])
                continue
            for name in sorted(names):
                here = (*parts, name)
                if name in SKIPPED:
                    skipped += 1
                    continue
                seen_now = _look(fd, name, here, folders, base)
                if isinstance(seen_now, Folder):
                    too_deep |= len(here) >= max_depth
                    if len(here) < max_depth:
                        queue.append((here, (*folders, seen_now)))
                elif seen_now is not None:
                    entries.append(seen_now)
        finally:
            os.close(fd)
    entries = _crowded_refused(entries, crowded_tops, limits)
    if skipped:
        notes.append(
            f"skipped {skipped} files and folders that zip tools and Jupyter add "
            "(__MACOSX, .ipynb_checkpoints, .DS_Store)"
        )
    if too_deep and strict:
        notes.append(f"folders more than {max_depth} levels down were not read")
    return entries, notes


def _crowded_refused(entries: list[Entry], tops: set[str], limits: Limits) -> list[Entry]:
    """``entries`` with each crowded top-level folder's files replaced by one refused entry."""
    if not tops:
        return entries
    kept = [e for e in entries if e.parts[0] not in tops]
    return kept + [crowded(top_name, limits) for top_name in sorted(tops)]


def _look(
    fd: int, name: str, here: tuple[str, ...], folders: tuple[Folder, ...], base: Path
) -> Folder | Entry | None:
    """``name`` in the folder open as ``fd``, as it is now, following no link: a Folder to descend
    into, an Entry (a link or anything but a plain file refused), or None when it is gone since
    it was named."""
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISDIR(info.st_mode):
        return Folder(name, info.st_dev, info.st_ino, info.st_uid, info.st_ctime_ns)
    listed = Listed(
        base.joinpath(*here),
        folders,
        name,
        info.st_dev,
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
        info.st_uid,
    )
    refused = ""
    if stat.S_ISLNK(info.st_mode):
        refused = "a symbolic link: refused (submissions must be plain files)"
    elif not stat.S_ISREG(info.st_mode):
        refused = "not a plain file (a device, pipe or socket): refused"
    return Entry(here, info.st_size, info.st_mtime_ns / 1e9, listed, refused)


def _names(
    fd: int, parts: tuple[str, ...], limits: Limits, strict: bool, seen: int, per_top: Counter
) -> tuple[list[str], str]:
    """The names in the folder ``fd`` (at ``parts``), within the limits: and ``all`` when the
    source's cap was passed, ``crowded`` when its top-level folder's was (strict), else ''."""
    names: list[str] = []
    with os.scandir(fd) as listing:
        for item in listing:
            if seen + len(names) >= limits.folder_files:
                return names, "all"
            if parts and not strict and len(names) >= limits.per_folder:
                break  # enough of one folder's names to tell its shape
            if parts and strict:
                per_top[parts[0]] += 1
                if per_top[parts[0]] > limits.per_folder:
                    return names, "crowded"
            names.append(item.name)
    return names, ""
