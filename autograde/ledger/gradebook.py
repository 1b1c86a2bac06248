"""The course's nbgrader gradebook: one database for the whole class (SQLite in OUT by
default, or any nbgrader ``db_url`` such as PostgreSQL), written only by the batch's parent.

Workers grade in throwaway course folders with gradebooks of their own; each finished
notebook's record (its judge scores, and which reflection answers await a person) is merged
here through nbgrader's ``Gradebook`` API by one writer thread. A regrade replaces the
automatic scores and never touches a manual score, so what graders entered in formgrader
stays. The structure (assignment, notebooks, grade cells) comes from the master course's
gradebook, which nbgrader's ``generate_assignment`` filled.

OUT is also an nbgrader course folder (``nbgrader_config.py``, ``autograded/``), so
formgrader (``jupyter lab`` in OUT) and ``nbgrader export`` work on it. No database password is ever
written to a file or a log: URLs are masked, and the config holds the URL without it
(libpq then reads ``PGPASSWORD`` or ``~/.pgpass``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tools.project_runtime import write_json_atomic

from ..errors import GraderError
from ..model import LateFacts, Record
from .late import Settled
from .layout import CourseFolder, Out

# as in the course folder's nbgrader configuration (autograde/nbgrader_config.py)
COURSE_ID = "serving-overlap"


class GradebookError(GraderError, RuntimeError):
    """The course gradebook cannot be opened or written (its message never holds a password)."""


def default_url(out: Out) -> str:
    return f"sqlite:///{out.gradebook.resolve()}"


def _parse(url: str):
    from sqlalchemy.engine import make_url

    try:
        return make_url(url)
    except Exception as exc:
        raise GradebookError(
            f"not a database URL: {mask_text(url, url)!r} ({type(exc).__name__})"
        ) from None


# query keys libpq reads a secret (or where it is) from
SECRET_KEYS = ("password", "sslpassword", "passfile")


def _secret_keys(parsed) -> list[str]:
    return [key for key in parsed.query if key.lower() in SECRET_KEYS]


def _secrets(url: str) -> list[str]:
    """Every secret a URL carries: its password and the values of its secret query keys, each
    also as it may be written percent-encoded (longest first, so a longer form is masked whole)."""
    from urllib.parse import quote, quote_plus

    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:
        return []
    values = [parsed.password] if parsed.password else []
    for key in _secret_keys(parsed):
        value = parsed.query[key]
        values += [value] if isinstance(value, str) else list(value)
    found = set()
    for value in (str(v) for v in values if v):
        found |= {value, quote(value, safe=""), quote_plus(value, safe=""), quote(value)}
    return sorted(found, key=len, reverse=True)


def mask_url(url: str) -> str:
    """The URL as it may be shown: the password, and any password, sslpassword or passfile
    given as a query parameter, replaced by ***."""
    try:
        parsed = _parse(url)
    except GradebookError:
        return "<unreadable database URL>"
    keys = _secret_keys(parsed)
    if keys:
        parsed = parsed.update_query_dict({key: "***" for key in keys})
    text = parsed.render_as_string(hide_password=True).replace("%2A%2A%2A", "***")
    for secret in _secrets(url):  # belt and braces: nothing secret survives in another spelling
        text = text.replace(secret, "***")
    return text


def password_free(url: str) -> str:
    """The URL without its password and without the query keys password, sslpassword and
    passfile (for files: libpq finds the password in PGPASSWORD or ~/.pgpass)."""
    parsed = _parse(url)
    keys = _secret_keys(parsed)
    if not parsed.password and not keys:
        return url
    if keys:
        parsed = parsed.difference_update_query(keys)
    return parsed._replace(password=None).render_as_string(hide_password=False)


def mask_text(text: str, url: str | None) -> str:
    """``text`` with the raw URL and every secret it carries (the password, secret query
    values, raw or percent-encoded) masked wherever they appear."""
    if not url:
        return text
    text = text.replace(url, "<database URL>")
    for secret in _secrets(url):
        text = text.replace(secret, "***")
    return text


def resolve_url(out: Out, db_url: str | None) -> str:
    """The URL to use: the one given, else the one this OUT used before (``Out.gradebook_url``: the
    URL in use, without its password), else SQLite in OUT."""
    if db_url:
        _parse(db_url)
        return db_url
    try:
        return json.loads(out.gradebook_url.read_text(encoding="utf-8"))["db_url"]
    except (OSError, ValueError, KeyError, TypeError):
        return default_url(out)


@functools.cache
def alembic_head() -> str:
    """The head revision of nbgrader's gradebook migrations: what ``alembic heads`` prints,
    read in this process from the same migration scripts (nbgrader's own ``get_alembic_version``
    starts a Python process running ``alembic`` for it, about a second, for every new gradebook)."""
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    heads = ScriptDirectory(ALEMBIC_DIR).get_heads()
    if len(heads) != 1:
        raise GradebookError(
            f"nbgrader's migrations have {len(heads)} heads ({', '.join(heads)}), expected one"
        )
    return heads[0]


def open_gradebook(url: str):
    """nbgrader's Gradebook on ``url``, with errors that never show the password."""
    import nbgrader.api
    from nbgrader.api import Gradebook

    # a new gradebook stamps the migrations' head: read in this process, not by running `alembic`
    nbgrader.api.get_alembic_version = alembic_head
    try:
        return Gradebook(url, COURSE_ID)
    except Exception as exc:
        raise GradebookError(
            f"cannot open the gradebook {mask_url(url)}: {type(exc).__name__}: "
            f"{mask_text(str(exc), url)[:500]}"
        ) from None


