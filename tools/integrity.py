"""The release's integrity: which graded cells (nbgrader grade ids and metadata) each course
notebook must keep, and what a submitted notebook's JSON lost or gained against them. The learner's
check before submitting (``notebook_runtime.check_submission``) and the grader (finding a renamed
file, validating a notebook, the learner wheel's ``release_cells.json``) share these rules."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .project_runtime import find_project_root

# What platforms and Jupyter do to a name: "Copy of X", "X (1)", "X-Copy1", "X copy", "X_copy2".
_RENAMES = [re.compile(p, re.IGNORECASE) for p in (r"^copy of\s+", r"\s*\(\d+\)$", r"[-_ ]copy\d*$")]


def release_stem(stem: str) -> str:
    """The release name a renamed notebook most likely had (lower case); the grader matches
    submitted files by the same rule."""
    previous = None
    stem = stem.strip()
    while previous != stem:
        previous = stem
        for pattern in _RENAMES:
            stem = pattern.sub("", stem).strip()
    return stem.lower()


RELEASE_CELLS = Path(__file__).with_name("release_cells.json")  # written into the learner wheel by the bundle
NBGRADER_KEYS = ("grade", "solution", "locked", "points")


def describe_release_cells(notebook: dict) -> list[dict[str, Any]]:
    """The graded cells of a release notebook, as :func:`submission_problems` compares them."""
    cells = []
    for cell in notebook.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader") or {}
        if not meta.get("grade_id"):
            continue
        source = "".join(cell.get("source", ""))
        cells.append(
            {
                "grade_id": meta["grade_id"],
                **{key: meta.get(key) for key in NBGRADER_KEYS},
                "defines": re.findall(r"^def (\w+)\(", source, re.M) if meta.get("solution") else [],
            }
        )
    return cells


def known_release_cells() -> dict[str, list[dict[str, Any]]]:
    """{release name (lower case): its graded cells}: from the learner wheel's data, else from
    the course folder's ``notebooks/``."""
    if RELEASE_CELLS.is_file():
        known = json.loads(RELEASE_CELLS.read_text(encoding="utf-8"))["notebooks"]
    else:
        root = find_project_root()
        folder = root / "notebooks" if root else None
        known = (
            {p.stem: describe_release_cells(json.loads(p.read_text(encoding="utf-8"))) for p in sorted(folder.glob("*.ipynb"))}
            if folder and folder.is_dir()
            else {}
        )
    return {name.lower(): cells for name, cells in known.items()}


def release_cells(notebook: str) -> list[dict[str, Any]]:
    """The graded cells that notebook ``notebook`` (a release name, or a platform's rename of
    one) must keep."""
    stem = release_stem(Path(notebook).stem)
    known = known_release_cells()
    if stem not in known:
        raise ValueError(f"{notebook!r} is not a notebook of this course; expected one of: {', '.join(sorted(known)) or '(none found)'}")
    return known[stem]


def identify_notebook(notebook: dict) -> str | None:
    """Which course notebook a notebook's JSON is, by the grade ids its cells carry (any file
    name): the release name that shares the most grade ids with it, or None when it shares none
    (or two notebooks share as many)."""
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    ids = {
        str(meta["grade_id"])
        for cell in (cells if isinstance(cells, list) else [])
        if isinstance(cell, dict) and isinstance(meta := (cell.get("metadata") or {}).get("nbgrader"), dict) and meta.get("grade_id")
    }
    scores = sorted(((len(ids & {c["grade_id"] for c in cells}), name) for name, cells in known_release_cells().items()), reverse=True)
    if not scores or scores[0][0] == 0 or (len(scores) > 1 and scores[1][0] == scores[0][0]):
        return None
    return scores[0][1]


def submission_problems(notebook: dict, expected: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(problems that cost points at grading, notes that do not) for a notebook's JSON."""
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        return ["this file is not a Jupyter notebook (no list of cells)"], []
    problems, notes = [], []
    found: dict[str, list[dict]] = {}
    for cell in cells:
        meta = (cell.get("metadata") or {}).get("nbgrader") if isinstance(cell, dict) else None
        if isinstance(meta, dict) and meta.get("grade_id"):
            found.setdefault(str(meta["grade_id"]), []).append(cell)
    for want in expected:
        gid, answer = want["grade_id"], bool(want["solution"])
        kind = "answer cell" if answer else "test cell"
        present = found.get(gid, [])
        if not present:
            if not answer:
                notes.append(f"test cell '{gid}' is gone; the grader puts it back")
                continue
            orphan = [
                c
                for c in cells
                if isinstance(c, dict)
                and c.get("cell_type") == "code"
                and not (c.get("metadata") or {}).get("nbgrader")
                and any(re.search(rf"^def {re.escape(f)}\(", "".join(c.get("source", "")), re.M) for f in want["defines"])
            ]
            if orphan:
                problems.append(
                    f"the answer cell that defines {', '.join(want['defines'])} lost its grading metadata "
                    f"(nbgrader grade_id '{gid}'; your platform rewrote it): the grader cannot find your answer. "
                    "Paste your code into that cell of a fresh copy of the release notebook."
                )
            else:
                problems.append(
                    f"answer cell '{gid}' is missing: the grader finds no answer for it. "
                    "Take the cell from a fresh copy of the release notebook and put your code back in."
                )
            continue
        if len(present) > 1:
            problems.append(f"{kind} '{gid}' appears {len(present)} times (a copied cell): keep one and delete the copies")
        meta = present[0]["metadata"]["nbgrader"]
        changed = [
            f"{key} {want[key]!r} → {meta.get(key)!r}"
            for key in NBGRADER_KEYS
            if key in want and want[key] is not None and meta.get(key) != want[key]
        ]
        if changed:
            problems.append(
                f"{kind} '{gid}' has changed grading metadata ({', '.join(changed)}): take the cell from a fresh copy of the release notebook"
            )
        if answer and "raise NotImplementedError()" in "".join(present[0].get("source", "")):
            notes.append(f"answer cell '{gid}' still raises NotImplementedError: that exercise is not done yet")
    known = {want["grade_id"] for want in expected}
    for gid in sorted(set(found) - known):
        problems.append(f"cell '{gid}' is not a graded cell of this notebook (pasted from another one?): remove its metadata or the cell")
    return problems, notes
