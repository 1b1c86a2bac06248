"""Grade a batch of submissions through nbgrader, one isolated course folder per (student,
notebook).

Why one folder per notebook: nbgrader deletes a student's whole autograded folder when a
kernel dies, and a kernel that ignores SIGINT stalls the run. Here each notebook runs in
its own nbgrader course folder with its own copy of the gradebook, under a wall-clock
limit, so one broken notebook costs only its own points. Results are saved per notebook
as they finish (signed, so a record is reused only when it verifies), an interrupted batch
resumes where it stopped, and a rerun is idempotent.

Submissions are untrusted code: learner kernels and the judge's runner run in the sandbox
(sandbox.py), hidden tests run in the trusted judge (judge.py), and every feedback page is
scanned for hidden-test and reference-answer lines before it is written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import logging
import os
import shutil
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple, Protocol

from tools.project_runtime import write_json_atomic

from .course import Course, Exercise, UnusableInput, exercises, install_sigterm, kill_live_runs  # noqa: F401 (Exercise: for importers)
from .errors import GraderError
from .ledger import gradebook
from .ledger.facts import BookInfo, ClusterInfo, IntakeFacts, SandboxInfo, Summary
from .ledger.folder import Ledger, keep_fault
from .ledger.late import LateSpec, submitted_at
from .ledger.layout import JobFolder, Out
from .ledger.results import late_in_gradebook, summarize, write_log, write_summary, write_tables
from .ledger.store import cached_record, fingerprint, save_record, signing_key, submission_digest
from .ledger.tables import grades_table
from .matching import Found, grade_ids, last_error, match_notebooks, read_json, safe_text
from .model import STUDENT_ID, GiB, JobOutcome, LateFacts, Options, Record, new_record
from .publish.leaks import secret_lines
from .publish.master import edition_master, grading_master
from .record.pages import (
    Drafts,
    keep_page_data,
    note_redactions,
    page_kept,
    page_words,
    write_pages,
)
from .run.launch import prestart as start_worker_server
from .run.preprocessors import keep_for_display
from .run.student import INTERRUPTED, elapsed_since, job_settings, run_student

log = logging.getLogger(__name__)  # warnings, to stderr as the command line configures it

# a grading process's result.json (its logs are cut to 100,000 characters each)
MAX_RESULT_BYTES = 16 << 20


class Item(NamedTuple):
    """A notebook to grade: which, the submitted file, its fingerprint (reuse), and the digest of
    the student's whole submission (the salt of its hidden inputs)."""

    notebook: str
    path: Path
    fingerprint: str
    submission: str


def read_outcome(job: JobFolder) -> JobOutcome:
    """A local job's outcome, through its one parser (``{}``: none was written, or one too
    large)."""
    return JobOutcome.from_json(read_json(job.result, MAX_RESULT_BYTES))


def finish_record(
    course: Course,
    out: Path,
    record: Record,
    job: Path,
    outcome: JobOutcome,
    killed: bool,
    log: str,
    options: Options,
    secrets: dict[str, str],
) -> Record:
    """A job folder's outcome as the record (scores, ideas, status, feedback page) and the kept
    notebooks."""
    student, notebook = record.student_id, record.notebook
    text = outcome.log() + log
    job, kept_in = JobFolder(job, course.assignment), Out(out, course.assignment)
    graded = job.autograded(student, notebook)
    kept = kept_in.autograded(student, notebook)  # what formgrader shows
    kept.unlink(missing_ok=True)
    # formgrader counts submissions there
    _keep(job.submitted(student, notebook), kept_in.submitted(student, notebook))
    if killed:
        record = record.but(status="timeout", detail=f"killed after {options.notebook_timeout} s")
    elif outcome.out_of_memory and outcome.scores is None:
        record = record.but(
            status="out_of_memory",
            detail=f"over the {options.memory_limit / GiB:g} GiB limit: the kernel was stopped",
        )
    elif not graded.is_file() or outcome.scores is None:
        # why it stopped, as the worker wrote it where it caught it; with no word from the worker,
        # an error whose detail is the last error line of its logs (a status is never read from log
        # text)
        record = record.but(
            status=outcome.status or "error", detail=(outcome.detail or last_error(text))[:300]
        )
    else:
        record = _graded_record(course, kept_in, record, job, outcome, options, secrets)
        keep_for_display(
            graded, kept, edition_master(kept_in.master, record.edition or "en"), course.assignment
        )
    if record.status != "graded":
        log_copy = kept_in.notebook_log(student, notebook)
        log_copy.parent.mkdir(parents=True, exist_ok=True)
        log_copy.write_text(text[-200_000:], encoding="utf-8")
    return record


