"""``python -m autograde export OUT``: the final table, automatic and manual scores together,
read from the course gradebook (after graders scored the reflections in formgrader). A score
a person gave to an answer that changed since is shown as ``review`` and not counted until
they look at it again in formgrader."""

from __future__ import annotations

from pathlib import Path

from ..course import Course, UnusableInput, exercises
from ..model import REVIEW
from . import gradebook
from .tables import cell_value, score_row, write_csv


def export(course: Course, out: Path, db_url: str | None = None, target: Path | None = None) -> tuple[Path, dict]:
    """Write the table (default ``OUT/final_grades.csv``). Returns (its path, a summary)."""
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
    auto = [e for e in cells if not e.manual]
    manual = [e for e in cells if e.manual]
    fields = [
        "student_id",
        *[e.grade_id for e in auto],
        *[e.grade_id for e in manual],
        "auto_total",
        "manual_total",
        "total",
        "max_total",
        "pending",
        "needs_review",
    ]
    target = target or out / "final_grades.csv"
    rows = [score_row(student, cells, lambda e, per=stored[student]: cell_value(e, per.get(e.grade_id))) for student in sorted(stored)]
    write_csv(target, fields, rows)
    review = [f"{r['student_id']}/{e.grade_id}" for r in rows for e in cells if r[e.grade_id] == REVIEW]
    return target, {"students": len(rows), "pending": sum(r["pending"] for r in rows), "needs_review": review, "db_url": gradebook.mask_url(url)}
