"""Build real submissions from the learner release: the release notebook, with its exercise
cells filled in the way a learner would (from the instructor's answer, or a mutation of it)."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "notebooks"
SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = ["01_what_can_overlap", "02_total_vs_exposed_time", "03_handoff_state_contract",
             "04_decode_start_gate", "05_cuda_stream_overlap", "06_handoff_simulator"]
_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$\n?", re.M)


def answer(grade_id: str) -> str:
    """The instructor's answer for a solution cell, as a learner would type it (no markers)."""
    for name in NOTEBOOKS:
        for cell in nbformat.read(SOLUTIONS / f"{name}.ipynb", 4).cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
                return _MARKER.sub("", cell.source)
    raise KeyError(grade_id)


def solution_ids(name: str) -> list[str]:
    return [c.metadata["nbgrader"]["grade_id"] for c in nbformat.read(RELEASE / f"{name}.ipynb", 4).cells
            if c.metadata.get("nbgrader", {}).get("solution")]


def build(name: str, edits: dict[str, str] | None = None, fill: bool = True) -> nbformat.NotebookNode:
    """The release notebook ``name`` with every exercise answered (``fill``), then ``edits``
    ({grade_id: new source}) applied."""
    nb = nbformat.read(RELEASE / f"{name}.ipynb", 4)
    edits = dict(edits or {})
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in edits:
            cell.source = edits.pop(gid)
        elif fill and cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = answer(gid)
    assert not edits, f"unknown cells {list(edits)}"
    return nb


def mutate(grade_id: str, old: str, new: str) -> dict[str, str]:
    """An edit that replaces ``old`` by ``new`` in the answer of ``grade_id`` (must occur)."""
    source = answer(grade_id)
    assert old in source, f"{old!r} not in the answer of {grade_id}"
    return {grade_id: source.replace(old, new)}


def insert_after(nb: nbformat.NotebookNode, grade_id: str, source: str) -> nbformat.NotebookNode:
    """Add a plain code cell after the cell ``grade_id``."""
    for i, cell in enumerate(nb.cells):
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            nb.cells.insert(i + 1, nbformat.v4.new_code_cell(source))
            return nb
    raise KeyError(grade_id)


def drop_cell(nb: nbformat.NotebookNode, grade_id: str) -> nbformat.NotebookNode:
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != grade_id]
    return nb


def write(folder: Path, student: str, name: str, nb, filename: str | None = None) -> Path:
    target = folder / student / (filename or f"{name}.ipynb")
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return target
