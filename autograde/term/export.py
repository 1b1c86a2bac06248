"""``python -m autograde export OUT``: the final table, automatic and manual scores together,
read from the course gradebook (after graders scored the reflections in formgrader). A score
a person gave to an answer that changed since is shown as ``review`` and not counted until
they look at it again in formgrader.

The late penalty is settled again here on today's scores (tables.late_columns: the same rule as
grades.csv), and written back to nbgrader's gradebook. An LMS file (``--format canvas|moodle``)
never carries a final score whose lateness is unknown under an active late policy: the export stops
and names the students, unless the instructor accepts the least penalty (``late_unknown``). Nor
does it carry a student the LMS cannot be told apart: one without the LMS's id stops it too, unless
they are left out on purpose (``omit_unmatched``).

Each LMS file is its adapter's (``registry.export_formats``): ``canvas.py`` (the gradebook import's CSV,
the column ``Title (id)``) and ``moodle.py`` (the gradebook's CSV import and the assignment's offline
grading worksheet); ``csv``, the final table itself, is this module's."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from ..course import Course, UnusableInput, exercises
from ..ledger import gradebook
from ..ledger.late import UNKNOWN_CHOICES, LateSpec, Settled, lms_flags, load_spec, unsubmitted
from ..ledger.tables import cell_value, final_header, late_columns, score_row, write_csv
from ..model import REVIEW
from .adapter import ExportJob
from .registry import PLAIN_EXPORT, export_formats


def export(
    course: Course,
    out: Path,
    db_url: str | None = None,
    target: Path | None = None,
    format: str = "csv",
    roster: dict[str, dict] | None = None,
    column: str | None = None,
    *,
    assignment_id: str | None = None,
    late_unknown: str = "refuse",
    omit_unmatched: bool = False,
    now: dt.datetime | None = None,
) -> tuple[Path, dict]:
    """Write the table (default ``OUT/final_grades.csv``, or ``OUT/canvas_grades.csv``, or
    ``OUT/moodle_grades.csv`` and ``OUT/moodle_worksheet.csv`` beside it). Returns (its path, a
    summary: ``written`` lists every file, ``omitted`` the students left out of an LMS file)."""
    formats = export_formats()
    if format != PLAIN_EXPORT and format not in formats:
        raise UnusableInput(f"--format {format}: use one of {', '.join([PLAIN_EXPORT, *formats])}")
    if late_unknown not in UNKNOWN_CHOICES:
        raise UnusableInput(f"--late-unknown {late_unknown}: use one of {', '.join(UNKNOWN_CHOICES)}")
    accept = late_unknown == "least-penalty"
    spec = load_spec(out) if out.is_dir() else LateSpec()
    rows, cells, url, settled, warnings = _rows(course, out, db_url, spec, accept)
    if format != PLAIN_EXPORT:
        _refuse_unknown_lateness(spec, settled, accept)
    info = {"students": len(rows), "pending": sum(r["pending"] for r in rows), "db_url": gradebook.mask_url(url), "omitted": [], "warnings": warnings}
    info["needs_review"] = [f"{r['student_id']}/{e.grade_id}" for r in rows for e in cells if r[e.grade_id] == REVIEW]
    info["least_penalty"] = sorted(s for s, found in settled.items() if found.unknown) if accept else []
    if format == PLAIN_EXPORT:
        target = target or out / "final_grades.csv"
        write_csv(target, final_header(cells), rows)
        info["written"] = [target]
        return target, info
    people = _people(out, roster or {})
    job = ExportJob(course, out, rows, people, spec, settled, target, column, assignment_id, omit_unmatched, now or dt.datetime.now(dt.UTC))
    info["written"], info["omitted"] = formats[format].export(job)
    return info["written"][0], info


def _rows(course: Course, out: Path, db_url: str | None, spec: LateSpec, accept: bool) -> tuple[list[dict], list, str, dict[str, Settled], list[str]]:
    """Each student's row from the gradebook, with the late penalty settled again on today's
    scores (a person's score included) from the deadlines the last grading used; nbgrader's
    gradebook is given the same penalties (a gradebook that cannot take them is a warning: the
    tables are right without it)."""
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
    absent, flags = unsubmitted(out), lms_flags(out)
    rows, settled = [], {}
    for student in sorted(stored):
        row = score_row(student, cells, lambda e, per=stored[student]: cell_value(e, per.get(e.grade_id)))
        submitted = [nb for nb in course.notebooks if (student, nb) not in absent]
        settled[student] = late_columns(row, cells, spec, submitted, flags.get(student, ()), accept)
        row["late_basis"] = settled[student].basis(accept)
        rows.append(row)
    warnings = []
    if spec.active:
        try:
            gradebook.record_penalties(
                url, course.assignment, {s: {nb: f["penalty"] for nb, f in found.facts.items()} for s, found in settled.items()}
            )
        except gradebook.GradebookError as exc:
            warnings.append(f"{exc}: nbgrader's own late_submission_penalty may differ from this table's")
        try:
            gradebook.record_duedate(url, course.assignment, spec.one_deadline(), spec.extensions)
        except gradebook.GradebookError as exc:
            warnings.append(f"{exc}: nbgrader's own due date may differ from this table's deadline")
    return rows, cells, url, settled, warnings


def _refuse_unknown_lateness(spec: LateSpec, settled: dict[str, Settled], accept: bool) -> None:
    """An LMS file under an active late policy takes no final score whose lateness nobody knows,
    unless the instructor accepted the least penalty."""
    if accept or spec.policy.kind == "none":
        return
    unknown = {s: found for s, found in settled.items() if found.unknown}
    if not unknown:
        return
    why = {s: ", ".join(f"{nb}: {found.facts[nb]['problem']}" for nb in found.unknown) for s, found in unknown.items()}
    named = "; ".join(f"{s} ({why[s]})" for s in sorted(why)[:10])
    more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
    raise UnusableInput(
        f"the late policy ({spec.policy.describe()}) cannot be applied to {len(unknown)} student(s) whose lateness is unknown: {named}{more}. "
        "Grade again with their times (`grade ... --timestamps CSV`: a rerun reuses every result), or pass "
        "--late-unknown least-penalty to take the least penalty their facts allow (none without a time; "
        "one started day or hour when the LMS marked them late), as final_grades.csv's late_basis then says"
    )


def _people(out: Path, roster: dict[str, dict]) -> dict[str, dict]:
    """{student: what the LMS and the roster say of them}: the download's ids and names (OUT/intake.json
    ``students``, with their ``layout``), the roster's columns over them (``lms_id``, ``name``,
    ``email``, ``section``, ``login``, ``sis_user_id``, ``id_number``)."""
    try:
        seen = json.loads((out / "intake.json").read_text(encoding="utf-8")).get("students") or {}
    except (OSError, ValueError, AttributeError):
        seen = {}
    people: dict[str, dict] = {}
    for student, found in (seen if isinstance(seen, dict) else {}).items():
        if isinstance(found, dict):
            people[str(student)] = {k: str(v) for k, v in found.items() if v is not None}
    for student, row in roster.items():
        mine = people.setdefault(student, {})
        mine.update({k: v for k, v in row.items() if v})
        if row.get("lms_id"):
            mine["roster_lms_id"] = row["lms_id"]
    return people
