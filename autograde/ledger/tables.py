"""The score tables the grader writes (``grades.csv`` after grading, ``final_grades.csv`` from
``export``): their columns, one rule for a cell's value, the totals and the late penalty
(``settle_rows``, on ``late.settle``, once per command), shared by both, by the LMS files and by the
class report, and CSV files safe to open in a spreadsheet. No other module lists a score table's
columns.

A cell that starts with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage return before one)
is read by Excel, LibreOffice and Google Sheets as a formula, and a formula can fetch URLs or
run commands on the instructor's machine (OWASP: CSV injection). Any such text cell is written
with a leading ``'``, which spreadsheets show as text; numbers are written as numbers.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..model import PENDING, REVIEW, LateFacts, Record
from .gradebook import Book, Grade
from .late import LateSpec, Settled, settle

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

# the columns after the exercises' (automatic ones first, then the manual ones): grades.csv's and
# final_grades.csv's
# grades.csv's last column: the edition(s) a student's notebooks were written in
EDITION_COLUMN = "edition"
GRADES_COLUMNS = (
    "auto_total",
    "total",
    "max_total",
    "pending",
    "needs_review",
    "late_penalty",
    "final_total",
    EDITION_COLUMN,
)
FINAL_COLUMNS = (
    "auto_total",
    "manual_total",
    "total",
    "max_total",
    "pending",
    "needs_review",
    "late_penalty",
    "final_total",
    "late_basis",
)
# a table's columns that are no exercise's
NOT_EXERCISES = ("student_id", *dict.fromkeys((*FINAL_COLUMNS, *GRADES_COLUMNS)))


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


def write_csv(path: Path, fields: list[str], rows: Iterable[Sequence | dict]) -> None:
    """Write ``rows`` (each its values in the order of ``fields``, or a dict by column) under the
    header ``fields``, every cell through ``spreadsheet_safe``, atomically (a reader never sees half
    a table)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([spreadsheet_safe(field) for field in fields])
        for row in rows:
            values = [row.get(field, "") for field in fields] if isinstance(row, dict) else row
            writer.writerow([spreadsheet_safe(value) for value in values])
    os.replace(tmp, path)


def cell_value(e, entry: Grade | None, record: Record | None = None) -> float | str:
    """One cell of a score table for exercise ``e``: a person's score from the gradebook
    (``review`` when the answer changed since they gave it: not counted), else the judge's score,
    else ``pending`` for an answer a person has yet to grade. ``record``: the notebook's grading
    record (grades.csv); without one (the export reads the gradebook alone) a missing automatic
    score is 0. A notebook that was not graded at all scores 0, with nothing left for a person."""
    score = entry.score if entry else None
    if entry is not None and entry.needs_review:
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


@dataclass
class ScoreRow:
    """A student's row of a score table: each exercise's cell (a score, ``pending`` or ``review``),
    the totals, and the late penalty as the table settled it. ``grades.csv`` and
    ``final_grades.csv`` are written from rows (``values``) and read back into them
    (``ledger.folder``)."""

    student_id: str
    cells: dict[str, float | str] = field(default_factory=dict)  # grade id -> its cell
    auto_total: float = 0.0
    manual_total: float = 0.0
    total: float = 0.0
    max_total: float = 0.0
    pending: float = 0
    needs_review: float = 0
    late_penalty: float | str = 0.0  # "unknown" while a notebook's lateness is
    final_total: float = 0.0
    late_basis: str = ""  # final_grades.csv: how each notebook's penalty was decided
    edition: str = ""  # grades.csv: the edition(s) the student's notebooks were written in

    def value(self, column: str) -> float | str:
        return self.cells[column] if column in self.cells else getattr(self, column)

    def values(self, fields: list[str]) -> list:
        """The row's cells under the header ``fields``."""
        return [self.value(name) for name in fields]

    def charge(self, settled: Settled, accept_unknown: bool = False) -> None:
        """``late_penalty`` and ``final_total`` from the penalty settled on this row's scores."""
        self.late_penalty = settled.shown(accept_unknown)
        self.final_total = round(self.total - settled.penalty, 6)


