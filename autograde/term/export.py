"""``python -m autograde export OUT``: the final table, automatic and manual scores together,
read from the course gradebook (after graders scored the reflections in formgrader). A score
a person gave to an answer that changed since is shown as ``review`` and not counted until
they look at it again in formgrader.

The late penalty is settled here, once, on today's scores (``tables.settle_rows``: the same rule as
grades.csv), and written back to nbgrader's gradebook. An LMS file (``--format canvas|moodle``)
never carries a final score whose lateness is unknown under an active late policy: the export stops
and names the students, unless the instructor accepts the least penalty (``late_unknown``). Nor
does it carry a student the LMS cannot be told apart: one without the LMS's id stops it too, unless
they are left out on purpose (``omit_unmatched``).

Each LMS file is its adapter's (``registry.export_formats``): ``canvas.py`` (the gradebook import's
CSV, the column ``Title (id)``) and ``moodle.py`` (the gradebook's CSV import and the assignment's
offline grading worksheet); ``csv``, the final table itself, is this module's. What the last grading
left (the late spec, the intake's names, the records) comes from the ledger, each read once."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from ..course import Course, UnusableInput, exercises
from ..ledger import gradebook
from ..ledger.folder import Ledger
from ..ledger.late import UNKNOWN_CHOICES, LateSpec
from ..ledger.tables import ScoreTable, cell_value, final_header, score_row, settle_rows
from ..model import REVIEW
from .adapter import ExportJob, Person, RosterRow
from .registry import PLAIN_EXPORT, export_formats


@dataclass
class ExportInfo:
    """What an export wrote: every file, how many students and answers still pending, the gradebook
    read (its URL masked), the students left out of an LMS file, the scores marked ``review``, the
    students given the least penalty, and what could not be written back to the gradebook."""

    written: list[Path] = field(default_factory=list)
    students: int = 0
    pending: int = 0
    db_url: str = ""
    omitted: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    needs_review: list[str] = field(default_factory=list)
    least_penalty: list[str] = field(default_factory=list)


def export(
    course: Course,
    out: Path,
    db_url: str | None = None,
    target: Path | None = None,
    format: str = "csv",
    roster: dict[str, RosterRow] | None = None,
    column: str | None = None,
    *,
    assignment_id: str | None = None,
    late_unknown: str = "refuse",
    omit_unmatched: bool = False,
    now: dt.datetime | None = None,
) -> tuple[Path, ExportInfo]:
    """Write the table (default ``OUT/final_grades.csv``, or the LMS's files in OUT: Canvas's
    import, or Moodle's and its worksheet beside it). Returns (its path, what was written and who
    left out)."""
    formats = export_formats()
    if format != PLAIN_EXPORT and format not in formats:
        raise UnusableInput(f"--format {format}: use one of {', '.join([PLAIN_EXPORT, *formats])}")
    if late_unknown not in UNKNOWN_CHOICES:
        raise UnusableInput(
            f"--late-unknown {late_unknown}: use one of {', '.join(UNKNOWN_CHOICES)}"
        )
    accept = late_unknown == "least-penalty"
    ledger = Ledger(out, course)
    spec = ledger.late_spec if out.is_dir() else LateSpec()
    url = ledger.gradebook_url(db_url)
    table, warnings = _table(course, ledger, url, spec, accept)
    if format != PLAIN_EXPORT:
        _refuse_unknown_lateness(spec, table, accept)
    rows = table.rows
    info = ExportInfo(
        students=len(rows),
        pending=sum(r.pending for r in rows),
        db_url=gradebook.mask_url(url),
        warnings=warnings,
    )
    info.needs_review = [
        f"{r.student_id}/{e.grade_id}"
        for r in rows
        for e in table.cells
        if r.cells[e.grade_id] == REVIEW
    ]
    info.least_penalty = (
        sorted(s for s, found in table.settled.items() if found.unknown) if accept else []
    )
    if format == PLAIN_EXPORT:
        target = target or ledger.out.final
        table.write(target, final_header(table.cells))
        info.written = [target]
        return target, info
    absent = ledger.unsubmitted()
    sent = {
        r.student_id
        for r in rows
        if any((r.student_id, nb) not in absent for nb in course.notebooks)
    }
    job = ExportJob(
        course,
        ledger.out,
        table,
        _people(ledger, roster or {}),
        spec,
        sent,
        ledger.editions(),
        target,
        column,
        assignment_id,
        omit_unmatched,
    )
    job.now = now or dt.datetime.now(dt.UTC)
    info.written, info.omitted = formats[format].export(job)
    return info.written[0], info


def _table(
    course: Course, ledger: Ledger, url: str, spec: LateSpec, accept: bool
) -> tuple[ScoreTable, list[str]]:
    """Each student's row from the gradebook (read once), the late penalty settled once on today's
    scores (a person's score included) from the deadlines the last grading used; nbgrader's
    gradebook is given the same penalties (a gradebook that cannot take them is a warning: the
    tables are right without it)."""
    try:
        book = gradebook.read_book(url, course.assignment)
    except gradebook.GradebookError as exc:
        raise UnusableInput(str(exc)) from None
    cells = exercises(course)
    absent = ledger.unsubmitted()
    rows = [
        score_row(student, cells, _cell_of(book.of(student))) for student in sorted(book.grades)
    ]
    submitted = {
        row.student_id: [nb for nb in course.notebooks if (row.student_id, nb) not in absent]
        for row in rows
    }
    table = settle_rows(cells, rows, spec, submitted.get, ledger.intake.late_in_lms, accept)
    for row in rows:
        row.late_basis = table.settled[row.student_id].basis(accept)
    warnings = []
    if spec.active:
        try:
            gradebook.record_penalties(url, course.assignment, table.settled)
        except gradebook.GradebookError as exc:
            warnings.append(
                f"{exc}: nbgrader's own late_submission_penalty may differ from this table's"
            )
        try:
            gradebook.record_duedate(url, course.assignment, spec.one_deadline(), spec.extensions)
        except gradebook.GradebookError as exc:
            warnings.append(f"{exc}: nbgrader's own due date may differ from this table's deadline")
    return table, warnings


def _cell_of(grades: dict[str, gradebook.Grade]):
    """A cell's value from the gradebook alone (no grading record: a missing automatic score is
    0)."""
    return lambda e: cell_value(e, grades.get(e.grade_id))


def _refuse_unknown_lateness(spec: LateSpec, table: ScoreTable, accept: bool) -> None:
    """An LMS file under an active late policy takes no final score whose lateness nobody knows,
    unless the instructor accepted the least penalty."""
    if accept or spec.policy.kind == "none":
        return
    unknown = {s: found for s, found in table.settled.items() if found.unknown}
    if not unknown:
        return
    why = {
        s: ", ".join(f"{nb}: {found.facts[nb].problem}" for nb in found.unknown)
        for s, found in unknown.items()
    }
    named = "; ".join(f"{s} ({why[s]})" for s in sorted(why)[:10])
    more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
    raise UnusableInput(
        f"the late policy ({spec.policy.describe()}) cannot be applied to {len(unknown)} "
        f"student(s) whose lateness is unknown: {named}{more}. "
        "Grade again with their times (`grade ... --timestamps CSV`: a rerun reuses every "
        "result), or pass "
        "--late-unknown least-penalty to take the least penalty their facts allow (none "
        "without a time; "
        "one started day or hour when the LMS marked them late), as final_grades.csv's "
        "late_basis then says"
    )


def _people(ledger: Ledger, roster: dict[str, RosterRow]) -> dict[str, Person]:
    """{student: what the LMS and the roster say of them}: the download's ids and names (the
    intake's ``students``, with their ``layout``), the roster's columns over them (``lms_id``,
    ``name``, ``email``, ``section``, ``login``, ``sis_user_id``, ``id_number``)."""
    people = {student: Person.seen(who) for student, who in ledger.intake.students.items()}
    for student, row in roster.items():
        people[student] = people.get(student, Person()).with_roster(row)
    return people
