"""nbgrader's exchange: ``submitted/<student>/<assignment>/`` (what ``nbgrader collect`` writes),
given as the course folder, as ``submitted/`` itself, or zipped; or the exchange's
``inbound/<student>+<assignment>+<timestamp>[+<random>]/``, where each student's newest submission
by the time in its folder's name is used, as ``nbgrader collect`` does, and a folder owned by
someone other than the student it names is not. ``timestamp.txt`` gives the submission time, read as
nbgrader reads it; in a live inbound/ it is checked against when the submission arrived there
(``arrival``: the change times of its folder and of the files read, which no learner can set back),
and past ``TOLERANCE`` the latest counts and the disagreement is the student's named problem
(``submission_time``) and their page's.

An edition released as an assignment of its own (course.toml's ``[course.editions]``, e.g.
``serving_overlap-zh``) is read as the course's assignment: its folders are each student's
submissions like any other, the owner check and the times alike, and a student who submitted to both
editions is graded on the newest (the same order, across them), which is a named note.

Handing back (``feedback --format exchange``):
``OUT/handback/exchange/feedback/<student_id>/<assignment>/``, under the assignment name the
student's graded submission was made to, the course-folder layout from which nbgrader's
``release_feedback`` hands pages out, with each submission's ``timestamp.txt`` and
``submission_secret.txt`` (kept by the intake); a student whose submission did not come through the
exchange is listed: nbgrader cannot release their pages; so is one whose notebook came in their own
zip (``zipped``): ``fetch_feedback`` finds a page only by a ``.ipynb`` of the learner's submission.
"""

from __future__ import annotations

import functools
import os
import pwd
import re
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

from ..course import assignment_names
from ..ledger.facts import LmsStudent
from ..ledger.layout import CourseFolder
from ..model import Disputed
from .adapter import Adapter, HandBack, HandBackJob
from .candidates import Candidate, exchange_time, why_not
from .source import Entry, Listed, Refused, Source, problem, shown

# what nbgrader submit writes beside the notebooks
NBGRADER_FILES = {"timestamp.txt", "submission_secret.txt"}
MAX_STAMP_BYTES = 200  # nbgrader's timestamp.txt holds one line of about 30 characters
# a course folder (collect's submitted/) or an exchange course folder (inbound/)
COURSE_FOLDERS = ("submitted", "inbound")
# how far a submission's own times (timestamp.txt, its folder's name) and its arrival on the
# exchange may differ before the latest counts: nbgrader submit takes its time, then copies the
# files (seconds) and writes timestamp.txt
TOLERANCE = timedelta(minutes=2)


@functools.cache
def inbound_name(assignment: str) -> re.Pattern:
    """An exchange inbound folder's name: ``<student>+<name>+<timestamp>[+<random>]``, ``<name>``
    the assignment or one of its editions' own assignments (``course.assignment_names``)."""
    names = "|".join(
        re.escape(name) for name in sorted(assignment_names(assignment), key=len, reverse=True)
    )
    return re.compile(rf"(?P<user>.+)\+(?P<assignment>{names})\+(?P<stamp>[^+]+)(?:\+[^+]*)?")


def claims(name: str, folder: bool, assignment: str) -> bool:
    """A submission folder of the exchange's inbound/, by its name."""
    return folder and bool(inbound_name(assignment).fullmatch(name))


def unnamed(tops: dict[str, set[str]], assignment: str) -> tuple[str, ...] | None:
    """Where a source whose top names no layout starts when it is nbgrader's: a course folder (its
    top is the instructor's, not a learner's) or submitted/ itself (``<student>/<assignment>/`` in
    every folder)."""
    folders = [name for name, inside in tops.items() if "/" in inside]
    for course_folder in COURSE_FOLDERS:
        if course_folder in folders:
            return (course_folder,)
    names = assignment_names(assignment)
    if folders and all(names.keys() & tops[name] for name in folders):
        return ()
    return None


def start(tops: dict[str, set[str]], assignment: str) -> tuple[str, ...]:
    """Where the exchange layout, given by the instructor, starts: a course or exchange folder is
    read from its submitted/ or inbound/, unless submission folders of the exchange lie at the top
    itself."""
    if any(claims(name, "/" in inside, assignment) for name, inside in tops.items()):
        return ()
    return next(((name,) for name in COURSE_FOLDERS if "/" in tops.get(name, ())), ())


