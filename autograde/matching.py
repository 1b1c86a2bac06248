"""Find each course notebook in a student's folder, whatever a platform renamed it to."""
from __future__ import annotations

import json
import re
from pathlib import Path

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


def grade_ids(path: Path) -> set[str]:
    """The nbgrader grade ids in a notebook (empty when it cannot be read)."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return set()
    ids = set()
    for cell in cells if isinstance(cells, list) else []:
        meta = (cell.get("metadata") or {}).get("nbgrader") or {} if isinstance(cell, dict) else {}
        if isinstance(meta, dict) and meta.get("grade_id"):
            ids.add(str(meta["grade_id"]))
    return ids


def match_notebooks(student_dir: Path, names: tuple[str, ...], ids_by_name: dict[str, set[str]]) -> tuple[dict[str, Path | None], list[str]]:
    """Map each release name to one file of the student's, with notes on what was guessed.

    By name first (exact, then normalized); a file whose name matches nothing is matched
    by the grade ids it contains. Several candidates: the exact name wins, else the newest.
    """
    home = student_dir.resolve()
    files = sorted(p for p in student_dir.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts and p.is_file())
    by_lower = {name.lower(): name for name in names}
    candidates: dict[str, list[tuple[int, float, Path]]] = {name: [] for name in names}
    notes: list[str] = []
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
        if guess is None:
            found = grade_ids(path)
            hits = [name for name in names if found & ids_by_name.get(name, set())]
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
