"""The score tables the grader writes (``grades.csv`` after grading, ``final_grades.csv`` from
``export``): their columns, one rule for a cell's value, the totals and the late penalty
(``late_columns``, on ``late.settle``), shared by both, by the LMS files and by the class report, and
CSV files safe to open in a spreadsheet. No other module lists a score table's columns.

A cell that starts with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage return before one)
is read by Excel, LibreOffice and Google Sheets as a formula, and a formula can fetch URLs or
run commands on the instructor's machine (OWASP: CSV injection). Any such text cell is written
with a leading ``'``, which spreadsheets show as text; numbers are written as numbers.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from ..model import PENDING, REVIEW, Record
from . import gradebook
from .late import LateSpec, Settled, settle

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

# the columns after the exercises' (automatic ones first, then the manual ones): grades.csv's and final_grades.csv's
EDITION_COLUMN = "edition"  # grades.csv's last column: the edition(s) a student's notebooks were written in
GRADES_COLUMNS = ("auto_total", "total", "max_total", "pending", "needs_review", "late_penalty", "final_total", EDITION_COLUMN)
FINAL_COLUMNS = ("auto_total", "manual_total", "total", "max_total", "pending", "needs_review", "late_penalty", "final_total", "late_basis")
NOT_EXERCISES = ("student_id", *dict.fromkeys((*FINAL_COLUMNS, *GRADES_COLUMNS)))  # a table's columns that are no exercise's


def exercise_columns(cells: list) -> list[str]:
    """The exercises' columns of a score table: the automatic ones, then those a person grades."""
    return [*(e.grade_id for e in cells if not e.manual), *(e.grade_id for e in cells if e.manual)]


def grades_header(cells: list) -> list[str]:
    """grades.csv's header."""
    return ["student_id", *exercise_columns(cells), *GRADES_COLUMNS]


def final_header(cells: list) -> list[str]:
    """final_grades.csv's header."""
    return ["student_id", *exercise_columns(cells), *FINAL_COLUMNS]


def spreadsheet_safe(value):
    """``value`` as a CSV cell: a float as its shortest form (``1``, ``0.25``), a text that a
    spreadsheet would read as a formula behind a ``'``, anything else as it is."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def write_csv(path: Path, fields: list[str], rows: list[dict]) -> None:
    """Write ``rows`` under the header ``fields``, every cell through ``spreadsheet_safe``,
    atomically (a reader never sees half a table)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writerow({field: spreadsheet_safe(field) for field in fields})
        for row in rows:
            writer.writerow({key: spreadsheet_safe(value) for key, value in row.items()})
    os.replace(tmp, path)


def cell_value(e, entry: dict | None, record: Record | None = None):
    """One cell of a score table for exercise ``e``: a person's score from the gradebook
    (``review`` when the answer changed since they gave it: not counted), else the judge's score,
    else ``pending`` for an answer a person has yet to grade. ``record``: the notebook's grading
    record (grades.csv); without one (the export reads the gradebook alone) a missing automatic
    score is 0. A notebook that was not graded at all scores 0, with nothing left for a person."""
    score = gradebook.cell_score(entry) if entry else None
    if gradebook.needs_review(entry):
        return REVIEW
    if score is not None:
        return score
    if record is None:
        return PENDING if e.manual else 0.0
    if not record.graded:
        return 0.0
    if not e.manual:
        return float(record.scores.get(e.grade_id, 0.0))
    left = (record.manual or {}).get(e.grade_id)  # 0: left as released
    return PENDING if left is None else float(left)


def score_row(student: str, cells: list, value) -> dict:
    """A student's row: ``value(e)`` for each exercise (automatic ones first), then the totals:
    ``auto_total``, ``manual_total``, ``total`` (every counted score), ``max_total``, how many
    answers are ``pending`` and how many ``needs_review``."""
    row: dict = {"student_id": student}
    for e in [*(e for e in cells if not e.manual), *(e for e in cells if e.manual)]:
        row[e.grade_id] = value(e)
    counted = [(e, v) for e in cells if not isinstance(v := row[e.grade_id], str)]
    row["auto_total"] = sum(v for e, v in counted if not e.manual)
    row["manual_total"] = sum(v for e, v in counted if e.manual)
    row["total"] = sum(v for _, v in counted)
    row["max_total"] = sum(e.points for e in cells)
    row["pending"] = sum(row[e.grade_id] == PENDING for e in cells if e.manual)
    row["needs_review"] = sum(row[e.grade_id] == REVIEW for e in cells)
    return row


def notebook_scores(row: dict, cells: list, notebooks) -> dict[str, tuple[float, float]]:
    """{notebook: (its score as the row counts it, its max points)} for ``notebooks``: every number in
    the row's cells (the judge's scores, a person's where given); ``pending`` and ``review`` count 0."""
    found = {}
    for notebook in notebooks:
        mine = [e for e in cells if e.notebook == notebook]
        found[notebook] = (sum(row[e.grade_id] for e in mine if not isinstance(row[e.grade_id], str)), sum(e.points for e in mine))
    return found


def late_columns(row: dict, cells: list, spec: LateSpec, notebooks, flagged=(), accept_unknown: bool = False) -> Settled:
    """Put ``late_penalty`` and ``final_total`` in a score row: the penalty on each submitted notebook's
    score as the row counts it (``late.settle``), taken from the row's ``total``. Every table calls
    this: grades.csv, final_grades.csv and the LMS files cannot disagree on a student's final score."""
    settled = settle(spec, row["student_id"], notebook_scores(row, cells, notebooks), flagged)
    row.update(settled.columns(row["total"], accept_unknown))
    return settled
