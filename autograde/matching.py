"""Find each course notebook in a student's folder, whatever a platform renamed it to; read what a
submission made or shaped (a notebook, a log, a result file) within bounds; and repair a notebook's
nbgrader cells into what nbgrader can grade."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import deque
from pathlib import Path
from typing import NamedTuple

import nbformat

from tools.integrity import release_stem

from .errors import GraderError

MAX_FILES = 50  # .ipynb files looked at per student: a folder of thousands is not all parsed
MAX_BYTES = 20 * 1024 * 1024  # a larger file is not parsed to look for grade ids
# objects and arrays in one submitted file (a course notebook with outputs holds a few thousand)
MAX_JSON_NODES = 300_000
MAX_DEPTH = 12  # folders below the student's folder that are looked into
MAX_ENTRIES = 20_000  # files and folders listed per student, whatever their names
MAX_WALK_SECONDS = 10.0  # time spent listing one student's folder

# What platforms and Jupyter do to a name ("Copy of X", "X (1)", "X-Copy1"): undone by the rule the
# learner's runtime uses to find an earlier notebook, so that the two never disagree.
normalize = release_stem


class TooManyObjects(GraderError, ValueError):
    """A file whose JSON would build more objects than a notebook needs: refused unparsed."""


def check_nodes(raw: bytes, max_nodes: int = MAX_JSON_NODES) -> None:
    """Refuse JSON that would build too many objects, in one pass over the bytes: a file of
    ``[{},{},...]`` is small on disk and gigabytes once parsed. A file with more than
    ``max_nodes`` opening brackets (``{`` or ``[``, those inside strings too: an upper bound)
    raises TooManyObjects before anything is built."""
    nodes = raw.count(b"{") + raw.count(b"[")
    if nodes > max_nodes:
        raise TooManyObjects(
            f"the file holds {nodes:,} JSON objects and lists, more than the {max_nodes:,} "
            "a notebook may have (a notebook with outputs has a few thousand)"
        )


class Found(NamedTuple):
    """A student's notebooks as found, once: each course notebook's file (None: not sent), and notes
    on what was guessed (a file renamed, one matched by its graded cells, one ignored)."""

    files: dict[str, Path | None]
    notes: list[str]


def grade_ids(path: Path, max_bytes: int | None = None) -> set[str]:
    """The nbgrader grade ids in a notebook (empty when it cannot be read, or is over
    ``max_bytes``)."""
    try:
        if max_bytes is not None and path.stat().st_size > max_bytes:
            return set()
        raw = path.read_bytes()
        check_nodes(raw)
        cells = json.loads(raw).get("cells", [])
    # RecursionError: JSON nested too deep
    except (OSError, ValueError, AttributeError, RecursionError):
        return set()
    ids = set()
    for cell in cells if isinstance(cells, list) else []:
        meta = (cell.get("metadata") or {}).get("nbgrader") or {} if isinstance(cell, dict) else {}
        if isinstance(meta, dict) and meta.get("grade_id"):
            ids.add(str(meta["grade_id"]))
    return ids


def by_cells(
    path: Path, names: tuple[str, ...], ids_by_name: dict[str, set[str]], max_bytes: int
) -> str | None:
    """The one course notebook whose graded cells the file holds (None: none, or more than one)."""
    held = grade_ids(path, max_bytes)
    hits = [name for name in names if held & ids_by_name.get(name, set())]
    return hits[0] if len(hits) == 1 else None


def match_notebooks(
    student_dir: Path,
    names: tuple[str, ...],
    ids_by_name: dict[str, set[str]],
    max_files: int = MAX_FILES,
    max_bytes: int = MAX_BYTES,
) -> Found:
    """Map each release name to one file of the student's, with notes on what was guessed: how a
    folder in the grader's own layout, used as it is, is read (a download the intake placed was
    decided there).

    By name first (exact, then normalized); a file whose name matches nothing is matched
    by the grade ids it contains (unless it is over ``max_bytes``). Several candidates: the
    exact name wins, else the newest. At most ``max_files`` .ipynb files are looked at,
    those named like a course notebook and nearest the top of the folder first.
    """
    home = student_dir.resolve()
    by_lower = {name.lower(): name for name in names}
    files, notes = walk_notebooks(student_dir, 20 * max_files + 1)
    more = len(files) > 20 * max_files
    files.sort(
        key=lambda p: (p.stem not in names, normalize(p.stem) not in by_lower, len(p.parts), str(p))
    )
    if more or len(files) > max_files:
        notes.append(
            f"{'more than ' if more else ''}{len(files) - more} .ipynb files: only "
            f"{max_files} were looked at "
            "(those named like a course notebook first)"
        )
        files = files[:max_files]
    files = sorted(p for p in files if p.is_file())
    candidates: dict[str, list[tuple[int, float, Path]]] = {name: [] for name in names}
    for path in files:
        linked = any(
            part.is_symlink()
            for part in [path, *path.parents]
            if part != student_dir and student_dir in part.parents
        )
        if linked or home not in path.resolve().parents:
            notes.append(
                f"ignored {path.relative_to(student_dir)}: a symbolic link (submissions "
                "must be plain files)"
            )
            continue
        if path.stem in names:
            candidates[path.stem].append((0, -path.stat().st_mtime, path))
            continue
        guess = by_lower.get(normalize(path.stem))
        how = "renamed"
        if guess is None and path.stat().st_size > max_bytes:
            notes.append(
                f"ignored {path.relative_to(student_dir)}: over the "
                f"{max_bytes / 2**20:g} MB size limit"
            )
            continue
        if guess is None:
            guess = by_cells(path, names, ids_by_name, max_bytes)
            how = "matched by its graded cells"
        if guess is None:
            notes.append(f"ignored {path.relative_to(student_dir)}: not a notebook of this course")
            continue
        candidates[guess].append((1, -path.stat().st_mtime, path))
        notes.append(f"{path.relative_to(student_dir)} {how} → {guess}.ipynb")
    others = [note for note in notes if note.endswith(": not a notebook of this course")]
    if len(others) > 5:  # a folder of many files: a count, not a line each
        notes = [note for note in notes if note not in others[5:]]
        notes.append(f"ignored {len(others) - 5} more files that are not notebooks of this course")
    chosen: dict[str, Path | None] = {}
    for name in names:
        options = sorted(candidates[name])
        chosen[name] = options[0][2] if options else None
        if len(options) > 1:
            notes.append(
                f"{len(options)} files for {name}.ipynb; graded "
                f"{options[0][2].relative_to(student_dir)}"
            )
    return Found(chosen, notes)


def walk_notebooks(
    folder: Path,
    limit: int,
    max_depth: int = MAX_DEPTH,
    max_entries: int = MAX_ENTRIES,
    max_seconds: float = MAX_WALK_SECONDS,
) -> tuple[list[Path], list[str]]:
    """Up to ``limit`` ``.ipynb`` paths under ``folder``, nearest the top first, with notes on
    what was not looked at.

    A student's folder is untrusted: it may be nested thousands deep (``Path.rglob`` recurses
    and raises RecursionError), hold 100,000 entries, or link elsewhere. So the walk is a loop
    over a queue (breadth first, no recursion), follows no symbolic link, skips
    ``.ipynb_checkpoints``, and stops at ``max_depth`` folders down, after ``max_entries``
    entries, or after ``max_seconds``, whichever comes first."""
    found: list[Path] = []
    notes: list[str] = []
    queue = deque([(folder, 0)])
    listed, deadline, too_deep = 0, time.monotonic() + max_seconds, False
    while queue and len(found) < limit:
        current, depth = queue.popleft()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    listed += 1
                    if listed > max_entries or time.monotonic() > deadline:
                        why = (
                            f"more than {max_entries:,} entries"
                            if listed > max_entries
                            else (f"over {max_seconds:g} s to list")
                        )
                        notes.append(f"the folder holds {why}: the rest was not looked at")
                        return found, notes
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name == ".ipynb_checkpoints":
                            continue
                        if depth + 1 > max_depth:
                            too_deep = True
                            continue
                        queue.append((Path(entry.path), depth + 1))
                    elif entry.name.endswith(".ipynb"):
                        found.append(Path(entry.path))
                        if len(found) >= limit:
                            break
        except OSError as exc:
            notes.append(f"a folder could not be read: {type(exc).__name__}")
    if too_deep:
        notes.append(f"folders more than {max_depth} levels down were not looked at")
    return found, notes


class NotebookTooLarge(GraderError, ValueError):
    """A submitted file over the size limit: refused before the trusted parent parses it."""


def check_size(path: Path, limit: int) -> None:
    """Raise NotebookTooLarge when ``path`` is over ``limit`` bytes (stat only, nothing is read)."""
    size = path.stat().st_size
    if size > limit:
        raise NotebookTooLarge(
            f"the file is {size / 2**20:.1f} MB, over the {limit / 2**20:g} MB limit for "
            "a submitted "
            "notebook (clear its outputs, or raise --max-notebook-mb)"
        )


def read_json(path: Path, max_bytes: int | None = None) -> dict:
    """A JSON object from ``path``; {} when it is missing, unreadable, not an object, or over
    ``max_bytes`` (checked before it is read)."""
    try:
        if max_bytes is not None and path.stat().st_size > max_bytes:
            return {}
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return found if isinstance(found, dict) else {}


# a graded notebook (outputs are capped while it runs, so far below this)
MAX_GRADED_BYTES = 48 << 20


def read_notebook(path: Path, max_bytes: int):
    """A notebook from a file that a submission made or shaped, read within bounds: its size is
    checked before it is read, and its count of JSON objects before they are built
    (matching.check_nodes). Raises NotebookTooLarge, TooManyObjects, or what nbformat raises."""
    check_size(path, max_bytes)
    raw = path.read_bytes()
    check_nodes(raw)
    return nbformat.reads(raw.decode("utf-8"), as_version=4)


def read_graded(path: Path):
    """A graded notebook, or None when it is missing, unreadable, or over MAX_GRADED_BYTES or
    MAX_JSON_NODES (both checked before it is parsed)."""
    try:
        return read_notebook(path, MAX_GRADED_BYTES)
    except Exception:  # not JSON, nested too deep, too large, not a notebook
        return None


def read_tail(path: Path, limit: int) -> str:
    """The last ``limit`` bytes of a file that a sandboxed process may have grown (a worker's
    log holds what its kernel wrote to its own stdout): never the whole of it."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def _answers(nb) -> dict[str, str]:
    """{grade id: digest of the answer} for every answer cell (nbgrader solution cell) of a
    notebook."""
    found = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and meta.get("grade_id"):
            found[str(meta["grade_id"])] = hashlib.sha256(cell.source.strip().encode()).hexdigest()
    return found


