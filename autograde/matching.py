"""Find each course notebook in a student's folder, whatever a platform renamed it to."""
from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

MAX_FILES = 50  # .ipynb files looked at per student: a folder of thousands is not all parsed
MAX_BYTES = 20 * 1024 * 1024  # a larger file is not parsed to look for grade ids

# What platforms and Jupyter do to a name: "Copy of X", "X (1)", "X-Copy1", "X copy", "X_copy2".
_RENAMES = [re.compile(p, re.IGNORECASE) for p in (r"^copy of\s+", r"\s*\(\d+\)$", r"[-_ ]copy\d*$")]


def normalize(stem: str) -> str:
    """The release name a renamed file most likely had."""
    previous = None
    stem = stem.strip()
    while previous != stem:
        previous = stem
        for pattern in _RENAMES:
            stem = pattern.sub("", stem).strip()
    return stem.lower()


def grade_ids(path: Path, max_bytes: int | None = None) -> set[str]:
    """The nbgrader grade ids in a notebook (empty when it cannot be read, or is over ``max_bytes``)."""
    try:
        if max_bytes is not None and path.stat().st_size > max_bytes:
            return set()
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return set()
    ids = set()
    for cell in cells if isinstance(cells, list) else []:
        meta = (cell.get("metadata") or {}).get("nbgrader") or {} if isinstance(cell, dict) else {}
        if isinstance(meta, dict) and meta.get("grade_id"):
            ids.add(str(meta["grade_id"]))
    return ids


def match_notebooks(student_dir: Path, names: tuple[str, ...], ids_by_name: dict[str, set[str]],
                    max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES) -> tuple[dict[str, Path | None], list[str]]:
    """Map each release name to one file of the student's, with notes on what was guessed.

    By name first (exact, then normalized); a file whose name matches nothing is matched
    by the grade ids it contains (unless it is over ``max_bytes``). Several candidates: the
    exact name wins, else the newest. At most ``max_files`` .ipynb files are looked at,
    those named like a course notebook and nearest the top of the folder first.
    """
    home = student_dir.resolve()
    by_lower = {name.lower(): name for name in names}
    found = (p for p in student_dir.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    files = list(itertools.islice(found, 20 * max_files + 1))  # names only; enough to choose from
    more = len(files) > 20 * max_files
    files.sort(key=lambda p: (p.stem not in names, normalize(p.stem) not in by_lower, len(p.parts), str(p)))
    notes: list[str] = []
    if more or len(files) > max_files:
        notes.append(f"{'more than ' if more else ''}{len(files) - more} .ipynb files: only {max_files} were looked at "
                     "(those named like a course notebook first)")
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
    chosen: dict[str, Path | None] = {}
    for name in names:
        options = sorted(candidates[name])
        chosen[name] = options[0][2] if options else None
        if len(options) > 1:
            notes.append(f"{len(options)} files for {name}.ipynb; graded {options[0][2].relative_to(student_dir)}")
    return chosen, notes
