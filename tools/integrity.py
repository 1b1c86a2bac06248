"""The release's integrity: which graded cells (nbgrader grade ids and metadata) each course
notebook must keep, and what a submitted notebook's JSON lost or gained against them. The learner's
check before submitting (``notebook_runtime.check_submission``) and the grader (finding a renamed
file, validating a notebook, the learner wheel's ``release_cells.json``) share these rules."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .i18n import COMMA, LIST, N_, Message, english, joined
from .project_runtime import find_project_root

# What platforms and Jupyter do to a name: "Copy of X", "X (1)", "X-Copy1", "X copy", "X_copy2".
_RENAMES = [
    re.compile(p, re.IGNORECASE) for p in (r"^copy of\s+", r"\s*\(\d+\)$", r"[-_ ]copy\d*$")
]


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


UNFINISHED = N_(
    "answer cell '{gid}' still raises NotImplementedError: that exercise is not done yet"
)
# written into the learner wheel by the bundle
RELEASE_CELLS = Path(__file__).with_name("release_cells.json")
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
                "defines": re.findall(r"^def (\w+)\(", source, re.M)
                if meta.get("solution")
                else [],
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
            {
                p.stem: describe_release_cells(json.loads(p.read_text(encoding="utf-8")))
                for p in sorted(folder.glob("*.ipynb"))
            }
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
        raise ValueError(
            f"{notebook!r} is not a notebook of this course; expected one of: "
            f"{', '.join(sorted(known)) or '(none found)'}"
        )
    return known[stem]


def identify_notebook(notebook: dict) -> str | None:
    """Which course notebook a notebook's JSON is, by the grade ids its cells carry (any file
    name): the release name that shares the most grade ids with it, or None when it shares none
    (or two notebooks share as many)."""
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    ids = {
        str(meta["grade_id"])
        for cell in (cells if isinstance(cells, list) else [])
        if isinstance(cell, dict)
        and isinstance(meta := (cell.get("metadata") or {}).get("nbgrader"), dict)
        and meta.get("grade_id")
    }
    scores = sorted(
        (
            (len(ids & {c["grade_id"] for c in cells}), name)
            for name, cells in known_release_cells().items()
        ),
        reverse=True,
    )
    if not scores or scores[0][0] == 0 or (len(scores) > 1 and scores[1][0] == scores[0][0]):
        return None
    return scores[0][1]


def submission_problems(
    notebook: dict, expected: list[dict[str, Any]]
) -> tuple[list[str], list[str]]:
    """(problems that cost points at grading, notes that do not) for a notebook's JSON, in English
    (the grader's validation reads them); ``submission_findings`` keeps them as Messages."""
    problems, notes = submission_findings(notebook, expected)
    return [english(p) for p in problems], [english(n) for n in notes]


def submission_findings(
    notebook: dict, expected: list[dict[str, Any]]
) -> tuple[list[Message], list[Message]]:
    """(problems that cost points at grading, notes that do not) for a notebook's JSON, each a
    Message: the learner's check shows them in the learner's language."""
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        return [Message("this file is not a Jupyter notebook (no list of cells)")], []
    problems, notes = [], []
    found = _graded_cells_by_id(cells)
    for want in expected:
        gid = want["grade_id"]
        present = found.get(gid, [])
        if present:
            _check_graded_cell(want, present, problems, notes)
        elif want["solution"]:
            problems.append(_missing_answer_problem(want, cells))
        else:
            notes.append(Message("test cell '{gid}' is gone; the grader puts it back", gid=gid))
    known = {want["grade_id"] for want in expected}
    for gid in sorted(set(found) - known):
        problems.append(
            Message(
                "cell '{gid}' is not a graded cell of this notebook (pasted from another "
                "one?): remove its metadata or the cell",
                gid=gid,
            )
        )
    return problems, notes


def _graded_cells_by_id(cells: list) -> dict[str, list[dict]]:
    """The notebook's cells that carry an nbgrader grade_id, grouped by it (in notebook order)."""
    found: dict[str, list[dict]] = {}
    for cell in cells:
        meta = (cell.get("metadata") or {}).get("nbgrader") if isinstance(cell, dict) else None
        if isinstance(meta, dict) and meta.get("grade_id"):
            found.setdefault(str(meta["grade_id"]), []).append(cell)
    return found


def _missing_answer_problem(want: dict[str, Any], cells: list) -> Message:
    """The problem for an answer cell the grader cannot find: its metadata was lost (a plain code
    cell still defines its functions), or the cell itself is gone."""
    gid = want["grade_id"]
    orphan = [
        c
        for c in cells
        if isinstance(c, dict)
        and c.get("cell_type") == "code"
        and not (c.get("metadata") or {}).get("nbgrader")
        and any(
            re.search(rf"^def {re.escape(f)}\(", "".join(c.get("source", "")), re.M)
            for f in want["defines"]
        )
    ]
    if orphan:
        return Message(
            "the answer cell that defines {names} lost its grading metadata "
            "(nbgrader grade_id '{gid}'; your platform "
            "rewrote it): the grader cannot find your answer. Paste your code "
            "into that cell of a fresh copy of the release notebook.",
            names=joined(want["defines"], LIST),
            gid=gid,
        )
    return Message(
        "answer cell '{gid}' is missing: the grader finds no answer for it. "
        "Take the cell from a fresh copy of the release notebook and put "
        "your code back in.",
        gid=gid,
    )


def _check_graded_cell(
    want: dict[str, Any], present: list[dict], problems: list[Message], notes: list[Message]
) -> None:
    """Add to ``problems`` and ``notes`` what is wrong with a graded cell that is there: copies of
    it, changed grading metadata, an answer still unfinished."""
    gid, answer = want["grade_id"], bool(want["solution"])
    if len(present) > 1:
        template = (
            N_(
                "answer cell '{gid}' appears {count} times (a copied cell): keep one and "
                "delete the copies"
            )
            if answer
            else N_(
                "test cell '{gid}' appears {count} times (a copied cell): keep one and "
                "delete the copies"
            )
        )
        problems.append(Message(template, gid=gid, count=len(present)))
    meta = present[0]["metadata"]["nbgrader"]
    changed = [
        f"{key} {want[key]!r} → {meta.get(key)!r}"
        for key in NBGRADER_KEYS
        if key in want and want[key] is not None and meta.get(key) != want[key]
    ]
    if changed:
        template = (
            N_(
                "answer cell '{gid}' has changed grading metadata ({changes}): take the "
                "cell from a fresh copy of the release notebook"
            )
            if answer
            else N_(
                "test cell '{gid}' has changed grading metadata ({changes}): take the "
                "cell from a fresh copy of the release notebook"
            )
        )
        problems.append(Message(template, gid=gid, changes=joined(changed, COMMA)))
    if answer and "raise NotImplementedError()" in "".join(present[0].get("source", "")):
        notes.append(Message(UNFINISHED, gid=gid))