def form(root: tuple[str, ...], entries: list[Entry], assignment: str) -> str:
    """``inbound`` (submission folders named ``<student>+<assignment>+<time>``: an exchange's
    inbound/, where any learner can make a folder) or ``submitted`` (``<student>/<assignment>/``, as
    collect writes it)."""
    if root[-1:] == ("inbound",):
        return "inbound"
    name = inbound_name(assignment)
    return (
        "inbound"
        if any(len(e.parts) > 1 and name.fullmatch(e.parts[0]) for e in entries)
        else "submitted"
    )


def _stamp_of(files: Source, entry: Entry, student: str) -> datetime | None:
    try:
        return exchange_time(files.read(entry, MAX_STAMP_BYTES).decode("utf-8", "replace"))
    except ValueError as exc:  # Refused too
        files.problems.append(
            problem(
                shown(entry.name),
                shown(student),
                f"timestamp.txt: {exc}; the submission time is not known",
            )
        )
        return None


def _owner(inside: list[Entry]) -> int | None:
    """The owner (uid) of a submission folder as it was listed, from the files in it; None for a
    zip's members."""
    for entry in inside:
        if isinstance(entry.ref, Listed) and len(entry.ref.folders) >= len(entry.parts):
            return entry.ref.folders[-len(entry.parts)].uid
    return None


def arrival(read: list[Entry]) -> datetime | None:
    """When a submission in inbound/ arrived: the latest change time of its folder, of the folders
    below it that hold what was read, and of every file read (``read``: paths from the submission
    folder). No learner can set a change time back (``utime`` sets it to now), and a file rewritten
    in place, renamed or moved in after the deadline moves its own or its folder's. None for a zip's
    members, which carry none."""
    times = [e.ref.changed_ns(len(e.parts)) for e in read if isinstance(e.ref, Listed)]
    return datetime.fromtimestamp(max(times) / 1e9, UTC) if times else None