def write_course_config(out: Out, url: str, master: Path, assignment: str) -> None:
    """Make OUT an nbgrader course folder that formgrader and ``nbgrader export`` understand."""
    stored = password_free(url)
    write_json_atomic(out.gradebook_url, {"db_url": stored, "assignment": assignment})
    text = f"""# nbgrader configuration of this graded course (written by `python -m autograde \
grade`).
# formgrader (`jupyter lab` started here) and `nbgrader export --to FILE` read the course \
gradebook below.
# The database password is never stored: set PGPASSWORD or use ~/.pgpass.
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = {COURSE_ID!r}
c.CourseDirectory.root = {str(out.root.resolve())!r}
c.CourseDirectory.db_url = {stored!r}
# the master course built from the instructor sources (without hidden tests)
c.CourseDirectory.source_directory = {str(Path(master.name) / "source")!r}
c.CourseDirectory.release_directory = {str(Path(master.name) / "release")!r}
"""
    tmp = out.config.with_name(out.config.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out.config)


def sync_structure(gradebook, master_db: Path, assignment: str) -> None:
    """Create or update the assignment, its notebooks and their cells from the master course's
    gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{master_db}", COURSE_ID) as master:
        source = master.find_assignment(assignment)
        gradebook.update_or_create_assignment(assignment)
        for notebook in source.notebooks:
            gradebook.update_or_create_notebook(notebook.name, assignment)
            for cell in notebook.grade_cells:
                gradebook.update_or_create_grade_cell(
                    cell.name,
                    notebook.name,
                    assignment,
                    max_score=cell.max_score,
                    cell_type=cell.cell_type,
                )
            for cell in notebook.solution_cells:
                gradebook.update_or_create_solution_cell(cell.name, notebook.name, assignment)
            for cell in notebook.source_cells:
                gradebook.update_or_create_source_cell(
                    cell.name,
                    notebook.name,
                    assignment,
                    cell_type=cell.cell_type,
                    locked=cell.locked,
                    source=cell.source,
                    checksum=cell.checksum,
                )


def merge(gradebook, assignment: str, record: Record) -> None:
    """Write one notebook's outcome: the judge's scores as auto scores; a reflection answer
    left for a person as auto score None (needs a manual grade); a notebook that could not
    be graded as zeros. Manual scores are never changed."""
    from nbgrader.api import Comment, Grade, MissingEntry, SubmittedNotebook

    student, notebook = record.student_id, record.notebook
    gradebook.update_or_create_student(student)
    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        # nbgrader builds the submission before adding it to the session
        with gradebook.db().no_autoflush:
            submission = gradebook.add_submission(assignment, student)
    db = gradebook.db
    submitted = next((nb for nb in submission.notebooks if nb.name == notebook), None)
    if submitted is None:  # a notebook added to the course after this submission was recorded
        structure = gradebook.find_notebook(notebook, assignment)
        submitted = SubmittedNotebook(notebook=structure, assignment=submission)
        db.add(submitted)
        db.flush()
    present = {grade.cell_id for grade in submitted.grades}
    for cell in submitted.notebook.grade_cells:
        if cell.id not in present:
            db.add(Grade(cell_id=cell.id, notebook=submitted))
    present = {comment.cell_id for comment in submitted.comments}
    for cell in submitted.notebook.solution_cells:
        if cell.id not in present:
            db.add(Comment(cell_id=cell.id, notebook=submitted))
    db.flush()
    graded = record.graded
    scores, manual = record.scores, record.manual or {}
    # None: no earlier copy to compare with, so any answer may have changed
    changed = record.changed_answers
    for grade in submitted.grades:
        if grade.name in manual and graded:
            auto = manual[grade.name]  # None: a person grades it; 0: left as released
        elif grade.name in scores and graded:
            auto = float(scores[grade.name])
        else:  # not graded (missing, timed out...) or a cell the judge did not score: no points
            auto = 0.0
        if grade.manual_score is None:
            grade.needs_manual_grade = auto is None
        elif (
            auto != grade.auto_score
            or not graded
            or (not record.cached and (changed is None or grade.name in changed))
        ):
            # under a person's score the answer changed, was removed, or could not be graded: they
            # review it
            grade.needs_manual_grade = True
        grade.auto_score = auto
    _record_late(submission, submitted, record.late or LateFacts())
    db.commit()


def _record_late(submission, submitted, late: LateFacts) -> None:
    """nbgrader's own fields for lateness: the notebook's penalty, the submission's time (the latest
    of its notebooks'; nbgrader keeps naive UTC)."""
    submitted.late_submission_penalty = late.penalty or None
    if late.submitted_at:
        when = dt.datetime.fromisoformat(late.submitted_at).astimezone(dt.UTC).replace(tzinfo=None)
        if submission.timestamp is None or when > submission.timestamp:
            submission.timestamp = when


