"""The batch's tables: grades.csv (one row per student), log.jsonl and summary.json, written from
the score table whose penalty was settled once (``tables.grades_table``)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from tools.project_runtime import write_json_atomic

from ..course import Course, Exercise
from ..model import STATUS_TEXT, Record
from . import gradebook
from .facts import BookInfo, ClusterInfo, LateProblem, Problem, Redaction, SandboxInfo, Summary
from .gradebook import Book
from .late import LateSpec
from .layout import Out
from .tables import ScoreTable, grades_header, grades_table


def _problem(record: Record) -> Problem:
    return Problem(
        record.student_id, record.notebook, record.status, STATUS_TEXT[record.status], record.detail
    )


def write_log(out: Out, records: list[Record]) -> None:
    tmp = out.log.with_name(out.log.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for r in sorted(records, key=lambda r: (r.student_id, r.notebook)):
            handle.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
    os.replace(tmp, out.log)


def late_in_gradebook(
    db_url: str, assignment: str, table: ScoreTable, late: LateSpec, book: BookInfo
) -> BookInfo:
    """nbgrader's own late fields: each notebook's penalty (the one the table settled), the due date
    and the extensions (the ones the table used). A gradebook that cannot be written is noted in
    ``book``."""
    try:
        gradebook.record_penalties(db_url, assignment, table.settled)
        gradebook.record_duedate(db_url, assignment, late.one_deadline(), late.extensions)
    except gradebook.GradebookError as exc:
        book = replace(book, error=str(exc))
    return book


def summarize(
    course: Course,
    cells: list[Exercise],
    table: ScoreTable,
    records: list[Record],
    notes,
    n_students: int,
    sandbox: SandboxInfo | None,
    book: BookInfo,
    where: ClusterInfo | None,
) -> Summary:
    """summary.json's facts of a graded batch (``where``: where the executor ran the jobs, when it
    says)."""
    by_student: dict[str, dict[str, Record]] = {}
    notes = {student: list(found) for student, found in notes.items()}
    for r in records:
        by_student.setdefault(r.student_id, {})[r.notebook] = r
        notes.setdefault(r.student_id, []).extend(
            f"{r.notebook}.ipynb: {note}" for note in r.matching_notes or ()
        )
    problems = [
        _problem(per_nb[nb])
        for _, per_nb in sorted(by_student.items())
        for nb in course.notebooks
        if nb in per_nb and not per_nb[nb].graded
    ]
    return Summary(
        students=n_students,
        notebooks_graded=sum(r.graded for r in records),
        notebooks_reused=sum(r.cached for r in records),
        max_total=sum(e.points for e in cells),
        max_auto=sum(e.points for e in cells if not e.manual),
        max_manual=sum(e.points for e in cells if e.manual),
        manual_columns=[e.grade_id for e in cells if e.manual],
        manual_pending=sum(row.pending for row in table.rows),
        needs_review=sum(row.needs_review for row in table.rows),
        gradebook=book,
        problems=problems,
        late_problems=[
            LateProblem(r.student_id, r.notebook, r.late.problem)
            for r in records
            if r.late and r.late.problem is not None
        ],
        matching_notes={s: n for s, n in notes.items() if n},
        columns=grades_header(cells),
        sandbox=sandbox,
        redactions=[
            Redaction(r.student_id, r.notebook, r.redacted_lines)
            for r in records
            if r.redacted_lines
        ],
        cluster=where or None,
    )


def write_summary(out: Out, summary: Summary) -> None:
    write_json_atomic(out.summary, summary.to_json())


def write_tables(out: Out, table: ScoreTable, records: list[Record], summary: Summary) -> None:
    """grades.csv (one row per student: each cell's score, a reflection not yet graded by a
    person as ``pending``, a person's score on an answer changed since as ``review`` (not
    counted), ``auto_total``, ``total`` = every score so far, ``max_total``, how many answers
    are ``pending`` and how many ``needs_review``, the late penalty and the final score),
    log.jsonl and summary.json."""
    table.write(out.grades, summary.columns)
    write_log(out, records)
    write_summary(out, summary)


def write_results(
    course: Course,
    out: Path,
    graded_cells: list[Exercise],
    records: list[Record | dict],
    notes: dict[str, list[str]],
    n_students: int,
    sandbox: SandboxInfo | None,
    db_url: str | None = None,
    book: BookInfo | None = None,
    late: LateSpec | None = None,
) -> Summary:
    """A graded OUT's tables from ``records`` (each a record or its JSON, as log.jsonl holds it), as
    a grading run writes them: the gradebook's scores read once, the penalty settled once, the
    gradebook given it, grades.csv, log.jsonl and summary.json written. Returns the summary."""
    from .folder import Ledger

    ledger = Ledger(out, course)
    records = [r if isinstance(r, Record) else Record.from_json(r) for r in records]
    stored, book = Book(), book or BookInfo()
    if db_url and not book.error:
        try:
            stored = gradebook.read_book(db_url, course.assignment)
        except gradebook.GradebookError as exc:
            book = replace(book, error=str(exc))
    late = late or ledger.late_spec
    table, records = grades_table(graded_cells, records, stored, late, ledger.intake.late_in_lms)
    if db_url and not book.error and late.active:
        book = late_in_gradebook(db_url, course.assignment, table, late, book)
    summary = summarize(
        course, graded_cells, table, records, notes, n_students, sandbox, book, None
    )
    write_tables(ledger.out, table, records, summary)
    return summary
