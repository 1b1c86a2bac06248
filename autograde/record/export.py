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

Canvas: its gradebook import (``gradebook_importer.rb``) matches a column ``Title (123)`` to the
assignment with id 123, else by title, else creates a new assignment; so the column needs the id.
Moodle: the gradebook's CSV import (``moodle_grades.csv``; it locks the grade against edits on the
assignment's page) and the assignment's offline grading worksheet (``moodle_worksheet.csv``), whose
import (``feedback/offline/importgradeslib.php``) reads ``Identifier`` ("Participant N"), ``Grade``
and ``Last modified (grade)``."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

from ..course import Course, UnusableInput, exercises
from ..model import REVIEW
from ..publish.editions import feedback_translations
from . import gradebook
from .late import UNKNOWN_CHOICES, LateSpec, Settled, late_text, lms_flags, load_spec, unsubmitted
from .tables import cell_value, final_header, late_columns, score_row, write_csv

FORMATS = ("csv", "canvas", "moodle")
# Canvas's gradebook import: the columns its own gradebook export starts with, then one per assignment,
# titled "<name> (<assignment id>)" (an id Canvas does not know makes a new assignment)
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_TITLE = re.compile(r"\A(.*)\s\((\d+)\)\Z")  # gradebook_importer.rb's own pattern for "Title (id)" (Ruby's \z)
NEW_ASSIGNMENT = "new"  # --assignment-id new: let Canvas create the assignment, knowingly
# Moodle's gradebook "Import grades from CSV": any header; the instructor maps an identifier column to a
# user field (ID number here) and the grade column to the grade item
MOODLE_COLUMNS = ("ID number", "Full name", "Email address")
# Moodle's assignment "offline grading worksheet" (assignfeedback_offline), as Moodle downloads it
WORKSHEET_COLUMNS = (
    "Identifier",
    "Full name",
    "Email address",
    "Status",
    "Grade",
    "Maximum Grade",
    "Grade can be changed",
    "Last modified (submission)",
    "Last modified (grade)",
    "Feedback comments",
)
PARTICIPANT = "Participant "  # Moodle's get_string('hiddenuser', 'assign'): the importer strips it, the rest is the id
WORKSHEET_FILE = "moodle_worksheet.csv"


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
    if format not in FORMATS:
        raise UnusableInput(f"--format {format}: use one of {', '.join(FORMATS)}")
    if late_unknown not in UNKNOWN_CHOICES:
        raise UnusableInput(f"--late-unknown {late_unknown}: use one of {', '.join(UNKNOWN_CHOICES)}")
    accept = late_unknown == "least-penalty"
    spec = load_spec(out) if out.is_dir() else LateSpec()
    rows, cells, url, settled, warnings = _rows(course, out, db_url, spec, accept)
    if format != "csv":
        _refuse_unknown_lateness(spec, settled, accept)
    target = target or out / ("final_grades.csv" if format == "csv" else f"{format}_grades.csv")
    info = {"students": len(rows), "pending": sum(r["pending"] for r in rows), "db_url": gradebook.mask_url(url), "omitted": [], "warnings": warnings}
    info["needs_review"] = [f"{r['student_id']}/{e.grade_id}" for r in rows for e in cells if r[e.grade_id] == REVIEW]
    info["least_penalty"] = sorted(s for s, found in settled.items() if found.unknown) if accept else []
    if format == "csv":
        write_csv(target, final_header(cells), rows)
        info["written"] = [target]
        return target, info
    people = _people(out, roster or {})
    if format == "canvas":
        header, table, info["omitted"] = _canvas_table(rows, people, _canvas_column(course, column, assignment_id), omit_unmatched)
        write_csv(target, header, table)
        info["written"] = [target]
        return target, info
    header, table = _moodle_table(rows, people, column or course.assignment)
    write_csv(target, header, table)
    worksheet = target.with_name(WORKSHEET_FILE)
    sheet, info["omitted"] = _worksheet(course, out, rows, people, spec, settled, omit_unmatched, now or dt.datetime.now(dt.UTC))
    write_csv(worksheet, list(WORKSHEET_COLUMNS), sheet)
    info["written"] = [target, worksheet]
    return target, info


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


def _canvas_column(course: Course, column: str | None, assignment_id: str | None) -> str:
    """``Title (id)``: from --column alone when it holds the id, else --column's title (default: the
    assignment's name) and --assignment-id. Without an id Canvas would make a new assignment: refused,
    unless --assignment-id new says so."""
    match = CANVAS_TITLE.match(column or "")
    title = (match[1] if match else column) or course.assignment
    if match and assignment_id not in (None, match[2]):
        raise UnusableInput(f"--column {column!r} names assignment {match[2]}, --assignment-id {assignment_id}: give one")
    found = match[2] if match else assignment_id
    if found == NEW_ASSIGNMENT:
        return title
    if not found or not found.isdigit():
        raise UnusableInput(
            f"Canvas needs the assignment's id in the grade column ({title!r} (ID)): without it, its gradebook import makes a "
            "NEW assignment. Give --assignment-id N (the number in the assignment's address, /assignments/N), "
            "or --column 'Title (N)'; --assignment-id new if a new assignment is what you want"
        )
    return f"{title} ({found})"


