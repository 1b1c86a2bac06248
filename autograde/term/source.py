"""The source of an intake, a folder or a zip, listed once within the limits and read member by member.

Everything read is untrusted: a zip is checked whole before anything is written (its directory as the zip
library itself finds it: entry count and size, then the sizes its members declare), each member by name and
kind (no path that climbs out or is absolute, no link, no device), and extracted member by member into a
name built by the caller, never the member's own path, stopping when more comes out than it declared. A
folder is listed without following links, with a cap on what one top-level folder (one student's, one
submission's) may hold: past it that folder alone is refused, a named problem of its own student."""

from __future__ import annotations

import os
import re
import stat
import zipfile
import zlib
from collections import Counter, deque
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from struct import error as struct_error

from ..course import UnusableInput
from ..errors import GraderError
from ..matching import MAX_FILES as MAX_NOTEBOOKS_PER_STUDENT
from ..model import MAX_NOTEBOOK_BYTES, GiB

MAX_TOTAL_BYTES = 2 * GiB  # declared by a zip's members, all together, and written by the intake
MAX_FILES = 20_000  # members of a zip (built by the LMS), or files and folders under a source folder in all
MAX_PER_FOLDER = 1_000  # files and folders under one top-level folder of a source: one student's or one submission's
MAX_DEPTH = 16  # folders below a source folder that are looked into
DIRECTORY_BYTES_PER_ENTRY = 1_100  # a zip directory entry: 46 bytes, a name of up to 1,000 and a few extra fields
CHUNK = 1 << 20

# what zip tools and Jupyter add beside the files: not submissions (counted in a note)
SKIPPED = {".ipynb_checkpoints", "__MACOSX", ".DS_Store", "Thumbs.db"}


@dataclass(frozen=True)
class Limits:
    total_bytes: int = MAX_TOTAL_BYTES
    file_bytes: int = MAX_NOTEBOOK_BYTES  # a larger notebook is a named problem, not extracted
    files: int = MAX_FILES
    depth: int = MAX_DEPTH
    per_student: int = MAX_NOTEBOOKS_PER_STUDENT  # the grader looks at no more .ipynb files of one student
    per_folder: int = MAX_PER_FOLDER  # entries under one top-level folder; past it, that folder alone is refused
    folder_files: int = 10 * MAX_FILES  # files and folders under a source folder in all (memory); its top-level folders are capped each


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


class Refused(GraderError, ValueError):
    """A member that cannot be extracted (corrupt, or more data than it declared)."""


def problem(file: str, student: str | None, text: str) -> dict:
    return {"file": file, "student_id": student, "problem": text}


def shown(name: str, limit: int = 300) -> str:
    """A name from the source, safe to print (control characters escaped, cut short)."""
    text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
    return text if len(text) <= limit else text[:limit] + "..."


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
    """(entries, bytes) of a zip's central directory, as the zip library finds it (the very end record
    ``zipfile.ZipFile`` will read, zip64 included), before it builds an object for each entry: a
    directory of millions would fill the memory first. None: the library finds no end record (then
    ``zipfile`` says what is wrong)."""
    with open(path, "rb") as handle:
        record = zipfile._EndRecData(handle)  # the library's own search: what ZipFile reads is what is checked
    if not record:
        return None
    return int(record[zipfile._ECD_ENTRIES_TOTAL]), int(record[zipfile._ECD_SIZE])


def open_zip(path: Path, limits: Limits) -> zipfile.ZipFile:
    """The zip at ``path``, refused whole (UnusableInput) when it is not one, or holds more entries or
    declares more bytes than the limits allow (checked before anything is extracted). ZipFile reads
    exactly the directory's declared size and makes an entry of every 46 bytes or more in it, so the
    size is bounded as well as the count the end record claims."""
    try:
        directory = zip_directory(path)
        if directory is not None and (directory[0] > limits.files or directory[1] > limits.files * DIRECTORY_BYTES_PER_ENTRY):
            what = f"{directory[0]:,} entries" if directory[0] > limits.files else f"a directory of {directory[1]:,} bytes"
            raise UnusableInput(
                f"{path} holds {what}, more than the intake reads ({limits.files:,} entries, "
                f"{limits.files * DIRECTORY_BYTES_PER_ENTRY:,} bytes of directory): refused whole"
            )
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, struct_error) as exc:
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
    notes = [f"skipped {skipped} files that zip tools and Jupyter add (__MACOSX, .ipynb_checkpoints, .DS_Store)"] if skipped else []
    return [e for e in entries if per_top[e.parts[0]] <= limits.per_folder or e.refused == CROWDED], problems, notes


CROWDED = "more files and folders than one student's folder may hold: not read (the rest of the class is)"


def crowded(top: str, limits: Limits) -> Entry:
    """What stands for a top-level folder over ``limits.per_folder`` entries: one refused entry inside
    it, so that its own student (and only they) gets the problem."""
    return Entry((top, f"(over {limits.per_folder:,} entries)"), 0, 0.0, None, CROWDED)


def list_folder(folder: Path, limits: Limits, max_depth: int, strict: bool) -> tuple[list[Entry], list[str]]:
    """The files under ``folder``, nearest the top first, down to ``max_depth`` folders, following no link.

    ``strict`` (the listing that is read): a top-level folder holding more than ``limits.per_folder``
    files and folders is refused whole, as one refused entry inside it (its student's problem), and more
    than ``limits.folder_files`` in all raises UnusableInput. Otherwise (a look at the names, to recognise
    the layout) no folder below the top gives more than ``limits.per_folder`` names, and the list so far is
    returned once ``limits.folder_files`` were seen."""
    entries: list[Entry] = []
    notes: list[str] = []
    queue = deque([(folder, ())])
    seen = skipped = 0
    too_deep = False
    per_top: Counter = Counter()
    crowded_tops: set[str] = set()
    while queue:
        current, parts = queue.popleft()
        if parts and parts[0] in crowded_tops:
            continue
        try:
            with os.scandir(current) as listing:
                items = []
                for item in listing:
                    seen += 1
                    if seen > limits.folder_files:
                        if strict:
                            raise UnusableInput(f"{folder} holds more than {limits.folder_files:,} files and folders: refused whole")
                        return entries, notes
                    if parts and not strict and len(items) >= limits.per_folder:
                        break  # enough of one folder's names to tell its shape
                    if parts and strict:
                        per_top[parts[0]] += 1
                        if per_top[parts[0]] > limits.per_folder:
                            crowded_tops.add(parts[0])
                            break
                    items.append(item)
        except OSError as exc:
            notes.append(f"{shown('/'.join(parts)) or folder.name} could not be read ({type(exc).__name__})")
            continue
        if parts and parts[0] in crowded_tops:
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
    if crowded_tops:
        entries = [e for e in entries if e.parts[0] not in crowded_tops] + [crowded(top, limits) for top in sorted(crowded_tops)]
    if skipped:
        notes.append(f"skipped {skipped} files and folders that zip tools and Jupyter add (__MACOSX, .ipynb_checkpoints, .DS_Store)")
    if too_deep and strict:
        notes.append(f"folders more than {max_depth} levels down were not read")
    return entries, notes