def _graded_record(
    course: Course,
    out: Out,
    record: Record,
    job: JobFolder,
    outcome: JobOutcome,
    options: Options,
    secrets: dict[str, str],
) -> Record:
    """A graded notebook's record: the judge's scores and ideas, the notes on it, its feedback
    page's data kept."""
    student, notebook = record.student_id, record.notebook
    record = record.but(
        scores=outcome.scores, manual=outcome.manual, timings=outcome.timings, ideas=outcome.ideas()
    )
    notes = []
    if outcome.out_of_memory or outcome.runner_out_of_memory:
        notes.append(
            f"part of it went over the {options.memory_limit / GiB:g} GiB memory limit "
            "and was stopped"
        )
    if outcome.load_errors:
        notes.append(
            f"{len(outcome.load_errors)} cell(s) of its code failed when loaded for the judge"
        )
    # the page's data: the page itself is rendered once the batch knows its late line (write_pages)
    if not keep_page_data(
        job.feedback(student, notebook, ".json"),
        out,
        student,
        notebook,
        job.autograded(student, notebook),
        secrets,
    ):
        out.page(student, notebook).unlink(missing_ok=True)  # an earlier run's page
        notes.append("feedback could not be generated: " + last_error(outcome.feedback_log()))
    return record.but(detail="; ".join(notes))


def _keep(source: Path, target: Path) -> None:
    """Copy a notebook into OUT's nbgrader course folder (atomically)."""
    if source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target.with_suffix(".tmp"))
        os.replace(target.with_suffix(".tmp"), target)


def grade_student(
    course: Course,
    master: Path,
    out: Path,
    student: str,
    items: list[Item],
    options: Options,
    on_done=lambda record: None,
    secrets: dict[str, str] | None = None,
) -> list[Record]:
    """Grade a student's notebooks here: run_student grades them, and each finished one is
    turned into its record, feedback page and kept notebooks under ``out``, signed and saved."""
    records = []

    def finished(record: Record, job: Path, killed: bool = False, log: str = "") -> None:
        """Record one finished (or stopped) notebook at once, so an interruption keeps it."""
        seconds = elapsed_since(job)
        outcome = read_outcome(JobFolder(job, course.assignment))
        record = finish_record(
            course, out, record, job, outcome, killed, log, options, secrets or {}
        )
        records.append(save_record(out, record, seconds))
        on_done(records[-1])
        shutil.rmtree(job, ignore_errors=True)

    # refused before it ran (unreadable), or its worker never started
    def fail(record: Record) -> None:
        records.append(save_record(out, record, 0.0))
        on_done(records[-1])

    entries = []
    for item in items:
        record = new_record(
            student, item.notebook, file=safe_text(item.path.name), fingerprint=item.fingerprint
        )
        entries.append((record.but(submission=item.submission), item.path))
    run_student(course, master, out, student, entries, options, finished, fail)
    return records


class GraderFault(GraderError):
    """A student's grading raised twice: ``kept`` records were kept, ``left`` items were not
    graded."""

    def __init__(self, kept: list[Record], left: list, cause: BaseException):
        super().__init__(str(cause))
        self.kept, self.left, self.cause = kept, left, cause


class Ran(NamedTuple):
    """What an executor ran: the saved records, and where the jobs ran (summary.json's ``cluster``;
    None on this machine)."""

    records: list[Record]
    where: ClusterInfo | None = None