def score_row(student: str, cells: list, value) -> ScoreRow:
    """A student's row: ``value(e)`` for each exercise (automatic ones first), then the totals:
    ``auto_total``, ``manual_total``, ``total`` (every counted score), ``max_total``, how many
    answers are ``pending`` and how many ``needs_review``."""
    row = ScoreRow(
        student,
        {
            e.grade_id: value(e)
            for e in [*(e for e in cells if not e.manual), *(e for e in cells if e.manual)]
        },
    )
    counted = [(e, v) for e in cells if not isinstance(v := row.cells[e.grade_id], str)]
    row.auto_total = sum(v for e, v in counted if not e.manual)
    row.manual_total = sum(v for e, v in counted if e.manual)
    row.total = sum(v for _, v in counted)
    row.max_total = sum(e.points for e in cells)
    row.pending = sum(row.cells[e.grade_id] == PENDING for e in cells if e.manual)
    row.needs_review = sum(row.cells[e.grade_id] == REVIEW for e in cells)
    return row


def notebook_scores(row: ScoreRow, cells: list, notebooks) -> dict[str, tuple[float, float]]:
    """{notebook: (its score as the row counts it, its max points)} for ``notebooks``: every number
    in the row's cells (the judge's scores, a person's where given); ``pending`` and ``review``
    count 0."""
    found = {}
    for notebook in notebooks:
        mine = [e for e in cells if e.notebook == notebook]
        found[notebook] = (
            sum(row.cells[e.grade_id] for e in mine if not isinstance(row.cells[e.grade_id], str)),
            sum(e.points for e in mine),
        )
    return found


@dataclass
class ScoreTable:
    """A score table whose late penalty is settled: its rows, and each student's penalty as it was
    settled, once, on the scores the rows count (``settle_rows``). grades.csv, final_grades.csv, the
    LMS files, the gradebook's late fields, the feedback pages and the class report all take it from
    here."""

    cells: list
    rows: list[ScoreRow]
    settled: dict[str, Settled] = field(default_factory=dict)

    def write(self, path: Path, fields: list[str]) -> None:
        write_csv(path, fields, (row.values(fields) for row in self.rows))


def settle_rows(
    cells: list,
    rows: list[ScoreRow],
    spec: LateSpec,
    submitted,
    flags,
    accept_unknown: bool = False,
) -> ScoreTable:
    """The one place the late penalty is settled: each row's, once, on each submitted notebook's
    score as the row counts it (``late.settle``), its ``late_penalty`` and ``final_total`` then set
    from it. ``submitted(student)``: the notebooks they sent; ``flags``: {student: notebooks the LMS
    marked late}. Every table goes through here: grades.csv, final_grades.csv and the LMS files
    cannot disagree on a student's final score."""
    table = ScoreTable(cells, rows)
    for row in rows:
        found = settle(
            spec,
            row.student_id,
            notebook_scores(row, cells, submitted(row.student_id)),
            flags.get(row.student_id, ()),
        )
        row.charge(found, accept_unknown)
        table.settled[row.student_id] = found
    return table


def grades_table(
    cells: list, records: list[Record], book: Book, spec: LateSpec, flags
) -> tuple[ScoreTable, list[Record]]:
    """grades.csv's table of ``records`` (the batch's): each cell's value from a person's score in
    ``book`` or the judge's, the penalty settled once per student; and the records, each given the
    late facts the table settled (one a student did not submit: none, never late)."""
    by_student: dict[str, dict[str, Record]] = {}
    for r in records:
        by_student.setdefault(r.student_id, {})[r.notebook] = r
    rows = []
    for student, per_nb in sorted(by_student.items()):
        stored = book.of(student)
        row = score_row(
            student,
            cells,
            lambda e, per_nb=per_nb, stored=stored: cell_value(
                e, stored.get(e.grade_id), per_nb.get(e.notebook, NOTHING)
            ),
        )
        row.edition = "+".join(sorted({r.edition for r in per_nb.values() if r.edition}))
        rows.append(row)
    sent = {s: [nb for nb, r in per.items() if r.submitted] for s, per in by_student.items()}
    table = settle_rows(cells, rows, spec, lambda student: sent[student], flags)
    settled = [
        r.but(late=table.settled[r.student_id].facts[r.notebook] if r.submitted else LateFacts())
        for r in records
    ]
    return table, settled


NOTHING = Record("", "", "missing")  # a notebook a student has no record for: it scores 0
