"""Canvas: its "Download submissions" zip read (flat files named ``<name>_[LATE_]<user id>_<file
id>_<file name>``, ``LATE_anon_<id>_<file id>_<file name>`` when the assignment is graded
anonymously; the file name may end in ``-1``, ``-2`` when Canvas renamed a resubmitted file), the
pages handed back as its "Re-upload submissions" reads them (one
``OUT/handback/canvas_feedback.zip``, each file named as Canvas names a submission:
``name_userid_submissionid_file``), and the grades as its gradebook import reads them
(``OUT/canvas_grades.csv``). Canvas's download holds no submission times: its ``LATE_`` mark is
kept."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..course import Course, UnusableInput
from ..ledger.facts import LmsStudent
from ..ledger.folder import Page
from ..ledger.tables import ScoreRow, write_csv
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

# Canvas (lib/content_zipper.rb): [sortable name, "LATE" when late, user id].join("_"), then
# "_<attachment id>_<file name>". The name is lower-cased and keeps only word characters (Canvas
# takes "_<digits>_" out of it first, but punctuation removed afterwards can leave "_1001" or
# "_1001_7" at its end), so the name alone cannot tell which digits are the user id: canvas_files
# reads every split the name allows and keeps the one the rest of the download agrees with. Ids are
# printed integers (no leading zero). With anonymous grading the name is left out and the id is
# "anon_<anonymous id>". Older Canvas wrote "late".
CANVAS_ID = re.compile(r"0|[1-9]\d{0,19}")
CANVAS_NAME = re.compile(r"\w*")
CANVAS_ANON = re.compile(
    r"(?P<late>(?i:late)_)?(?P<user>anon_[A-Za-z0-9]+)_(?P<attachment>0|[1-9]\d{0,19})_(?P<file>.+)"
)
CANVAS_TEXT = re.compile(
    r"(?:\w*_)?(?:(?i:late)_)?(?P<user>0|[1-9]\d{0,19}|anon_[A-Za-z0-9]+)_(?:text|link)\.html"
)

# Canvas's gradebook import: the columns its own gradebook export starts with, then one per
# assignment, titled "<name> (<assignment id>)" (an id Canvas does not know makes a new assignment)
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
# gradebook_importer.rb's own pattern for "Title (id)" (Ruby's \z)
CANVAS_TITLE = re.compile(r"\A(.*)\s\((\d+)\)\Z")
NEW_ASSIGNMENT = "new"  # --assignment-id new: let Canvas create the assignment, knowingly
ID_KIND = (
    "Canvas names each student by their Canvas user id (the ID column of Canvas's gradebook export)"
)


@dataclass(frozen=True)
class CanvasName:
    """A flat file's name read as Canvas writes it: the student's sortable name ('' in an anonymous
    download), Canvas's late mark, the user id, the attachment id, and the file's own name."""

    name: str
    late: bool
    user: str
    attachment: str
    file: str


def canvas_splits(name: str) -> list[CanvasName]:
    """Every way a flat file's name can be read as Canvas writes it:
    ``<name>_[LATE_]<user>_<attachment>_<file>``."""
    fields = name.split("_")
    found = []
    for at in range(len(fields) - 2):
        user, attachment, file = fields[at], fields[at + 1], "_".join(fields[at + 2 :])
        if not (CANVAS_ID.fullmatch(user) and CANVAS_ID.fullmatch(attachment) and file):
            continue
        head = fields[:at]
        late = bool(head) and head[-1].lower() == "late"
        slug = "_".join(head[:-1] if late else head)
        if CANVAS_NAME.fullmatch(slug):
            found.append(CanvasName(slug, late, user, attachment, file))
    return found


def claims(name: str, folder: bool, assignment: str) -> bool:
    """A file of Canvas's download, by its name (the download holds no folders)."""
    return not folder and bool(
        CANVAS_ANON.fullmatch(name) or canvas_splits(name) or CANVAS_TEXT.fullmatch(name)
    )