def grade_locally(
    course: Course,
    master: Path,
    out: Path,
    by_student: dict,
    options: Options,
    done,
    fault,
    secrets: dict[str, str],
) -> Ran:
    """The local executor: each student's jobs on a pool of ``options.workers`` threads, each
    thread driving its own worker processes. A student whose grading raises (a fault of the
    grader, not of the submission) is graded once more, the notebooks already settled kept; when
    it raises again the rest goes to ``fault``. Each fault's traceback is kept in OUT/logs."""
    records: list[Record] = []

    def attempt(student: str, items: list) -> list[Record]:
        kept: list[Record] = []

        def on_done(record: Record) -> None:
            kept.append(record)
            done(record)

        def left() -> list:
            return [item for item in items if item[0] not in {r.notebook for r in kept}]

        for tries in (1, 2):
            try:
                grade_student(course, master, out, student, left(), options, on_done, secrets)
                break
            except Exception as exc:
                keep_fault(out, student, exc, again=tries == 1)
                if tries == 2:
                    raise GraderFault(kept, left(), exc) from exc
        return kept

    INTERRUPTED.clear()
    with ThreadPoolExecutor(max_workers=max(1, options.workers)) as pool:
        futures = {pool.submit(attempt, s, items): (s, items) for s, items in by_student.items()}
        try:
            for future in as_completed(futures):
                try:
                    records.extend(future.result())
                except GraderFault as failed:  # the rest goes on
                    records.extend(failed.kept)
                    fault(futures[future][0], failed.left, failed.cause)
                except Exception as exc:
                    fault(*futures[future], exc)
        except BaseException:
            # before the kill: a thread that sees its worker die must not record the notebook
            INTERRUPTED.set()
            pool.shutdown(wait=False, cancel_futures=True)
            kill_live_runs()
            raise
    return Ran(records)


class Executor(Protocol):
    """Where a batch's students are graded, chosen once by the command: this machine
    (:class:`LocalExecutor`) or a Dask cluster (``executors.cluster.ClusterExecutor``). The batch
    asks it the same four things, whichever it is."""

    def check(self, options: Options) -> None:
        """Raise ValueError when ``options`` are not for this executor (before anything runs)."""

    def prestart(self) -> None:
        """Start, while the batch sets up, what its workers need (nothing, where there is none)."""

    def sandbox(self, out: Path, options: Options) -> SandboxInfo:
        """The sandbox's settings (summary.json), checked where the learner's code will run."""

    def prepare(self, course: Course, master: Path, out: Path, options: Options) -> None:
        """Write what its workers read, before the first starts."""

    def run(
        self,
        course: Course,
        master: Path,
        out: Path,
        by_student: dict[str, list[Item]],
        options: Options,
        done,
        fault,
        secrets: dict[str, str],
    ) -> Ran:
        """Grade ``by_student``: each finished notebook to ``done(record)``, a student whose grading
        failed to ``fault(student, items, exc)``. Returns (the saved records, what summary.json says
        of where they ran, or None)."""


class LocalExecutor:
    """This machine: a pool of ``options.workers`` threads, each driving a student's worker
    processes (:func:`grade_locally`), forked from a server started while the batch sets up."""

    def check(self, options: Options) -> None:
        if options.scheduler:
            raise ValueError(
                "options.scheduler needs a cluster executor: pass "
                "executor=executors.cluster.ClusterExecutor() (the grade command "
                "does)"
            )

    def prestart(self) -> None:
        start_worker_server()  # it imports what workers need while the rest of the set-up runs

    def sandbox(self, out: Path, options: Options) -> SandboxInfo:
        return sandbox_settings(out, options)

    def prepare(self, course: Course, master: Path, out: Path, options: Options) -> None:
        layout = Out(out)
        write_json_atomic(
            layout.worker_settings, job_settings(course, master, layout.sandbox, options).to_json()
        )

    def run(self, course, master, out, by_student, options, done, fault, secrets) -> Ran:
        return grade_locally(course, master, out, by_student, options, done, fault, secrets)


