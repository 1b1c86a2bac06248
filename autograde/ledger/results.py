"""The batch's tables: grades.csv (one row per student), log.jsonl and summary.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tools.project_runtime import write_json_atomic

from ..course import Course, Exercise
from ..model import STATUS_TEXT, Record
from . import gradebook
from .late import LateSpec, lms_flags, load_spec
from .tables import EDITION_COLUMN, cell_value, grades_header, late_columns, score_row, write_csv

NOTHING = Record("", "", "missing")  # a notebook a student has no record for: it scores 0


def _student_row(student: str, per_nb: dict[str, Record], graded_cells: list[Exercise], stored: dict, late: LateSpec, flagged=()) -> dict:
    """A student's row of grades.csv (tables.score_row, without the export's manual_total); the late
    penalty settled on the scores the row counts (tables.late_columns), each record given its facts."""
    row = score_row(student, graded_cells, lambda e: cell_value(e, stored.get(e.grade_id), per_nb.get(e.notebook, NOTHING)))
    del row["manual_total"]
    submitted = [nb for nb, r in per_nb.items() if r.submitted]
    settled = late_columns(row, graded_cells, late, submitted, flagged)
    for notebook in submitted:
        per_nb[notebook] = per_nb[notebook].but(late=settled.facts[notebook])
    row[EDITION_COLUMN] = "+".join(sorted({r.edition for r in per_nb.values() if r.edition}))
    return row


def _problem(record: Record) -> dict:
    return {
        "student_id": record.student_id,
        "notebook": record.notebook,
        "status": record.status,
        "what_happened": STATUS_TEXT[record.status],
        "detail": record.detail,
    }


def _write_log(out: Path, records: list[Record]) -> None:
    with open(out / "log.jsonl.tmp", "w", encoding="utf-8") as handle:
        for r in sorted(records, key=lambda r: (r.student_id, r.notebook)):
            handle.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
    os.replace(out / "log.jsonl.tmp", out / "log.jsonl")


def _late_in_gradebook(db_url: str, assignment: str, by_student: dict[str, dict[str, Record]], late: LateSpec, book: dict | None) -> dict | None:
    """nbgrader's own late fields: each notebook's penalty (the one grades.csv took), the due date and the
    extensions (the ones the table used). A gradebook that cannot be written is noted in ``book``."""
    try:
        penalties = {s: {nb: (r.late or {}).get("penalty", 0.0) for nb, r in per.items()} for s, per in by_student.items()}
        gradebook.record_penalties(db_url, assignment, penalties)
        gradebook.record_duedate(db_url, assignment, late.one_deadline(), late.extensions)
    except gradebook.GradebookError as exc:
        book = {**(book or {}), "error": str(exc)}
    return book


def write_results(
    course: Course,
    out: Path,
    graded_cells: list[Exercise],
    records: list[Record | dict],
    notes: dict[str, list[str]],
    n_students: int,
    sandbox: dict,
    db_url: str | None = None,
    book: dict | None = None,
    late: LateSpec | None = None,
) -> dict:
    """:func:`write_tables`, returning the summary alone (a record may be given as its JSON, as
    log.jsonl holds it)."""
    records = [r if isinstance(r, Record) else Record.from_json(r) for r in records]
    return write_tables(course, out, graded_cells, records, notes, n_students, sandbox, db_url, book, late)[0]


def write_tables(
    course: Course,
    out: Path,
    graded_cells: list[Exercise],
    records: list[Record],
    notes: dict[str, list[str]],
    n_students: int,
    sandbox: dict,
    db_url: str | None = None,
    book: dict | None = None,
    late: LateSpec | None = None,
    where: dict | None = None,
) -> tuple[dict, list[Record]]:
    """grades.csv (one row per student: each cell's score, a reflection not yet graded by a
    person as ``pending``, a person's score on an answer changed since as ``review`` (not
    counted), ``auto_total``, ``total`` = every score so far, ``max_total``, how many answers
    are ``pending`` and how many ``needs_review``, the late penalty and the final score),
    log.jsonl, summary.json (with ``where`` as its ``cluster``: where the executor ran the jobs, when
    it says). Returns the summary and the records, each with the late facts the table settled on."""
    max_total = sum(e.points for e in graded_cells)
    auto_cells = [e for e in graded_cells if not e.manual]
    manual_cells = [e for e in graded_cells if e.manual]
    stored = {}
    if db_url and not (book or {}).get("error"):
        try:
            stored = gradebook.read_scores(db_url, course.assignment)
        except gradebook.GradebookError as exc:
            book = {**(book or {}), "error": str(exc)}
    by_student: dict[str, dict[str, Record]] = {}
    notes = {student: list(found) for student, found in notes.items()}
    for r in records:
        by_student.setdefault(r.student_id, {})[r.notebook] = r
        notes.setdefault(r.student_id, []).extend(f"{r.notebook}.ipynb: {note}" for note in r.matching_notes or ())
    late = late or load_spec(out)
    flags = lms_flags(out)
    rows = [
        _student_row(student, per_nb, graded_cells, stored.get(student, {}), late, flags.get(student, ()))
        for student, per_nb in sorted(by_student.items())
    ]
    settled = {(r.student_id, r.notebook): r for per in by_student.values() for r in per.values()}
    records = [settled.get((r.student_id, r.notebook), r) for r in records]
    if db_url and not (book or {}).get("error") and late.active:
        book = _late_in_gradebook(db_url, course.assignment, by_student, late, book)
    problems = [_problem(per_nb[nb]) for _, per_nb in sorted(by_student.items()) for nb in course.notebooks if nb in per_nb and not per_nb[nb].graded]
    fields = grades_header(graded_cells)
    late_problems = [
        {"student_id": r.student_id, "notebook": r.notebook, "problem": r.late["problem"]} for r in records if r.late and "problem" in r.late
    ]
    write_csv(out / "grades.csv", fields, rows)
    _write_log(out, records)
    summary = {
        "students": n_students,
        "notebooks_graded": sum(r.graded for r in records),
        "notebooks_reused": sum(r.cached for r in records),
        "max_total": max_total,
        "max_auto": sum(e.points for e in auto_cells),
        "max_manual": sum(e.points for e in manual_cells),
        "manual_columns": [e.grade_id for e in manual_cells],
        "manual_pending": sum(row["pending"] for row in rows),
        "needs_review": sum(row["needs_review"] for row in rows),
        "gradebook": book or {},
        "problems": problems,
        "late_problems": late_problems,
        "matching_notes": {s: n for s, n in notes.items() if n},
        "columns": fields,
        "sandbox": sandbox,
        "redactions": [{"student_id": r.student_id, "notebook": r.notebook, "lines": r.redacted_lines} for r in records if r.redacted_lines],
    }
    if where:
        summary["cluster"] = where
    write_json_atomic(out / "summary.json", summary)
    return summary, records