@dataclass(frozen=True)
class CanvasFiles:
    """Whose each of a Canvas download's file names is: the reading chosen for a name, or why none
    was."""

    chosen: dict[str, CanvasName]
    why: dict[str, str]

    def reading(self, name: str) -> CanvasName | None:
        return self.chosen.get(name)


def canvas_files(names: list[str]) -> CanvasFiles:
    """Whose each of a Canvas download's file names is (its reading, or why there is none).

    A name may allow several readings (a sortable name ending in ``_<digits>`` looks like an id, and
    so may the start of a file name). The true one is always among them and agrees with the rest of
    the download: Canvas writes the same name before all of one user's files, and every attachment
    id once. So a name with one reading fixes its user's name and its attachment id; a reading that
    contradicts a fixed one is dropped, until nothing changes. A name left with more than one
    reading is nobody's (a named problem): it is never given to a guessed student. A learner can
    make only their own file's name ambiguous."""
    anonymous = bool(names) and all(CANVAS_ANON.fullmatch(n) for n in names)
    readings: dict[str, list[CanvasName]] = {}
    for name in names:
        splits = [] if anonymous else canvas_splits(name)
        # a named file always has its true split: this one is anonymous
        if CANVAS_ANON.fullmatch(name) and not splits:
            m = CANVAS_ANON.fullmatch(name)
            readings[name] = [
                CanvasName("", bool(m["late"]), m["user"], m["attachment"], m["file"])
            ]
        else:
            readings[name] = splits
    fixed_name: dict[str, str] = {}
    fixed_attachment: dict[str, str] = {}
    chosen: dict[str, CanvasName] = {}
    why: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for name in sorted(readings):
            if name in chosen or name in why:
                continue
            left = [
                r
                for r in readings[name]
                if fixed_name.get(r.user, r.name) == r.name
                and fixed_attachment.get(r.attachment, name) == name
            ]
            if len(left) == 1:
                chosen[name] = left[0]
                fixed_name[left[0].user], fixed_attachment[left[0].attachment] = left[0].name, name
                changed = True
            elif not left:
                why[name] = (
                    "not named like a file of Canvas's download "
                    "(name_userid_fileid_filename): not used"
                )
    for name in readings:
        if name not in chosen and name not in why:
            users = " or ".join(sorted({r.user for r in readings[name]}))
            why[name] = (
                f"its name can be read as the file of Canvas user {users}, and nothing "
                "else in the download tells which: "
                "not used (the learner's own name or file name looks like an id; rename "
                "it as Canvas would and run again)"
            )
    return CanvasFiles(chosen, why)


def read_canvas(files: Source, entries: list[Entry], context: dict) -> list[Candidate]:
    flat = [e for e in entries if len(e.parts) == 1 and not CANVAS_TEXT.fullmatch(e.parts[0])]
    readings = canvas_files([e.parts[0] for e in flat])
    found = []
    for entry in entries:
        name = entry.parts[-1]
        if len(entry.parts) == 1 and CANVAS_TEXT.fullmatch(name):
            user = CANVAS_TEXT.fullmatch(name)["user"]
            files.problems.append(
                problem(
                    shown(entry.name),
                    user,
                    "a text entry or web address, not a file: not a notebook",
                )
            )
            continue
        match = readings.reading(name) if len(entry.parts) == 1 else None
        if match is None:
            reason = readings.why.get(
                name,
                "inside a folder, not a file of Canvas's download "
                "(name_userid_fileid_filename): not used",
            )
            files.problems.append(problem(shown(entry.name), None, reason))
            continue
        reason = why_not(entry, context["limits"], match.file)
        if reason:
            files.problems.append(problem(shown(entry.name), match.user, reason))
            continue
        lms = {
            "layout": "canvas",
            "lms_id": match.user,
            "name": match.name,
            "submission_id": match.attachment,
        }
        found.append(
            Candidate(
                match.user,
                entry,
                match.file,
                order=int(match.attachment),
                basis="Canvas file id",
                late=match.late,
                lms=lms,
            )
        )
    return found