def grade_batch(
    course: Course,
    submissions: Path,
    out: Path,
    options: Options = Options(),
    executor: Executor | None = None,
    late: LateSpec | None = None,
    absent: list[str] | tuple[str, ...] = (),
    intake: IntakeFacts | None = None,
    found: dict[str, Found] | None = None,
) -> Summary:
    """Grade every student folder under ``submissions``; write grades.csv, feedback/,
    log.jsonl and summary.json under ``out``. Returns the summary.

    ``executor`` runs the students' jobs (:class:`Executor`). The default, :class:`LocalExecutor`,
    runs them in a pool of ``options.workers`` threads here; the command line passes
    ``executors.cluster.ClusterExecutor()`` for ``--scheduler``. ``late``: the deadlines, the late
    policy and the submission times (ledger/late.py); penalties are worked out on every run, never
    cached, so a changed deadline applies to results reused from an earlier run, and once per run,
    on the scores the table counts. ``absent``: students on the roster who sent nothing (a row of
    ``missing`` notebooks each). ``intake``: what this run's intake found (the LMS's late marks);
    without it, what the last intake left in OUT. ``found``: each student's notebooks as the intake
    decided them (a download it placed); a student folder it did not decide is read here, once, by
    ``matching.match_notebooks``."""
    executor = executor or LocalExecutor()
    executor.check(options)
    if not submissions.is_dir():
        raise UnusableInput(f"{submissions} is not a folder of student folders")
    students = sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students and not absent:
        raise UnusableInput(
            f"{submissions} holds no student folders (expected "
            "SUBMISSIONS/<student_id>/<notebook>.ipynb)"
        )
    ledger = Ledger(out, course, intake)
    try:
        out.mkdir(parents=True, exist_ok=True)
        ledger.out.probe.write_text("ok")
        ledger.out.probe.unlink()
    except OSError as exc:
        raise UnusableInput(f"cannot write to {out}: {exc}") from exc
    if out.resolve() == submissions.resolve() or submissions.resolve() in out.resolve().parents:
        raise UnusableInput("OUT must not be inside SUBMISSIONS")
    with _locked(ledger.out):
        return _grade_locked(
            course,
            submissions,
            students,
            ledger,
            options,
            executor,
            late or LateSpec(),
            absent,
            found or {},
        )


