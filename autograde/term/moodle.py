"""Moodle: its "Download all submissions" zip read (a folder per participant named ``<Full Name>_<participant
id>_assignsubmission_file[_]``, or flat files ``<Full Name>_<participant id>_assignsubmission_file_<file
name>``; the id is the second ``_`` field), the pages handed back for "Upload multiple feedback files in a
zip" (one ``OUT/handback/moodle_feedback.zip``, a folder per participant named as the download names it),
and the grades as two files: the gradebook's CSV import (``moodle_grades.csv``; it locks the grade against
edits on the assignment's page) and the assignment's offline grading worksheet (``moodle_worksheet.csv``),
whose import (``feedback/offline/importgradeslib.php``) reads ``Identifier`` ("Participant N"), ``Grade``
and ``Last modified (grade)``. The download holds no submission times.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

from ..course import Course
from ..ledger.late import LateSpec, Settled, late_text, unsubmitted
from ..ledger.tables import write_csv
from ..publish.editions import feedback_translations
from .adapter import Adapter, ExportJob, lms_zip, refuse_unmatched, safe
from .candidates import Candidate, why_not
from .source import Entry, Source, problem, shown

# Moodle (mod/assign/classes/downloader.php): clean_filename(full name with "_" made " ", "_", participant
# id), then "_assignsubmission_file" and "/" and the file's path (a "_" before the "/" up to Moodle 4.0),
# or, with "download submissions in folders" off, "_" and the file name. The name holds no "_", so the
# id is the second "_" field, as Moodle's own feedback importer reads it.
MOODLE_FOLDER = re.compile(r"(?P<name>[^_]*)_(?P<user>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?")
MOODLE_FLAT = re.compile(r"(?P<name>[^_]*)_(?P<user>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<file>.+)")
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
ID_KIND = (
    "Moodle's download names each participant by the assignment's participant id (the N of 'Participant N' "
    "in the offline grading worksheet), not the user id"
)


def claims(name: str, folder: bool, assignment: str) -> bool:
    """A participant's folder or file of Moodle's download, by its name."""
    return bool((MOODLE_FOLDER if folder else MOODLE_FLAT).fullmatch(name))


def read_moodle(files: Source, entries: list[Entry], context: dict) -> list[Candidate]:
    found = []
    for entry in entries:
        top = entry.parts[0]
        match = MOODLE_FOLDER.fullmatch(top) if len(entry.parts) > 1 else MOODLE_FLAT.fullmatch(top)
        if match is None:
            why = "not named like Moodle's download (Full Name_participant id_assignsubmission_file; a team without a group has no id): not used"
            files.problems.append(problem(shown(entry.name), None, why))
            continue
        filename = entry.parts[-1] if len(entry.parts) > 1 else match["file"]
        why = why_not(entry, context["limits"], filename)
        if match["plugin"] != "file" and not why:
            why = f"from Moodle's {match['plugin']} submission, not a file submission: not used"
        if why:
            files.problems.append(problem(shown(entry.name), match["user"], why))
            continue
        lms = {"layout": "moodle", "lms_id": match["user"], "name": match["name"], "folder": top if len(entry.parts) > 1 else ""}
        found.append(Candidate(match["user"], entry, filename, order=entry.date, basis="file date in the zip", lms=lms))
    return found


# -- handing back --------------------------------------------------------------------------------------------------------


def page_name(lms: dict, page: Path) -> str:
    """A page's name as Moodle's feedback zip import reads it (a folder per participant, as its download names it)."""
    # Moodle's importer (feedback/file/importziplib.php) splits a path's first part on "_" and needs the
    # participant id second: the name may hold spaces, never "_" (nor a path), as Moodle's own download writes it
    name = re.sub(r"[\x00-\x1f\x7f_/\\:*?\"<>|]+", " ", str(lms["name"])).strip(" .") or "Participant"
    return f"{name}_{safe(lms['lms_id'])}_assignsubmission_file/{page.name}"


def hand_back(course: Course, out: Path, pages: dict[str, list[Path]], target: Path, names: dict[str, dict]):
    return lms_zip("moodle", page_name, out, pages, target, names)


# -- grades --------------------------------------------------------------------------------------------------------------


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
    """A time as Moodle's own worksheet writes it, in UTC and saying so: 'Wednesday, 2 December 2026, 4:30 PM UTC'.

    Moodle's writer is mod/assign/gradingtable.php (``col_timemarked`` and ``col_timesubmitted``: for a
    download, ``userdate($row->timemarked)``), and lib/moodlelib.php's ``userdate`` with no format takes
    lang/en/langconfig.php's ``strftimedaydatetime``, '%A, %d %B %Y, %I:%M %p', dropping the leading zero
    of the day and of the hour, in the downloading user's time zone, with no zone written. The importer,
    mod/assign/feedback/offline/importgradeslib.php, reads ``Last modified (grade)`` with PHP's
    ``strtotime``, and locallib.php's ``process_import_grades`` skips a row whose grade changed in Moodle
    more than 60 s after that time. Without a zone strtotime reads the time in the server's zone (4:30 PM
    read in Shanghai is 08:30 UTC); with the trailing "UTC" it reads the same instant on any server
    (tests/grader/test_export_lms.py runs PHP's own strtotime on it)."""
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
    refuse_unmatched(unmatched, "Moodle participant id", "the roster's lms_id (the N of 'Participant N'; the Moodle download names each by it)", omit)
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


def export(job: ExportJob) -> tuple[list[Path], list[str]]:
    """``OUT/moodle_grades.csv`` (or ``job.target``) and ``moodle_worksheet.csv`` beside it."""
    target = job.target or job.out / "moodle_grades.csv"
    header, table = _moodle_table(job.rows, job.people, job.column or job.course.assignment)
    write_csv(target, header, table)
    worksheet = target.with_name(WORKSHEET_FILE)
    sheet, omitted = _worksheet(job.course, job.out, job.rows, job.people, job.spec, job.settled, job.omit_unmatched, job.now)
    write_csv(worksheet, list(WORKSHEET_COLUMNS), sheet)
    return [target, worksheet], omitted


ADAPTER = Adapter(
    "moodle",
    read_moodle,
    claims=claims,
    id_kind=ID_KIND,
    handback_format="moodle",
    handback=hand_back,
    page_name=page_name,
    export_format="moodle",
    export=export,
)