# -- handing back
# --------------------------------------------------------------------------------------------------


def page_name(lms: LmsStudent, page: Page) -> str:
    """A page's name as Canvas's re-upload reads it (from the names its download used)."""
    # Canvas's re-upload attaches a file as a comment under the submission attachment its name
    # gives: each page goes under the file the student sent for that notebook (the newest file's id
    # where none is known)
    attachment = lms.attachments.get(page.stem) or lms.submission_id or "0"
    # the re-upload takes the FIRST two all-digit fields: a sortable name that holds one
    # ("lory_1001", as Canvas's own download writes it) would give the page to user 1001; the name
    # is only a label, so its all-digit fields are left out
    name = "_".join(part for part in safe(lms.name).split("_") if not part.isdigit()) or "student"
    return f"{name}_{safe(lms.lms_id)}_{safe(attachment)}_feedback_{page.name}"


def hand_back(job: HandBackJob) -> HandBack:
    return lms_zip("canvas", page_name, job)


# -- grades
# --------------------------------------------------------------------------------------------------


def _canvas_column(course: Course, column: str | None, assignment_id: str | None) -> str:
    """``Title (id)``: from --column alone when it holds the id, else --column's title (default: the
    assignment's name) and --assignment-id. Without an id Canvas would make a new assignment:
    refused, unless --assignment-id new says so."""
    match = CANVAS_TITLE.match(column or "")
    title = (match[1] if match else column) or course.assignment
    if match and assignment_id not in (None, match[2]):
        raise UnusableInput(
            f"--column {column!r} names assignment {match[2]}, --assignment-id "
            f"{assignment_id}: give one"
        )
    found = match[2] if match else assignment_id
    if found == NEW_ASSIGNMENT:
        return title
    if not found or not found.isdigit():
        raise UnusableInput(
            f"Canvas needs the assignment's id in the grade column ({title!r} (ID)): "
            "without it, its gradebook import makes a "
            "NEW assignment. Give --assignment-id N (the number in the assignment's "
            "address, /assignments/N), "
            "or --column 'Title (N)'; --assignment-id new if a new assignment is what you want"
        )
    return f"{title} ({found})"


def _canvas_table(
    rows: list[ScoreRow], people: dict[str, Person], omit_unmatched: bool
) -> tuple[list[list], list[str]]:
    """(rows, students left out) of Canvas's gradebook import (``CANVAS_COLUMNS``, then the grade):
    the final total per student under their Canvas user id (the roster's lms_id, else the id the
    Canvas download named them by); a student without one is refused (or left out, with
    omit_unmatched). SIS User ID only from the roster's sis_user_id: never a Canvas id."""
    table, unmatched = [], []
    for row in rows:
        who = people.get(row.student_id, Person())
        canvas_id = who.roster_lms_id or (who.lms_id if who.layout == "canvas" else "")
        if not canvas_id:
            unmatched.append(row.student_id)
            continue
        table.append(
            [who.name, canvas_id, who.sis_user_id, who.login, who.section, row.final_total]
        )
    refuse_unmatched(
        unmatched,
        "Canvas user id",
        "the roster's lms_id (the ID column of Canvas's gradebook export)",
        omit_unmatched,
    )
    return table, unmatched


def export(job: ExportJob) -> tuple[list[Path], list[str]]:
    """Canvas's gradebook import (``job.target``, else OUT's ``Out.CANVAS_GRADES``): the final
    totals under the assignment's ``Title (id)``."""
    target = job.target or job.out.canvas_grades
    column = _canvas_column(job.course, job.column, job.assignment_id)
    table, omitted = _canvas_table(job.table.rows, job.people, job.omit_unmatched)
    write_csv(target, [*CANVAS_COLUMNS, column], table)
    return [target], omitted


ADAPTER = Adapter(
    "canvas",
    read_canvas,
    claims=claims,
    id_kind=ID_KIND,
    handback_format="canvas",
    handback=hand_back,
    page_name=page_name,
    export_format="canvas",
    export=export,
)