def _said(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def submission_time(
    files: Source,
    student: str,
    folder: str,
    stamp: datetime | None,
    named: datetime | None,
    arrived: datetime | None,
) -> tuple[datetime | None, Disputed | None]:
    """A submission's time, and what the page says when its times disagree (None when they agree).
    Its own times, which the learner writes (timestamp.txt, as nbgrader reads it, else its folder's
    name), count while they and its arrival agree within ``TOLERANCE``; past it the latest counts,
    and the disagreement is the student's named problem."""
    claimed = stamp if stamp is not None else named
    known = [t for t in (stamp, named, arrived) if t is not None]
    if not known:
        return None, None
    latest = max(known)
    if latest - min(known) <= TOLERANCE:
        return (claimed if claimed is not None else arrived), None
    said = [
        f"timestamp.txt says {_said(stamp)}" if stamp else "",
        f"its folder's name says {_said(named)}" if named else "",
    ]
    if arrived is not None:
        said.append(
            f"it arrived on the exchange at {_said(arrived)} "
            "(the latest change time of its folder and of the files read, which no "
            "learner can set back)"
        )
    files.problems.append(
        problem(
            shown(folder),
            shown(student),
            "the submission's times disagree by more than "
            f"{TOLERANCE.total_seconds() / 60:g} minutes: "
            f"{'; '.join(t for t in said if t)}: "
            f"the latest, {_said(latest)}, is used",
        )
    )
    earliest = min(t for t in (stamp, named) if t is not None) if claimed is not None else None
    return latest, Disputed(
        earliest and earliest.isoformat(), arrived and arrived.isoformat(), latest.isoformat()
    )


def foreign_owner(uid: int | None, student: str) -> str:
    """The name of a folder's owner when it is someone other than the student it claims, the person
    running the intake and root ('' otherwise): on a shared exchange each student owns what they
    submit, so such a folder is someone else's (nbgrader collect's "cheating attempt?")."""
    if uid is None or uid in (0, os.geteuid()):
        return ""
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
    return "" if name == student else name


def _exchange_folders(
    files: Source, entries: list[Entry], context: dict
) -> dict[tuple[str, str], list[Entry]]:
    """Each submission folder's files, by (student, folder): in ``submitted`` form
    ``<student>/<assignment>/`` (what collect writes), in ``inbound`` form
    ``<student>+<assignment>+<timestamp>[+<random>]/`` only (a learner can make any folder in
    inbound/: no other shape is read there). Other assignments' folders are noted."""
    assignment, inbound = context["assignment"], context["form"] == "inbound"
    name, names = inbound_name(assignment), assignment_names(assignment)
    folders: dict[tuple[str, str], list[Entry]] = defaultdict(list)
    others: Counter = Counter()
    for entry in entries:
        match = name.fullmatch(entry.parts[0]) if inbound and len(entry.parts) > 1 else None
        if match:
            folders[(match["user"], entry.parts[0])].append(entry.named(entry.parts[1:]))
        elif not inbound and len(entry.parts) > 2 and entry.parts[1] in names:
            folders[(entry.parts[0], entry.parts[1])].append(entry.named(entry.parts[2:]))
        elif not inbound and len(entry.parts) > 2:
            others[entry.parts[1]] += 1
        elif inbound and len(entry.parts) > 1 and len(bits := entry.parts[0].rsplit("+", 3)) == 4:
            others[bits[1]] += 1
        else:
            shape = f"<student>+{assignment}+<time>/" if inbound else f"<student>/{assignment}/"
            files.problems.append(problem(shown(entry.name), None, f"not inside {shape}: not used"))
    for other, count in sorted(others.items()):
        files.notes.append(f"{count} files of another assignment ({shown(other)}) were not read")
    return folders


def read_exchange(files: Source, entries: list[Entry], context: dict) -> list[Candidate]:
    """nbgrader's submitted/ or inbound/ folders. In inbound/, the newest submission of each student
    is the one whose folder name says the latest time, as ``nbgrader collect`` sorts them; a folder
    owned by someone other than the student it names is not taken unless the instructor said so
    (``trust_owners``). The submission time is timestamp.txt's, as nbgrader reads it, else the
    folder name's, checked in a live inbound/ against when the submission arrived
    (``submission_time``). A folder of an edition's own assignment is one more submission of its
    student's: the newest of all is kept, in the same order."""
    assignment = context["assignment"]
    context = {**context, "form": form(context.get("root", ()), entries, assignment)}
    newest: dict[str, tuple] = {}
    for (student, folder), inside in sorted(_exchange_folders(files, entries, context).items()):
        owner = "" if context.get("trust_owners") else foreign_owner(_owner(inside), student)
        if owner:
            files.problems.append(
                problem(
                    shown(folder),
                    shown(student),
                    f"claims to be {shown(student)}'s but is owned by {shown(owner)} (a "
                    "submission made in another's name?): "
                    "not used; if it is theirs, run again with --trust-owners",
                )
            )
            continue
        stamp = next((e for e in inside if e.parts == ("timestamp.txt",)), None)
        secret = next((e for e in inside if e.parts == ("submission_secret.txt",)), None)
        # the folder's path in the source
        where = (folder,) if context["form"] == "inbound" else (student, folder)
        when = _stamp_of(files, stamp.named((*where, *stamp.parts)), student) if stamp else None
        named, to = None, folder  # to: the assignment (or edition's assignment) it was submitted to
        if context["form"] == "inbound":
            to = inbound_name(assignment).fullmatch(folder)["assignment"]
            try:
                named = exchange_time(inbound_name(assignment).fullmatch(folder)["stamp"])
            except ValueError as exc:
                files.problems.append(
                    problem(
                        shown(folder), shown(student), f"{exc}: the submission's time is not known"
                    )
                )
        handed = {
            **_handback_files(files, stamp if when is not None else None, secret),
            "assignment": to,
        }
        read = [e for e in (stamp, secret) if e is not None]
        earliest = datetime.min.replace(tzinfo=UTC)
        this = (
            (named is not None, named or earliest, when or earliest, folder),
            folder,
            inside,
            (when, named),
            handed,
            read,
        )
        held = newest.get(student)
        # collect's order: the time in the folder's name, never a file the learner wrote
        if held is not None:
            this, older = (this, held) if this[0] > held[0] else (held, this)
            files.notes.append(_older_note(student, this, older))
        newest[student] = this
    found = []
    for student, (_order, folder, inside, claimed, handed, read) in newest.items():
        found += _candidates(files, context, student, folder, inside, claimed, handed, read)
    if (
        context["form"] == "inbound"
        and found
        and not any(isinstance(c.entry.ref, Listed) for c in found)
    ):
        files.notes.append(
            "these exchange submissions came in a zip: their times are what the learners "
            "wrote (timestamp.txt, folder names), "
            "unchecked; grade the exchange's inbound/ folder itself to have each checked "
            "against when it arrived"
        )
    return found


def _older_note(student: str, kept: tuple, older: tuple) -> str:
    """The note on a submission not used because the same student's ``kept`` is newer (in either
    edition)."""
    kept_to, older_to = kept[4]["assignment"], older[4]["assignment"]
    if kept_to == older_to:
        return (
            f"{shown(student)}: an older submission ({shown(older[1])}) was not used: the "
            "newest by the time in its "
            "folder's name is kept, as nbgrader collect keeps it"
        )
    by = "the time in its folder's name" if kept[0][0] else "its timestamp.txt"
    return (
        f"{shown(student)}: an older submission ({shown(older[1])}, to {shown(older_to)}) "
        "was not used: they submitted to two "
        f"editions' assignments, and the newest by {by} ({shown(kept[1])}, to "
        f"{shown(kept_to)}) is graded and gets the feedback"
    )


def _candidates(
    files: Source,
    context: dict,
    student: str,
    folder: str,
    inside: list[Entry],
    claimed: tuple,
    handed: dict,
    read: list[Entry],
) -> list[Candidate]:
    """One submission's notebooks (and zips of them), each with the submission's time: in inbound/
    checked against its arrival there (in collect's submitted/ the folders are collect's copies: no
    arrival)."""
    where = (folder,) if context["form"] == "inbound" else (student, folder)
    taken = []
    for entry in inside:
        if entry.parts[-1] in NBGRADER_FILES and len(entry.parts) == 1:
            continue
        named_entry = entry.named((*where, *entry.parts))
        why = why_not(named_entry, context["limits"])
        if why:
            files.problems.append(problem(shown(named_entry.name), shown(student), why))
        else:
            taken.append((entry, named_entry))
    arrived = (
        arrival(read + [entry for entry, _ in taken])
        if context["form"] == "inbound" and taken
        else None
    )
    when, disputed = submission_time(files, student, folder, *claimed, arrived)
    lms = {"layout": "exchange", **handed}
    return [
        Candidate(
            student,
            named_entry,
            entry.parts[-1],
            when=when,
            order=entry.date,
            lms=lms,
            disputed=disputed,
        )
        for entry, named_entry in taken
    ]


def _handback_files(files: Source, stamp: Entry | None, secret: Entry | None) -> dict[str, str]:
    """What nbgrader's release_feedback needs beside a student's pages, from their submission: its
    ``timestamp.txt`` (when it was read as a time) and ``submission_secret.txt`` (the key
    fetch_feedback finds the pages by). A secret that is not one short word of letters and digits is
    not kept."""
    kept = {}
    for key, entry in (("timestamp", stamp), ("secret", secret)):
        if entry is None:
            continue
        try:
            text = files.read(entry, MAX_STAMP_BYTES).decode("utf-8").strip()
        except (Refused, UnicodeDecodeError):
            continue
        if key == "timestamp" or re.fullmatch(r"[A-Za-z0-9_-]{1,128}", text):
            kept[key] = text
    return kept


def hand_back(job: HandBackJob) -> HandBack:
    """The pages in the course-folder layout nbgrader's ``release_feedback`` reads, beside each
    submission's ``timestamp.txt`` and ``submission_secret.txt``."""
    unmatched: list[str] = []
    unreachable: dict[str, list[str]] = {}
    released = job.out.exchange_feedback
    own = job.course.assignment_names()
    for student, files in job.pages.items():
        sent = job.names.get(student, LmsStudent())
        # under the assignment (or edition's assignment) the graded submission was made to:
        # `nbgrader release_feedback <that name>` hands it out, and the learner's Fetch Feedback
        # there finds it
        to = sent.assignment if sent.assignment in own else job.course.assignment
        given = released if to == released.assignment else CourseFolder(released.root, to)
        folder = given.feedback(student)
        folder.mkdir(parents=True, exist_ok=True)
        for page in files:
            (folder / page.name).write_bytes(page.data())
        # release_feedback reads both beside the pages; fetch_feedback finds a page by the secret's
        # hash fetch_feedback finds a page by the hash of the secret and a .ipynb the learner's own
        # submission holds: a notebook that came in a zip has none, so its page can be released but
        # never fetched
        zipped = sorted(set(sent.zipped) & {p.stem for p in files})
        if zipped:
            unreachable[student] = zipped
        if sent.layout == "exchange" and sent.secret and sent.timestamp:
            given.timestamp(student, given.FEEDBACK).write_text(sent.timestamp, encoding="utf-8")
            given.secret(student).write_text(sent.secret, encoding="utf-8")
        if zipped or not (sent.layout == "exchange" and sent.secret and sent.timestamp):
            unmatched.append(student)
    return HandBack(released.root, unmatched, unreachable)


ADAPTER = Adapter(
    "exchange",
    read_exchange,
    claims=claims,
    start=start,
    unnamed=unnamed,
    handback_format="exchange",
    handback=hand_back,
)
