"""The batch's tables: grades.csv (one row per student), log.jsonl and summary.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tools.project_runtime import write_json_atomic

from ..course import Course, Exercise
from ..model import STATUS_TEXT
from . import gradebook
from .late import LateSpec, lms_flags, load_spec
from .tables import cell_value, late_columns, score_row, write_csv

TOTAL_COLUMNS = ("auto_total", "total", "max_total", "pending", "needs_review", "late_penalty", "final_total")  # grades.csv after the cells
EDITION_COLUMN = "edition"  # grades.csv's last column: the edition(s) a student's notebooks were written in


def _student_row(student: str, per_nb: dict[str, dict], graded_cells: list[Exercise], stored: dict, late: LateSpec, flagged=()) -> dict:
    """A student's row of grades.csv (tables.score_row, without the export's manual_total); the late
    penalty settled on the scores the row counts (tables.late_columns), kept in each record's facts."""
    row = score_row(student, graded_cells, lambda e: cell_value(e, stored.get(e.grade_id), per_nb.get(e.notebook, {})))
    del row["manual_total"]
    submitted = [nb for nb, r in per_nb.items() if r.get("status") not in ("missing", "invalid_student_id")]
    settled = late_columns(row, graded_cells, late, submitted, flagged)
    for notebook in submitted:
        per_nb[notebook]["late"] = settled.facts[notebook]
    row[EDITION_COLUMN] = "+".join(sorted({r["edition"] for r in per_nb.values() if r.get("edition")}))
    return row


def _problem(student: str, notebook: str, record: dict) -> dict:
    return {
        "student_id": student,
        "notebook": notebook,
        "status": record["status"],
        "what_happened": STATUS_TEXT[record["status"]],
        "detail": record.get("detail", ""),
    }


def _write_log(out: Path, records: list[dict]) -> None:
    with open(out / "log.jsonl.tmp", "w", encoding="utf-8") as handle:
        for r in sorted(records, key=lambda r: (r["student_id"], r["notebook"])):
            handle.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(out / "log.jsonl.tmp", out / "log.jsonl")


def _late_in_gradebook(db_url: str, assignment: str, by_student: dict[str, dict[str, dict]], late: LateSpec, book: dict | None) -> dict | None:
    """nbgrader's own late fields: each notebook's penalty (the one grades.csv took), the due date and the
    extensions (the ones the table used). A gradebook that cannot be written is noted in ``book``."""
    try:
        penalties = {s: {nb: r.get("late", {}).get("penalty", 0.0) for nb, r in per.items()} for s, per in by_student.items()}
        gradebook.record_penalties(db_url, assignment, penalties)
        gradebook.record_duedate(db_url, assignment, late.one_deadline(), late.extensions)
    except gradebook.GradebookError as exc:
        book = {**(book or {}), "error": str(exc)}
    return book


def write_results(
    course: Course,
    out: Path,
    graded_cells: list[Exercise],
    records: list[dict],
    notes: dict[str, list[str]],
    n_students: int,
    sandbox: dict,
    db_url: str | None = None,
    book: dict | None = None,
    late: LateSpec | None = None,
) -> dict:
    """grades.csv (one row per student: each cell's score, a reflection not yet graded by a
    person as ``pending``, a person's score on an answer changed since as ``review`` (not
    counted), ``auto_total``, ``total`` = every score so far, ``max_total``, how many answers
    are ``pending`` and how many ``needs_review``), log.jsonl, summary.json."""
    max_total = sum(e.points for e in graded_cells)
    auto_cells = [e for e in graded_cells if not e.manual]
    manual_cells = [e for e in graded_cells if e.manual]
    stored = {}
    if db_url and not (book or {}).get("error"):
        try:
            stored = gradebook.read_scores(db_url, course.assignment)
        except gradebook.GradebookError as exc:
            book = {**(book or {}), "error": str(exc)}
    by_student: dict[str, dict[str, dict]] = {}
    notes = {student: list(found) for student, found in notes.items()}
    for r in records:
        by_student.setdefault(r["student_id"], {})[r["notebook"]] = r
        notes.setdefault(r["student_id"], []).extend(f"{r['notebook']}.ipynb: {note}" for note in r.get("matching_notes", []))
    late = late or load_spec(out)
    flags = lms_flags(out)
    rows = [
        _student_row(student, per_nb, graded_cells, stored.get(student, {}), late, flags.get(student, ()))
        for student, per_nb in sorted(by_student.items())
    ]
    if db_url and not (book or {}).get("error") and late.active:
        book = _late_in_gradebook(db_url, course.assignment, by_student, late, book)
    problems = [
        _problem(student, nb, per_nb[nb])
        for student, per_nb in sorted(by_student.items())
        for nb in course.notebooks
        if nb in per_nb and per_nb[nb]["status"] != "graded"
    ]
    fields = ["student_id", *[e.grade_id for e in auto_cells], *[e.grade_id for e in manual_cells], *TOTAL_COLUMNS, EDITION_COLUMN]
    late_problems = [
        {"student_id": r["student_id"], "notebook": r["notebook"], "problem": r["late"]["problem"]} for r in records if "problem" in r.get("late", {})
    ]
    write_csv(out / "grades.csv", fields, rows)
    _write_log(out, records)
    summary = {
        "students": n_students,
        "notebooks_graded": sum(r["status"] == "graded" for r in records),
        "notebooks_reused": sum(bool(r.get("cached")) for r in records),
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
        "redactions": [
            {"student_id": r["student_id"], "notebook": r["notebook"], "lines": r["redacted_lines"]} for r in records if r.get("redacted_lines")
        ],
    }
    write_json_atomic(out / "summary.json", summary)
    return summary