def changed_answers(before: Path, nb) -> list[str] | None:
    """The answer cells whose text differs from ``before`` (the copy graded last time, kept in
    OUT/submitted); None when there is no readable earlier copy."""
    if not before.is_file():
        return None
    old_nb = read_graded(before)
    if old_nb is None:
        return None
    old = _answers(old_nb)
    new = _answers(nb)
    return sorted(gid for gid in {*old, *new} if old.get(gid) != new.get(gid))


def repair_cells(nb, known: set[str]) -> list[str]:
    """Make a submitted notebook's nbgrader cells what nbgrader can grade (on the copy that is
    graded, never the student's file): consecutive cells that share an answer's grade id (what
    Jupyter's "Split Cell" leaves) are joined, sources separated by a blank line; a cell whose
    grade id the course does not know, or that repeats one met earlier, loses its nbgrader
    metadata and counts as an ordinary cell. Returns a note for each kind of change (at most a
    few: a notebook split into thousands of cells gets one line per answer, not per cell)."""
    # parts: id(cell) -> the sources joined into that cell, in order
    cells, seen, parts = [], set(), {}
    ordinary: dict[str, int] = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader")
        gid = str(meta.get("grade_id", "")) if isinstance(meta, dict) else ""
        if not isinstance(meta, dict) or not (
            gid or meta.get("grade") or meta.get("solution") or meta.get("locked")
        ):
            cells.append(cell)
            continue
        last = cells[-1] if cells else None
        last_meta = last.metadata.get("nbgrader", {}) if last is not None else {}
        if (
            meta.get("solution")
            and last is not None
            and isinstance(last_meta, dict)
            and last_meta.get("solution")
            and str(last_meta.get("grade_id", "")) == gid
            and last.cell_type == cell.cell_type
            and gid in known
        ):
            parts.setdefault(id(last), [last.source]).append(cell.source)
            continue
        if gid not in known or gid in seen:
            why = (
                "a grade id this course does not have"
                if gid not in known
                else ("a grade id used by an earlier cell")
            )
            del cell.metadata["nbgrader"]
            key = f"{why} ({safe_text(gid) or 'none'})"
            ordinary[key] = ordinary.get(key, 0) + 1
        else:
            seen.add(gid)
        cells.append(cell)
    notes = []
    for cell in cells:
        joined = parts.get(id(cell))
        if joined:  # one join per answer: linear in the notebook's size
            inner = [text.strip("\n") for text in joined[1:-1]]
            cell.source = "\n\n".join([joined[0].rstrip("\n"), *inner, joined[-1].lstrip("\n")])
            gid = safe_text(str(cell.metadata["nbgrader"].get("grade_id", "")))
            pieces = "two" if len(joined) == 2 else f"{len(joined):,} parts"
            notes.append(
                f"answer cell {gid} was split in {pieces}; the parts were joined for grading"
            )
    for key, count in list(ordinary.items())[:20]:
        times = "" if count == 1 else f" ({count:,} cells)"
        notes.append(f"a cell with {key} was graded as an ordinary cell{times}")
    if len(ordinary) > 20:
        notes.append(
            f"{len(ordinary) - 20} more grade ids this course does not have were graded "
            "as ordinary cells"
        )
    nb.cells = cells
    return notes


def safe_text(text: str) -> str:
    """A name or note from a submission, fit for JSON, CSV and a terminal: undecodable bytes
    and control characters (terminal escapes) are replaced."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return "".join(ch if ch.isprintable() else "?" for ch in text)[:300]


def last_error(log: str, prefer: tuple[str, ...] = ()) -> str:
    lines = [line.strip() for line in log.splitlines() if any(word in line for word in prefer)]
    lines = lines or [line for line in log.splitlines() if "ERROR" in line or "Error" in line]
    return (lines[-1] if lines else log.strip().splitlines()[-1] if log.strip() else "no output")[
        :300
    ]