def _canvas_table(rows: list[dict], people: dict[str, dict], column: str, omit_unmatched: bool) -> tuple[list[str], list[dict], list[str]]:
    """(header, rows, students left out) of Canvas's gradebook import: the final total per student
    under their Canvas user id (the roster's lms_id, else the id the Canvas download named them by);
    a student without one is refused (or left out, with omit_unmatched). SIS User ID only from the
    roster's sis_user_id: never a Canvas id."""
    table, unmatched = [], []
    for row in rows:
        who = people.get(row["student_id"], {})
        canvas_id = who.get("roster_lms_id") or (who.get("lms_id", "") if who.get("layout") == "canvas" else "")
        if not canvas_id:
            unmatched.append(row["student_id"])
            continue
        table.append(
            {
                "Student": who.get("name", ""),
                "ID": canvas_id,
                "SIS User ID": who.get("sis_user_id", ""),
                "SIS Login ID": who.get("login", ""),
                "Section": who.get("section", ""),
                column: row["final_total"],
            }
        )
    _unmatched(unmatched, "Canvas user id", "the roster's lms_id (the ID column of Canvas's gradebook export)", omit_unmatched)
    return [*CANVAS_COLUMNS, column], table, unmatched


def _unmatched(students: list[str], what: str, where: str, omit: bool) -> None:
    if students and not omit:
        raise UnusableInput(
            f"{len(students)} student(s) have no {what}: {', '.join(students[:20])}{' ...' if len(students) > 20 else ''}. "
            f"Give it in {where}, or pass --omit-unmatched to leave them out of the file"
        )


def _moodle_table(rows: list[dict], people: dict[str, dict], column: str) -> tuple[list[str], list[dict]]:
    """(header, rows) of Moodle's gradebook CSV import: ID number (the roster's id_number, else the
    student id), name, email, and the final total."""
    table = []
    for row in rows:
        who = people.get(row["student_id"], {})
        table.append(
            {
                "ID number": who.get("id_number") or row["student_id"],
                "Full name": who.get("name", ""),
                "Email address": who.get("email", ""),
                column: row["final_total"],
            }
        )
    return [*MOODLE_COLUMNS, column], table


def moodle_time(when: dt.datetime) -> str:
    """A time as Moodle's worksheet writes it (userdate, strftimedatetime: 'Wednesday, 2 December 2026,
    4:30 PM'), in UTC and saying so: the importer reads it with PHP's strtotime."""
    when = when.astimezone(dt.UTC)
    return f"{when:%A}, {when.day} {when:%B %Y}, {when.hour % 12 or 12}:{when:%M} {'AM' if when.hour < 12 else 'PM'} UTC"


def _worksheet(
    course: Course, out: Path, rows: list[dict], people: dict, spec: LateSpec, settled: dict[str, Settled], omit: bool, now: dt.datetime
) -> tuple[list[dict], list[str]]:
    """The rows of Moodle's offline grading worksheet: each student as "Participant N" (the participant id
    of the Moodle download, else the roster's lms_id), the final total of the maximum, the time of this
    export as the grade's last change, and the feedback page's late lines as comments, in the student's
    edition."""
    words: dict[str, dict[str, str]] = {}
    editions = _editions(out)
    absent = unsubmitted(out)
    sheet, unmatched = [], []
    for row in rows:
        student = row["student_id"]
        who = people.get(student, {})
        participant = (who.get("lms_id") if who.get("layout") == "moodle" else "") or who.get("roster_lms_id", "")
        if not participant.isdigit():
            unmatched.append(student)
            continue
        times = list(spec.times.get(student, {}).values())
        edition = editions.get(student, "en")
        if edition != "en" and not words and any(f.get("late_seconds") for f in settled[student].facts.values()):
            words = feedback_translations(course)  # read once, and only when a translated line is needed
        page_words = words.get(edition, {})
        comments = [f"{nb}: {line}" for nb, facts in sorted(settled[student].facts.items()) if (line := late_text(facts, spec.policy, page_words))]
        sent = any((student, nb) not in absent for nb in course.notebooks)
        sheet.append(
            {
                "Identifier": f"{PARTICIPANT}{participant}",
                "Full name": who.get("name", ""),
                "Email address": who.get("email", ""),
                "Status": "Submitted for grading" if sent else "No submission",
                "Grade": row["final_total"],
                "Maximum Grade": row["max_total"],
                "Grade can be changed": "Yes",
                "Last modified (submission)": moodle_time(max(times)) if times else "",
                "Last modified (grade)": moodle_time(now),
                "Feedback comments": " ".join(comments),
            }
        )
    _unmatched(unmatched, "Moodle participant id", "the roster's lms_id (the N of 'Participant N'; the Moodle download names each by it)", omit)
    return sheet, unmatched


def _editions(out: Path) -> dict[str, str]:
    """{student: the edition their notebooks were written in} from OUT/log.jsonl (English when mixed or unknown)."""
    found: dict[str, set] = {}
    try:
        with open(out / "log.jsonl", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                if record.get("edition"):
                    found.setdefault(record["student_id"], set()).add(record["edition"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {s: next(iter(e)) for s, e in found.items() if len(e) == 1}