def _assignment(book, assignment: str):
    """The gradebook's row of ``assignment``; None when it has none (nothing was graded into it
    yet)."""
    from nbgrader.api import MissingEntry

    try:
        return book.find_assignment(assignment)
    except MissingEntry:
        return None


@contextlib.contextmanager
def _changing(url: str, what: str):
    """The gradebook at ``url``, open for one change: committed when the block ends, rolled back on
    any error, which is raised as a GradebookError saying that ``what`` could not be recorded."""
    with open_gradebook(url) as book:
        try:
            yield book
            book.db.commit()
        except Exception as exc:
            book.db.rollback()
            raise GradebookError(
                f"cannot record {what} in the gradebook {mask_url(url)}: "
                f"{type(exc).__name__}: {mask_text(str(exc), url)[:500]}"
            ) from None


def record_penalties(url: str, assignment: str, settled: dict[str, Settled]) -> int:
    """Set nbgrader's ``late_submission_penalty`` of each (student, notebook) in ``settled`` (a
    score table's ``ScoreTable.settled``) to the penalty the score tables settled (ledger/late.py's
    ``settle``, on the score a person's grades included), so that formgrader and ``nbgrader export``
    agree with them. Returns how many changed."""
    from nbgrader.api import MissingEntry

    changed = 0
    with _changing(url, "the late penalties") as book:
        for student, found in settled.items():
            for notebook, facts in found.facts.items():
                try:
                    submitted = book.find_submission_notebook(notebook, assignment, student)
                except MissingEntry:
                    continue
                value = facts.penalty or None  # nbgrader keeps None for none
                if submitted.late_submission_penalty != value:
                    submitted.late_submission_penalty = value
                    changed += 1
    return changed


def record_duedate(url: str, assignment: str, deadline, extensions: dict | None = None) -> bool:
    """Set nbgrader's ``duedate`` of the assignment to ``deadline`` (an aware datetime; nbgrader
    keeps naive UTC) and each listed student's submission ``extension`` to their own deadline less
    it, so that formgrader and nbgrader's own lateness (``total_seconds_late``) use the deadline the
    tables used. ``deadline`` None leaves the duedate as it is. Returns whether anything changed."""
    if deadline is None or (
        url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file()
    ):
        return False  # no deadline, or a gradebook that was never written (nothing to date)
    due = deadline.astimezone(dt.UTC).replace(tzinfo=None)
    changed = False
    with _changing(url, "the due date") as book:
        found = _assignment(book, assignment)
        if found is None:
            return False
        if found.duedate != due:
            found.duedate, changed = due, True
        for submission in found.submissions:
            own = (extensions or {}).get(submission.student.id)
            extra = own.astimezone(dt.UTC).replace(tzinfo=None) - due if own is not None else None
            extra = extra if extra is not None and extra > dt.timedelta(0) else None
            if submission.extension != extra:
                submission.extension, changed = extra, True
    return changed


@dataclass(frozen=True)
class Grade:
    """One graded cell of a student's submission as the gradebook holds it: the judge's score
    (``auto``), a person's (``manual``), extra credit, the cell's points, whether it is an answer a
    person grades, its notebook, and whether nbgrader flags it for a person."""

    auto: float | None = None
    manual: float | None = None
    extra: float | None = None
    max: float = 0.0
    manual_cell: bool = False
    notebook: str = ""
    needs_manual_grade: bool = False

    @property
    def score(self) -> float | None:
        """The score as nbgrader counts it: the manual score if a person gave one, else the
        automatic one, plus any extra credit; None while nobody has scored it."""
        base = self.manual if self.manual is not None else self.auto
        if base is None:
            return None
        return float(base) + float(self.extra or 0.0)

    @property
    def needs_review(self) -> bool:
        """A score a person gave that no longer stands: the answer changed (or went) since, so
        nbgrader flags the cell for a manual grade again. Shown as ``review``, not counted."""
        return self.manual is not None and self.needs_manual_grade


