"""One student's grading run: each submitted notebook prepared in a course folder of its own, one
worker process taking them one after the other under the wall-clock limit, and a new worker for
those left after a kill. The same loop runs on a cluster's worker (executors/cluster.py)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import nbformat

from .. import settings
from ..course import Course, kill_tree, reap
from ..errors import GraderError
from ..ledger.layout import JobFolder, Out
from ..matching import (
    changed_answers,
    grade_ids,
    last_error,
    read_notebook,
    read_tail,
    repair_cells,
)
from ..model import MAX_NOTEBOOK_BYTES, GiB, Options, Record
from ..publish.master import edition_master, submission_edition
from .job import WorkerSettings
from .launch import start_worker

# a grading process's address space, at least (its soft limit, and above the kernel's; the kernel
# and the runner have their own, in the sandbox): it holds nbgrader, one notebook and its capped
# outputs
WORKER_MEMORY = 3 * GiB

MAX_LOG_BYTES = 200_000  # bytes of a worker's log read back (its end)


def _prepare(
    course: Course,
    master: Path,
    out: Path,
    student: str,
    record: Record,
    path: Path,
    max_bytes: int = MAX_NOTEBOOK_BYTES,
) -> tuple[Record, Path]:
    """A fresh nbgrader course folder holding one submitted notebook (raises on an unreadable
    one, and on one over ``max_bytes`` before reading it), and ``record`` with what reading it
    found: its edition, cells repaired, and the answer cells changed since the last grading (a
    manual score on one of them is then flagged for review)."""
    notebook = record.notebook
    nb = read_notebook(path, max_bytes)
    edition = submission_edition(nb, master, course.assignment, notebook)
    master = edition_master(master, edition)
    repairs = repair_cells(
        nb, grade_ids(master / "source" / course.assignment / f"{notebook}.ipynb")
    )
    base = Out(out, course.assignment)
    changed = changed_answers(base.submitted(student, notebook), nb)
    record = record.but(
        edition=edition,
        matching_notes=tuple(repairs) if repairs else None,
        changed_answers=tuple(changed) if changed is not None else None,
    )
    job = base.job(student, notebook)
    if job.root.exists():
        shutil.rmtree(job.root)
    job.root.mkdir(parents=True)
    # the salt of its hidden random inputs (job.py): the student's whole submission as sent (every
    # notebook's bytes before nbformat rewrites them), or this file's bytes where no submission
    # digest is known
    salt = record.submission or hashlib.sha256(path.read_bytes()).hexdigest()
    job.submission_digest.write_text(salt)
    job.edition.write_text(edition)  # the language its kernel and feedback page use (job.py)
    master_folder = JobFolder(master, course.assignment)
    shutil.copy(master_folder.config, job.config)
    # the job folder is the project root for the graded notebook: files it writes stay in the job
    shutil.copy(course.root / "course.toml", job.root / "course.toml")
    shutil.copy(master_folder.gradebook, job.gradebook)
    shutil.copytree(master / "source", job.root / "source")
    submitted = job.submitted(student, notebook)
    submitted.parent.mkdir(parents=True)
    nbformat.write(nb, submitted)
    return record, job.root


# Set while the batch is being stopped (Ctrl-C, SIGTERM): its workers are killed, and a notebook
# they were on is left unrecorded (not saved as an error the next run would reuse).
INTERRUPTED = threading.Event()


class Stopped(GraderError):
    """A student's grading was called off (a cluster task the batch cancelled): its processes were
    killed."""


def run_student(
    course: Course,
    master: Path,
    out: Path,
    student: str,
    entries: list[tuple[Record, Path]],
    options: Options,
    finished,
    fail,
    stop=None,
) -> None:
    """Grade a student's notebooks (``entries``: (record, submitted file)): one worker process runs
    them one after the other, each in its own course folder (``Out.job``: ``out`` is OUT, or a
    cluster task's folder laid out as OUT). A notebook past the wall-clock limit has the worker and
    its kernel killed; a new worker then takes the notebooks that are left. Each notebook ends in
    ``finished(record, job folder, killed, log)`` or, when it never ran, ``fail(record)``. The same
    loop runs on a cluster's worker (cluster.py), which passes ``stop``: when it returns True the
    grading process is killed and Stopped raised."""
    base = Out(out)
    pending = []
    for record, path in entries:
        try:
            pending.append(
                _prepare(course, master, out, student, record, path, options.max_notebook_bytes)
            )
        except Exception as exc:  # not JSON, not a notebook: a grade of 0, not a crash
            fail(
                record.but(
                    status="invalid_notebook", detail=f"{type(exc).__name__}: {str(exc)[:300]}"
                )
            )
    # the worker dies with this process (parent-death signal in job.py), however this one ends
    env = {settings.CELL_TIMEOUT: str(options.cell_timeout), settings.PARENT_PID: str(os.getpid())}
    false_starts = 0
    try:
        while pending:
            before = len(pending)
            log_path = base.worker_log(student)
            with open(log_path, "w", encoding="utf-8") as log:
                proc = start_worker(
                    [str(base.worker_settings), student, *[str(job) for _, job in pending]],
                    base.work_of(student),
                    env,
                    log_path,
                    log,
                )
                try:
                    current, killed = _watch(
                        proc, pending, options.notebook_timeout, finished, stop
                    )
                finally:
                    reap(proc)
                    _sweep(base.sandbox_ledger(student))
            worker_log = read_tail(log_path, MAX_LOG_BYTES)
            _take_finished(pending, finished)  # any that finished after the last poll
            # the batch is stopping (Ctrl-C, SIGTERM): what it cut short is
            if INTERRUPTED.is_set():
                return  # not recorded, so that the next run grades it
            stopped = [(record, job) for record, job in pending if job == current]
            for record, job in stopped:  # killed at the limit, or the worker broke during it
                finished(record, job, killed, worker_log)
                pending.remove((record, job))
            # the worker died before starting anything (no learner code ran yet)
            if len(pending) == before:
                false_starts += 1
                # a fault of the grader's own start-up: one more worker, then no loop
                if false_starts == 1:
                    continue
                for record, _job in pending:
                    fail(record.but(status="error", detail=last_error(worker_log)))
                break
    finally:
        shutil.rmtree(base.work_of(student), ignore_errors=True)


def _sweep(ledger: Path) -> None:
    """After a worker ends, however it ended, remove what its sandboxes left behind."""
    if ledger.is_file():
        from .sandbox import sweep

        sweep(ledger)
        ledger.unlink(missing_ok=True)


def _take_finished(pending: list, finished) -> None:
    for record, job in list(pending):
        if JobFolder(job, "").result.is_file():
            finished(record, job)
            pending.remove((record, job))


def _watch(proc, pending: list, limit: float, finished, stop=None) -> tuple[Path | None, bool]:
    """Wait for the worker, taking each notebook as it finishes. Returns (the job it was
    on when it stopped, whether it was killed at the wall-clock limit)."""
    while True:
        _take_finished(pending, finished)
        current = next((job for _, job in pending if JobFolder(job, "").started.is_file()), None)
        if proc.poll() is not None:
            return current, False
        if current is not None and elapsed_since(current) > limit:
            kill_tree(proc.pid)
            return current, True
        if stop is not None and stop():
            kill_tree(proc.pid)
            raise Stopped("called off")
        _pause(proc, 0.2)


def _pause(proc, seconds: float) -> None:
    """Wait ``seconds``, or less: until the worker ``proc`` ends (its student's next one then starts
    at once, not at the next look)."""
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass


def elapsed_since(job: Path) -> float:
    """Seconds since the worker started ``job`` (0 while the marker is being written)."""
    try:
        return max(0.0, time.time() - float(JobFolder(job, "").started.read_text()))
    except (OSError, ValueError):
        return 0.0


def job_settings(course: Course, master: Path, home: Path, options: Options) -> WorkerSettings:
    """What a grading process (job.py) reads (``Out.worker_settings``): made from ``options`` each
    run, never read back into them (which source wins: settings.choose)."""
    return WorkerSettings(
        assignment=course.assignment,
        judge=str(master / "judge.json"),
        sandbox=options.sandbox,
        home=str(home),
        memory_limit=options.memory_limit,
        process_limit=options.process_limit,
        cell_timeout=options.cell_timeout,
        worker_memory_limit=max(WORKER_MEMORY, options.memory_limit + GiB),
    )