@contextmanager
def _locked(out: Out):
    """One grading run per OUT folder at a time."""
    handle = open(out.lock, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise UnusableInput(
            f"another grading run is using {out.root} (it holds {out.lock}); wait for it "
            "to finish, or grade into another folder"
        ) from None
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def sandbox_settings(out: Path, options: Options) -> SandboxInfo:
    """Check that the sandbox runs here (or that the instructor chose to go without)."""
    if not options.sandbox:
        log.warning(
            "grading WITHOUT the sandbox (--no-sandbox): submissions run with your "
            "rights, can read "
            "and change your files, and can reach the network. Use this only for code you trust."
        )
        return SandboxInfo(
            enabled=False, warning="graded with --no-sandbox: submissions were not isolated"
        )
    from .run.sandbox import Limits, Sandbox, probe

    limits = Limits(options.memory_limit, options.process_limit)
    home = Out(out).sandbox
    why = probe(home, limits)
    if why:
        raise UnusableInput(
            f"the grading sandbox cannot run here: {why}. Submissions are untrusted code; grade on "
            "Linux with user namespaces (bubblewrap), or pass --no-sandbox to grade code you trust."
        )
    box = Sandbox(home, limits)
    try:
        return box.describe()
    finally:
        box.close()


def _refused(folder: Path) -> tuple[str, str] | None:
    """(why, the folder's name as shown) when a folder's name cannot be a student id."""
    if STUDENT_ID.fullmatch(folder.name) and not folder.is_symlink():
        return None
    why = (
        "a student folder may not be a symbolic link"
        if folder.is_symlink()
        else ("use letters, digits, '_', '.', '@', '+' or '-'")
    )
    return why, folder.name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class Sorted(NamedTuple):
    """The student folders read: a record for each notebook settled without grading (a refused id, a
    missing notebook, an unreadable folder, a reused result), the matching notes per student, and
    the notebooks left to grade, per student."""

    records: list[Record]
    notes: dict[str, list[str]]
    todo: dict[str, list[Item]]


def _intake(
    course: Course,
    submissions: Path,
    students: list[Path],
    ledger: Ledger,
    options: Options,
    digest: str,
    found: dict[str, Found],
) -> Sorted:
    """Read every student folder: a row for each refused id, missing notebook, unreadable folder and
    reused result; the notebooks left to grade, per student (notebook, file, fingerprint); the
    matching notes. Writes the refused folders' names (``Out.rejected``). Whatever one folder holds
    costs only its student."""
    records: list[Record] = []
    notes: dict[str, list[str]] = {}
    by_student: dict[str, list[Item]] = {}  # the notebooks to grade now
    rejected = []
    for folder in students:
        student = safe_text(folder.name)
        refused = _refused(folder)
        if refused:
            rejected.append(
                {"student_id": rejected_id(folder.name), "reason": refused[0], "folder": refused[1]}
            )
            records += [
                new_record(rejected[-1]["student_id"], nb, "invalid_student_id", refused[0])
                for nb in course.notebooks
            ]
            continue
        try:
            done_here, todo = _sort_folder(course, folder, ledger, options, digest, found, notes)
        # whatever a folder holds, it costs its own student, never the class
        except Exception as exc:
            why = safe_text(f"{type(exc).__name__}: {exc}")
            records += [
                new_record(student, nb, "invalid_submission", why) for nb in course.notebooks
            ]
            continue
        records += done_here
        if todo:
            by_student[student] = todo
    for name in sorted(
        p.name for p in submissions.iterdir() if p.name.startswith(".") and p.is_dir()
    ):
        folder = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        rejected.append(
            {
                "student_id": None,
                "reason": "a hidden folder (its name starts with '.'): not graded",
                "folder": folder,
            }
        )
    write_json_atomic(ledger.out.rejected, rejected)
    return Sorted(records, notes, by_student)


def _sort_folder(
    course: Course,
    folder: Path,
    ledger: Ledger,
    options: Options,
    digest: str,
    found: dict[str, Found],
    notes: dict[str, list[str]],
) -> tuple[list[Record], list[Item]]:
    """One accepted student folder: (a record for each missing notebook and reused result, the
    notebooks left to grade); its matching notes into ``notes`` as soon as they are known. Raises
    whatever the folder's reading raises."""
    student = safe_text(folder.name)
    chosen, found_notes = found.get(folder.name) or match_notebooks(
        folder, course.notebooks, _ids(course), max_bytes=options.max_notebook_bytes
    )
    notes[student] = [safe_text(note) for note in found_notes]
    todo, done_here = [], []
    whole = submission_digest(chosen, options.max_notebook_bytes)
    for notebook, path in chosen.items():
        if path is None:
            done_here.append(
                new_record(
                    student, notebook, "missing", f"{notebook}.ipynb not found in the submission"
                )
            )
            continue
        print_ = fingerprint(path, f"{digest}|{whole}", options)
        cached = cached_record(ledger.root, student, notebook, print_)
        if cached and not page_kept(ledger.out, cached):
            # graded before pages were rendered from their data: graded again, to render its page
            cached = None
        if cached:
            done_here.append(cached.but(cached=True))
        else:
            todo.append(Item(notebook, path, print_, whole))
    return done_here, todo


class Batch(NamedTuple):
    """A batch set up: the grading master, the gradebook's URL and its one writer, the sandbox's
    settings."""

    master: Path
    db_url: str
    writer: gradebook.Writer
    sandbox: SandboxInfo


def _set_up_batch(course: Course, ledger: Ledger, options: Options, executor: Executor) -> Batch:
    """The grading master in OUT, the gradebook's URL and its writer, and the sandbox's settings.
    The worker server, the gradebook and the sandbox's check start together: each waits on its
    own process or thread, so none waits for another."""
    executor.prestart()
    master = grading_master(course, ledger.root)
    db_url = gradebook.resolve_url(ledger.out, options.db_url)
    # the course gradebook, written by this process only (one writer thread), prepared meanwhile
    writer = gradebook.Writer(db_url, master / Out.GRADEBOOK, course.assignment, wait=False)
    try:
        sandbox = executor.sandbox(ledger.root, options)
        writer.ready()
    except gradebook.GradebookError as exc:
        raise UnusableInput(str(exc)) from None
    except BaseException:
        with contextlib.suppress(gradebook.GradebookError):
            writer.close()
        raise
    return Batch(master, db_url, writer, sandbox)


@functools.lru_cache(maxsize=4)
def _ids(course: Course) -> dict[str, set[str]]:
    """Every grade id (test and exercise cells) of each notebook: how a notebook a platform renamed
    is known."""
    return {name: grade_ids(course.solutions / f"{name}.ipynb") for name in course.notebooks}


def _grade_locked(
    course: Course,
    submissions: Path,
    students: list[Path],
    ledger: Ledger,
    options: Options,
    executor,
    late: LateSpec,
    absent,
    found,
):
    out = ledger.root
    batch = _set_up_batch(course, ledger, options, executor)
    # read here, once: the workers' threads then share it instead of each reading it at once
    page_words(course)
    graded_cells = exercises(course)
    digest = course.sources_digest()
    secrets = secret_lines(course)
    signing_key(out)
    gradebook.write_course_config(ledger.out, batch.db_url, batch.master, course.assignment)
    executor.prepare(course, batch.master, out, options)

    records, notes, by_student = _intake(
        course, submissions, students, ledger, options, digest, found
    )
    unseen = sorted(set(absent) - {folder.name for folder in students})
    records += [
        new_record(s, nb, "missing", "nothing was submitted (on the roster)")
        for s in unseen
        for nb in course.notebooks
    ]

    install_sigterm()
    from tqdm import tqdm

    bar = tqdm(
        total=sum(len(items) for items in by_student.values()),
        desc="grading notebooks",
        unit="nb",
        disable=not options.progress,
    )
    ledger.save_late_spec(late)
    # each page as its notebook settles
    drafts = Drafts(ledger.out, course, graded_cells, secrets, late.policy)
    settled = _Settled(ledger, late, batch.writer, records, bar, drafts)
    for record in records:  # reused and missing ones: a new or changed gradebook gets them too
        settled.in_gradebook(record)
    where, book = _run_jobs(course, batch, out, by_student, options, executor, settled, secrets)
    n_students = len(students) + len(unseen)
    return _finish_batch(
        course,
        ledger,
        graded_cells,
        records,
        notes,
        n_students,
        batch.sandbox,
        batch.db_url,
        book,
        late,
        where,
        secrets,
        drafts,
    )


class _Settled:
    """Each notebook of the batch as it is settled: into the gradebook at once, with its submission
    time (its penalty is settled once the batch is done, on the score the table counts, a person's
    too), and onto the progress bar; a grader fault's rows among the batch's ``records``."""

    def __init__(
        self,
        ledger: Ledger,
        late: LateSpec,
        writer: gradebook.Writer,
        records: list[Record],
        bar,
        drafts: Drafts,
    ):
        self.ledger, self.late, self.writer, self.records, self.bar, self.drafts = (
            ledger,
            late,
            writer,
            records,
            bar,
            drafts,
        )

    def in_gradebook(self, record: Record) -> None:
        if record.status == "invalid_student_id":
            return
        if not record.graded:  # no autograded notebook left from an earlier run
            self.ledger.out.autograded(record.student_id, record.notebook).unlink(missing_ok=True)
        when = (
            submitted_at(self.late, record.student_id, record.notebook)
            if record.submitted
            else None
        )
        self.writer.put(record.but(late=LateFacts(submitted_at=when.isoformat()) if when else None))

    def done(self, record: Record) -> None:
        self.in_gradebook(record)
        self.bar.update(1)
        self.bar.set_postfix_str(f"{record.student_id}/{record.notebook}", refresh=False)
        self.drafts.draft(record)

    def fault(self, student: str, items: list, exc: BaseException) -> None:
        """A grader fault for one student: a row for each notebook (not saved: the next run grades
        them again)."""
        kept = self.ledger.out.faults(student)
        where = f" (traceback: {self.ledger.out.shown(kept)})" if kept.is_file() else ""
        for notebook, *_rest in items:
            self.records.append(
                new_record(
                    student,
                    notebook,
                    "error",
                    safe_text(f"a fault of the grader: {type(exc).__name__}: {exc}"[:400] + where),
                )
            )
            self.in_gradebook(self.records[-1])
            self.bar.update(1)


def _run_jobs(
    course: Course,
    batch: Batch,
    out: Path,
    by_student,
    options: Options,
    executor,
    settled: _Settled,
    secrets,
) -> tuple:
    """The executor grades ``by_student``, its records added to the batch's; then the gradebook's
    writer closed. Returns (where the jobs ran, the gradebook's ``BookInfo``)."""
    where = None  # what the executor says of where the jobs ran (summary.json)
    try:
        if by_student:
            graded, where = executor.run(
                course, batch.master, out, by_student, options, settled.done, settled.fault, secrets
            )
            settled.records.extend(graded)
    finally:
        settled.bar.close()
        try:
            batch.writer.close()  # every finished notebook is in the gradebook (also on Ctrl-C)
            gradebook_error = None
        except gradebook.GradebookError as exc:
            gradebook_error = str(exc)
    return where, BookInfo(gradebook.mask_url(batch.db_url), batch.writer.merged, gradebook_error)


def _finish_batch(
    course: Course,
    ledger: Ledger,
    cells,
    records,
    notes,
    n_students,
    sandbox,
    db_url,
    book,
    late,
    where,
    secrets,
    drafts=None,
) -> Summary:
    """After the batch: the gradebook read once (a person's scores, the submissions' times), the
    penalty settled once on the scores the table counts, the gradebook given it, the tables written,
    and every page rendered once with a person's scores and its late line."""
    stored = gradebook.Book()
    if book.error:
        log.warning(
            f"{book.error}. The results are kept in {ledger.out.state}; run the same "
            "command again to record them."
        )
    else:
        try:
            stored = gradebook.read_book(db_url, course.assignment)
            gradebook.keep_submitted_times(stored, ledger.out)
        except gradebook.GradebookError as exc:
            book = dataclasses.replace(book, error=str(exc))
    table, records = grades_table(cells, records, stored, late, ledger.intake.late_in_lms)
    if not book.error and late.active:
        book = late_in_gradebook(db_url, course.assignment, table, late, book)
    summary = summarize(course, cells, table, records, notes, n_students, sandbox, book, where)
    write_tables(ledger.out, table, records, summary)
    # every page rendered once: a person's scores from the gradebook, the late line of the penalty
    # the table settled
    removed = write_pages(ledger.out, course, cells, records, secrets, late.policy, stored, drafts)
    noted = note_redactions(records, removed)
    # a page quoted the grader's secrets (rare): the log and the summary say so too
    if noted != records:
        summary = summarize(course, cells, table, noted, notes, n_students, sandbox, book, where)
        write_log(ledger.out, noted)
        write_summary(ledger.out, summary)
    return summary


def rejected_id(name: str) -> str:
    """A stand-in id for a folder whose name is refused: safe in a spreadsheet, the same on every
    run, and never a valid id (a folder named like it is refused itself). It names no file: a
    refused folder is not graded. The folder's name itself is kept only with the refused folders."""
    raw = name.encode("utf-8", "surrogateescape")
    # ':' is in no valid id: no folder can take it
    return f"rejected:{hashlib.sha256(raw).hexdigest()[:10]}"