@dataclass(frozen=True)
class Book:
    """What the course gradebook holds of an assignment, read in one session: each student's grades
    (grade id -> :class:`Grade`) and each submission's time (naive UTC, as nbgrader keeps it)."""

    grades: dict[str, dict[str, Grade]] = field(default_factory=dict)
    times: dict[str, dt.datetime | None] = field(default_factory=dict)

    def of(self, student: str) -> dict[str, Grade]:
        return self.grades.get(student, {})


def read_book(url: str, assignment: str) -> Book:
    """The assignment's grades and submission times (an empty book when nothing was graded into
    it)."""
    grades: dict[str, dict[str, Grade]] = {}
    times: dict[str, dt.datetime | None] = {}
    with open_gradebook(url) as gradebook:
        assignment_row = _assignment(gradebook, assignment)
        if assignment_row is None:
            return Book()
        for submission in assignment_row.submissions:
            times[submission.student.id] = submission.timestamp
            per = grades.setdefault(submission.student.id, {})
            for notebook in submission.notebooks:
                solution_ids = {cell.name for cell in notebook.notebook.solution_cells}
                for grade in notebook.grades:
                    per[grade.name] = Grade(
                        grade.auto_score,
                        grade.manual_score,
                        grade.extra_credit,
                        float(grade.max_score or 0.0),
                        grade.name in solution_ids,
                        notebook.name,
                        bool(grade.needs_manual_grade),
                    )
    return Book(grades, times)


def keep_submitted_times(book: Book, out: CourseFolder) -> int:
    """Write each submission's time, as the gradebook holds it (``book``), beside the submission
    nbgrader's formgrader reads (``CourseFolder.timestamp``; one is removed where the gradebook
    holds none): formgrader takes a submission as autograded only when that file says the time the
    gradebook says. Returns how many were written."""
    written = 0
    for student, when in book.times.items():
        stamp = out.timestamp(student)
        if not stamp.parent.is_dir():
            continue
        if when is None:
            stamp.unlink(missing_ok=True)
        else:  # nbgrader's own format (Exchange.timestamp_format), read back by its parse_utc
            stamp.write_text(when.strftime("%Y-%m-%d %H:%M:%S.%f UTC"), encoding="utf-8")
            written += 1
    return written


class Writer:
    """The one writer of the course gradebook: records are queued from any thread and merged
    in order by a thread of its own (nbgrader's Gradebook keeps a session per thread).

    The thread opens the gradebook and copies the course's structure into it as soon as the
    writer exists; ``ready()`` waits for that and raises when it failed, so the batch can do
    other set-up meanwhile and still refuse an unusable gradebook before grading anyone."""

    _STOP = object()

    def __init__(self, url: str, master_db: Path, assignment: str, wait: bool = True):
        self.url, self.master_db, self.assignment = url, master_db, assignment
        self.error: str | None = None
        self.merged = 0
        self._queue: queue.Queue = queue.Queue()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gradebook-writer", daemon=True)
        self._thread.start()
        if wait:
            self.ready()

    def ready(self) -> None:
        """Wait until the gradebook is open and holds the course's structure; raise
        GradebookError when it could not be prepared (the writer has then stopped)."""
        self._ready.wait()
        if self.error:
            self._thread.join()
            raise GradebookError(self.error)

    def _run(self) -> None:
        try:
            gradebook = open_gradebook(self.url)
            sync_structure(gradebook, self.master_db, self.assignment)
        except Exception as exc:
            self.error = self._describe(exc, "cannot prepare the gradebook")
            self._ready.set()
            return
        self._ready.set()
        try:
            while True:
                record = self._queue.get()
                if record is self._STOP:
                    break
                if self.error:
                    continue
                try:
                    merge(gradebook, self.assignment, record)
                    self.merged += 1
                except Exception as exc:
                    gradebook.db.rollback()
                    self.error = self._describe(
                        exc, f"cannot record {record.student_id}/{record.notebook}"
                    )
        finally:
            gradebook.close()

    def _describe(self, exc: Exception, what: str) -> str:
        if isinstance(exc, GradebookError):
            return str(exc)
        return (
            f"{what} in the gradebook {mask_url(self.url)}: {type(exc).__name__}: "
            f"{mask_text(str(exc), self.url)[:500]}"
        )

    def put(self, record: Record) -> None:
        self._queue.put(record)  # frozen: the batch cannot change it while it waits

    def close(self) -> None:
        """Wait for every queued record to be merged; raise if one could not be."""
        self._queue.put(self._STOP)
        self._thread.join()
        if self.error:
            raise GradebookError(self.error)
