"""A feedback page's data as the worker's feedback step writes it (exporters.PageDataExporter): a
small graded notebook with a visible check, two written answers and a learner's own code cell, for
the tests of the page the grader renders from it (record/pages.py)."""

from __future__ import annotations

import nbformat

from autograde.model import HIDDEN_NOTE
from autograde.record.pages import PageData

# a learner's text that looks like the page's labels
LEARNERS_OWN = 'print("Test cell Score: 1.0 / 2.0")'
TEST_CELL = (
    '"""TODO 4 · plan_decode_start: recompute, ready, wait or fallback, in that '
    'order."""\ncheck_plan(plan_decode_start)\n'
)


def _graded(cell, grade_id: str, points: float, score: float, solution: bool):
    cell.metadata["nbgrader"] = {
        "grade": True,
        "solution": solution,
        "grade_id": grade_id,
        "points": points,
        "score": score,
        "locked": not solution,
    }
    return cell


def graded_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(
        metadata={"language_info": {"name": "python", "pygments_lexer": "ipython3"}}
    )
    nb.cells = [
        nbformat.v4.new_markdown_cell("# The decode start gate"),
        _graded(
            nbformat.v4.new_code_cell(TEST_CELL + HIDDEN_NOTE),
            "todo4_plan_decode",
            2.0,
            0.75,
            False,
        ),
        _graded(nbformat.v4.new_markdown_cell("My first answer."), "refl_q1", 1.5, 0.0, True),
        _graded(nbformat.v4.new_markdown_cell("*Your answer:*"), "refl_q2", 1.0, 0.0, True),
        nbformat.v4.new_code_cell(LEARNERS_OWN),
    ]
    return nb


def page_data(late_penalty: float = 0.0) -> PageData:
    """The page data of ``graded_notebook`` (0.75 of 4.5 points: the written answers at 0)."""
    nbgrader = {
        "notebook": "04_decode_start_gate",
        "score": 0.75,
        "max_score": 4.5,
        "late_penalty": late_penalty,
    }
    return PageData(graded_notebook(), nbgrader)
