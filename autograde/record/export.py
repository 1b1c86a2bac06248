"""``python -m autograde export OUT``: the final table, automatic and manual scores together,
read from the course gradebook (after graders scored the reflections in formgrader). A score
a person gave to an answer that changed since is shown as ``review`` and not counted until
they look at it again in formgrader."""

from __future__ import annotations

from pathlib import Path

from ..course import Course, UnusableInput, exercises
from ..model import REVIEW
from . import gradebook
from .late import load_spec, notebook_late, unsubmitted
from .tables import cell_value, score_row, write_csv

FORMATS = ("csv", "canvas", "moodle")
# Canvas's gradebook import: the columns its own gradebook export starts with, then one per assignment,
# titled "<name> (<assignment id>)" (an id Canvas does not know makes a new assignment)
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
# Moodle's "Import grades from CSV": any header; the instructor maps an identifier column to a user
# field (ID number here) and the grade column to the grade item
MOODLE_COLUMNS = ("ID number", "Full name", "Email address")


def export(
    course: Course,
    out: Path,
    db_url: str | None = None,
    target: Path | None = None,
    format: str = "csv",
    roster: dict[str, dict] | None = None,
    column: str | None = None,
) -> tuple[Path, dict]:
    """Write the table (default ``OUT/final_grades.csv``, or ``OUT/canvas_grades.csv`` /
    ``OUT/moodle_grades.csv`` in the LMS's import layout). Returns (its path, a summary)."""
    if format not in FORMATS:
        raise UnusableInput(f"--format {format}: use one of {', '.join(FORMATS)}")
    rows, cells, url = _rows(course, out, db_url)
    target = target or out / ("final_grades.csv" if format == "csv" else f"{format}_grades.csv")
    if format == "csv":
        fields = ["student_id", *[e.grade_id for e in cells if not e.manual], *[e.grade_id for e in cells if e.manual], *COLUMNS]
        write_csv(target, fields, rows)
    else:
        write_csv(target, *_lms_table(format, rows, roster or {}, column or f"{course.assignment} ({course.assignment})"))
    review = [f"{r['student_id']}/{e.grade_id}" for r in rows for e in cells if r[e.grade_id] == REVIEW]
    return target, {"students": len(rows), "pending": sum(r["pending"] for r in rows), "needs_review": review, "db_url": gradebook.mask_url(url)}


COLUMNS = ("auto_total", "manual_total", "total", "max_total", "pending", "needs_review", "late_penalty", "final_total")


def _rows(course: Course, out: Path, db_url: str | None) -> tuple[list[dict], list, str]:
    """Each student's row from the gradebook, with the late penalty worked out again on today's
    scores (a person's score included) from the deadlines the last grading used."""
    if not out.is_dir():
        raise UnusableInput(f"{out} is not a graded course folder (run `python -m autograde grade ... --out {out}` first)")
    url = gradebook.resolve_url(out, db_url)
    if not db_url and not (out / gradebook.URL_FILE).is_file() and not (out / "gradebook.db").is_file():
        raise UnusableInput(f"{out} holds no gradebook: grade into it first, or pass --db-url")
    try:
        stored = gradebook.read_scores(url, course.assignment)
    except gradebook.GradebookError as exc:
        raise UnusableInput(str(exc)) from None
    cells = exercises(course)
    spec, absent = load_spec(out), unsubmitted(out)
    rows = []
    for student in sorted(stored):
        row = score_row(student, cells, lambda e, per=stored[student]: cell_value(e, per.get(e.grade_id)))
        facts = []
        for notebook in (nb for nb in course.notebooks if (student, nb) not in absent):
            mine = [e for e in cells if e.notebook == notebook]
            score = sum(row[e.grade_id] for e in mine if not isinstance(row[e.grade_id], str))
            facts.append(notebook_late(spec, student, notebook, score, sum(e.points for e in mine)))
        penalty = round(sum(f["penalty"] for f in facts), 6)
        row["late_penalty"] = "unknown" if any("problem" in f for f in facts) else penalty
        row["final_total"] = round(row["total"] - penalty, 6)
        rows.append(row)
    return rows, cells, url


def _lms_table(format: str, rows: list[dict], roster: dict[str, dict], column: str) -> tuple[list[str], list[dict]]:
    """(header, rows) of the LMS's grade import: the final total (after any late penalty) per student,
    with the LMS's ids from the roster (a student it lacks keeps the course's student id)."""
    table = []
    for row in rows:
        who = roster.get(row["student_id"], {})
        if format == "canvas":
            line = {
                "Student": who.get("name", ""),
                "ID": who.get("lms_id", ""),
                "SIS User ID": row["student_id"],
                "SIS Login ID": who.get("login", ""),
                "Section": who.get("section", ""),
            }
        else:
            line = {"ID number": row["student_id"], "Full name": who.get("name", ""), "Email address": who.get("email", "")}
        line[column] = row["final_total"]
        table.append(line)
    header = [*(CANVAS_COLUMNS if format == "canvas" else MOODLE_COLUMNS), column]
    return header, table
