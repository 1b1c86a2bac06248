"""Moodle: its "Download all submissions" zip read (a folder per participant named ``<Full
Name>_<participant id>_assignsubmission_file[_]``, or flat files ``<Full Name>_<participant
id>_assignsubmission_file_<file name>``; the id is the second ``_`` field), the pages handed back
for "Upload multiple feedback files in a zip" (one ``OUT/handback/moodle_feedback.zip``, a folder
per participant named as the download names it), and the grades as two files: the gradebook's CSV
import (``moodle_grades.csv``; it locks the grade against edits on the assignment's page) and the
assignment's offline grading worksheet (``moodle_worksheet.csv``), whose import
(``feedback/offline/importgradeslib.php``) reads ``Identifier`` ("Participant N"), ``Grade`` and
``Last modified (grade)``. The download holds no submission times."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from ..ledger.facts import LmsStudent
from ..ledger.folder import Page
from ..ledger.late import late_text
from ..ledger.layout import Out
from ..ledger.tables import ScoreRow, write_csv
from ..publish.editions import FeedbackWords, feedback_translations
from .adapter import (
    Adapter,
    ExportJob,
    HandBack,
    HandBackJob,
    Person,
    lms_zip,
    refuse_unmatched,
    safe,
)
from .candidates import Candidate, why_not
from .source import Entry, Source, problem, shown

# Moodle (mod/assign/classes/downloader.php): clean_filename(full name with "_" made " ", "_",
# participant id), then "_assignsubmission_file" and "/" and the file's path (a "_" before the "/"
# up to Moodle 4.0), or, with "download submissions in folders" off, "_" and the file name. The name
# holds no "_", so the id is the second "_" field, as Moodle's own feedback importer reads it.
MOODLE_FOLDER = re.compile(r"(?P<name>[^_]*)_(?P<user>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?")
MOODLE_FLAT = re.compile(
    r"(?P<name>[^_]*)_(?P<user>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<file>.+)"
)
# Moodle's gradebook "Import grades from CSV": any header; the instructor maps an identifier column
# to a user field (ID number here) and the grade column to the grade item
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
# Moodle's get_string('hiddenuser', 'assign'): the importer strips it, the rest is the id
PARTICIPANT = "Participant "
ID_KIND = (
    "Moodle's download names each participant by the assignment's participant id (the N "
    "of 'Participant N' "
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
            why = (
                "not named like Moodle's download (Full Name_participant "
                "id_assignsubmission_file; a team without a group has no id): not used"
            )
            files.problems.append(problem(shown(entry.name), None, why))
            continue
        filename = entry.parts[-1] if len(entry.parts) > 1 else match["file"]
        why = why_not(entry, context["limits"], filename)
        if match["plugin"] != "file" and not why:
            why = f"from Moodle's {match['plugin']} submission, not a file submission: not used"
        if why:
            files.problems.append(problem(shown(entry.name), match["user"], why))
            continue
        lms = {
            "layout": "moodle",
            "lms_id": match["user"],
            "name": match["name"],
            "folder": top if len(entry.parts) > 1 else "",
        }
        found.append(
            Candidate(
                match["user"],
                entry,
                filename,
                order=entry.date,
                basis="file date in the zip",
                lms=lms,
            )
        )
    return found


# -- handing back
# --------------------------------------------------------------------------------------------------


def page_name(lms: LmsStudent, page: Page) -> str:
    """A page's name as Moodle's feedback zip import reads it (a folder per participant, as its
    download names it)."""
    # Moodle's importer (feedback/file/importziplib.php) splits a path's first part on "_" and needs
    # the participant id second: the name may hold spaces, never "_" (nor a path), as Moodle's own
    # download writes it
    name = re.sub(r"[\x00-\x1f\x7f_/\\:*?\"<>|]+", " ", str(lms.name)).strip(" .") or "Participant"
    return f"{name}_{safe(lms.lms_id)}_assignsubmission_file/{page.name}"


def hand_back(job: HandBackJob) -> HandBack:
    return lms_zip("moodle", page_name, job)


# -- grades
# --------------------------------------------------------------------------------------------------


def _moodle_table(rows: list[ScoreRow], people: dict[str, Person]) -> list[list]:
    """The rows of Moodle's gradebook CSV import (``MOODLE_COLUMNS``, then the grade): ID number
    (the roster's id_number, else the student id), name, email, and the final total."""
    table = []
    for row in rows:
        who = people.get(row.student_id, Person())
        table.append([who.id_number or row.student_id, who.name, who.email, row.final_total])
    return table


def moodle_time(when: dt.datetime) -> str:
    """A time as Moodle's own worksheet writes it, in UTC and saying so: 'Wednesday, 2 December
    2026, 4:30 PM UTC'.

    Moodle's writer is mod/assign/gradingtable.php (``col_timemarked`` and ``col_timesubmitted``:
    for a download, ``userdate($row->timemarked)``), and lib/moodlelib.php's ``userdate`` with no
    format takes lang/en/langconfig.php's ``strftimedaydatetime``, '%A, %d %B %Y, %I:%M %p',
    dropping the leading zero of the day and of the hour, in the downloading user's time zone, with
    no zone written. The importer, mod/assign/feedback/offline/importgradeslib.php, reads ``Last
    modified (grade)`` with PHP's ``strtotime``, and locallib.php's ``process_import_grades`` skips
    a row whose grade changed in Moodle more than 60 s after that time. Without a zone strtotime
    reads the time in the server's zone (4:30 PM read in Shanghai is 08:30 UTC); with the trailing
    "UTC" it reads the same instant on any server (tests/grader/term/test_export_lms.py runs PHP's
    own strtotime on it)."""
    when = when.astimezone(dt.UTC)
    return (
        f"{when:%A}, {when.day} {when:%B %Y}, {when.hour % 12 or 12}:{when:%M} "
        f"{'AM' if when.hour < 12 else 'PM'} UTC"
    )


def _worksheet(job: ExportJob) -> tuple[list[list], list[str]]:
    """The rows of Moodle's offline grading worksheet (``WORKSHEET_COLUMNS``): each student as
    "Participant N" (the participant id of the Moodle download, else the roster's lms_id), the final
    total of the maximum, the time of this export as the grade's last change, and the feedback
    page's late lines as comments, in the student's edition (English when mixed or unknown)."""
    words: FeedbackWords | None = None
    spec = job.spec
    sheet, unmatched = [], []
    for row in job.table.rows:
        student = row.student_id
        who = job.people.get(student, Person())
        participant = (who.lms_id if who.layout == "moodle" else "") or who.roster_lms_id
        if not participant.isdigit():
            unmatched.append(student)
            continue
        times = list(spec.times.get(student, {}).values())
        edition = job.editions.get(student, "en")
        facts = job.table.settled[student].facts
        if edition != "en" and words is None and any(f.late_seconds for f in facts.values()):
            # read once, and only when a translated line is needed
            words = feedback_translations(job.course)
        page_words = words.of(edition) if words is not None else {}
        comments = [
            f"{nb}: {line}"
            for nb, found in sorted(facts.items())
            if (line := late_text(found, spec.policy, page_words))
        ]
        sheet.append(
            [
                f"{PARTICIPANT}{participant}",
                who.name,
                who.email,
                "Submitted for grading" if student in job.sent else "No submission",
                row.final_total,
                row.max_total,
                "Yes",
                moodle_time(max(times)) if times else "",
                moodle_time(job.now),
                " ".join(comments),
            ]
        )
    why = "the roster's lms_id (the N of 'Participant N'; the Moodle download names each by it)"
    refuse_unmatched(unmatched, "Moodle participant id", why, job.omit_unmatched)
    return sheet, unmatched


def export(job: ExportJob) -> tuple[list[Path], list[str]]:
    """Moodle's gradebook import (``job.target``, else OUT's ``Out.MOODLE_GRADES``) and its
    worksheet (``Out.MOODLE_WORKSHEET``) beside it."""
    target = job.target or job.out.moodle_grades
    write_csv(
        target,
        [*MOODLE_COLUMNS, job.column or job.course.assignment],
        _moodle_table(job.table.rows, job.people),
    )
    worksheet = target.with_name(Out.MOODLE_WORKSHEET)
    sheet, omitted = _worksheet(job)
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
