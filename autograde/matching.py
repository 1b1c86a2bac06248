"""Find each course notebook in a student's folder, whatever a platform renamed it to."""

from __future__ import annotations

import json
import os
import time
from collections import deque
from pathlib import Path

from tools.notebook_runtime import release_stem

MAX_FILES = 50  # .ipynb files looked at per student: a folder of thousands is not all parsed
MAX_BYTES = 20 * 1024 * 1024  # a larger file is not parsed to look for grade ids
MAX_JSON_NODES = 300_000  # objects and arrays in one submitted file (a course notebook with outputs holds a few thousand)
MAX_DEPTH = 12  # folders below the student's folder that are looked into
MAX_ENTRIES = 20_000  # files and folders listed per student, whatever their names
MAX_WALK_SECONDS = 10.0  # time spent listing one student's folder

# What platforms and Jupyter do to a name ("Copy of X", "X (1)", "X-Copy1"): undone by the rule the
# learner's runtime uses to find an earlier notebook, so that the two never disagree.
normalize = release_stem


class TooManyObjects(ValueError):
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


def grade_ids(path: Path, max_bytes: int | None = None) -> set[str]:
    """The nbgrader grade ids in a notebook (empty when it cannot be read, or is over ``max_bytes``)."""
    try:
        if max_bytes is not None and path.stat().st_size > max_bytes:
            return set()
        raw = path.read_bytes()
        check_nodes(raw)
        cells = json.loads(raw).get("cells", [])
    except (OSError, ValueError, AttributeError, RecursionError):  # RecursionError: JSON nested too deep
        return set()
    ids = set()
    for cell in cells if isinstance(cells, list) else []:
        meta = (cell.get("metadata") or {}).get("nbgrader") or {} if isinstance(cell, dict) else {}
        if isinstance(meta, dict) and meta.get("grade_id"):
            ids.add(str(meta["grade_id"]))
    return ids


def match_notebooks(
    student_dir: Path, names: tuple[str, ...], ids_by_name: dict[str, set[str]], max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES
) -> tuple[dict[str, Path | None], list[str]]:
    """Map each release name to one file of the student's, with notes on what was guessed.

    By name first (exact, then normalized); a file whose name matches nothing is matched
    by the grade ids it contains (unless it is over ``max_bytes``). Several candidates: the
    exact name wins, else the newest. At most ``max_files`` .ipynb files are looked at,
    those named like a course notebook and nearest the top of the folder first.
    """
    home = student_dir.resolve()
    by_lower = {name.lower(): name for name in names}
    files, notes = walk_notebooks(student_dir, 20 * max_files + 1)
    more = len(files) > 20 * max_files
    files.sort(key=lambda p: (p.stem not in names, normalize(p.stem) not in by_lower, len(p.parts), str(p)))
    if more or len(files) > max_files:
        notes.append(
            f"{'more than ' if more else ''}{len(files) - more} .ipynb files: only {max_files} were looked at "
            "(those named like a course notebook first)"
        )
        files = files[:max_files]
    files = sorted(p for p in files if p.is_file())
    candidates: dict[str, list[tuple[int, float, Path]]] = {name: [] for name in names}
    for path in files:
        linked = any(part.is_symlink() for part in [path, *path.parents] if part != student_dir and student_dir in part.parents)
        if linked or home not in path.resolve().parents:
            notes.append(f"ignored {path.relative_to(student_dir)}: a symbolic link (submissions must be plain files)")
            continue
        if path.stem in names:
            candidates[path.stem].append((0, -path.stat().st_mtime, path))
            continue
        guess = by_lower.get(normalize(path.stem))
        how = "renamed"
        if guess is None and path.stat().st_size > max_bytes:
            notes.append(f"ignored {path.relative_to(student_dir)}: over the {max_bytes / 2**20:g} MB size limit")
            continue
        if guess is None:
            held = grade_ids(path, max_bytes)
            hits = [name for name in names if held & ids_by_name.get(name, set())]
            guess = hits[0] if len(hits) == 1 else None
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
            notes.append(f"{len(options)} files for {name}.ipynb; graded {options[0][2].relative_to(student_dir)}")
    return chosen, notes


def walk_notebooks(
    folder: Path, limit: int, max_depth: int = MAX_DEPTH, max_entries: int = MAX_ENTRIES, max_seconds: float = MAX_WALK_SECONDS
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
                        why = f"more than {max_entries:,} entries" if listed > max_entries else f"over {max_seconds:g} s to list"
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
