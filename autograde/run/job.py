"""A grading worker: ``python -m autograde.run.job SETTINGS STUDENT JOBDIR...``.

Each JOBDIR is an nbgrader course folder that holds one submitted notebook. For each in
turn the worker writes JOBDIR/started (the time), then:

1. runs nbgrader's autograde in-process, the learner's kernel in the sandbox; the test
   cells it restores hold the public checks only (the master course was built without
   the hidden tests). One kernel, started before the first notebook, serves the student's
   notebooks in turn and is reset between them (kernels.py);
2. has the trusted judge run the hidden tests against the learner's functions, which a
   sandboxed runner serves, and records the judge's scores in the job's gradebook through
   nbgrader's Gradebook API, with the ideas' results written under each test cell;
3. runs nbgrader's feedback, and writes JOBDIR/result.json.

The parent watches ``started`` and kills this process, its kernel and its runner when a
notebook runs past the wall-clock limit; when the parent itself dies, this process dies too
(parent-death signal), and with it the sandboxed kernel and runner.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import nbformat

from tools.i18n import EDITIONS

from .. import settings as environment
from ..judging import judge
from ..judging.ideas import JudgeSpec
from ..ledger.layout import JobFolder, Out
from ..model import CellResult, JobOutcome, JsonRecord, StepLog
from .sandbox import Limits, Sandbox

# the untrusted side, bound read-only into the sandbox
RUNNER = Path(__file__).resolve().parents[1] / "judging" / "runner.py"


@dataclass(frozen=True)
class WorkerSettings(JsonRecord):
    """What a grading process reads (``Out.worker_settings``, or a cluster task's folder): the
    assignment, the judge's spec (the hidden tests and answers), the sandbox and its home, the
    limits. Made from the grading options each run (``run.student.job_settings``), never read back
    into them."""

    assignment: str
    judge: str
    sandbox: bool
    home: str
    memory_limit: int
    process_limit: int
    cell_timeout: int
    worker_memory_limit: int = 0

    @classmethod
    def from_json(cls, data: dict) -> WorkerSettings:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


class Scored(NamedTuple):
    """The judge's score of each automatic cell, and the answers a person grades (None: written, 0:
    left as released)."""

    scores: dict[str, float]
    manual: dict[str, float | None]


class Worker:
    def __init__(self, settings: WorkerSettings, student: str, ledger: Path):
        self.settings, self.student = settings, student
        spec = Path(settings.judge).read_bytes()
        self.spec = JudgeSpec.from_json(json.loads(spec))
        # the hidden tests and answers: learners have neither
        self.spec_digest = hashlib.sha256(spec).hexdigest()
        self.box = None
        if settings.sandbox:
            self.box = Sandbox(
                Path(settings.home), Limits(settings.memory_limit, settings.process_limit), ledger
            )
            os.environ["JUPYTER_PATH"] = str(self.box.write_kernelspec())
            os.environ[environment.SANDBOX] = "1"
        self._runner_job = None
        self.session = judge.Session(self._start_runner, float(settings.cell_timeout))
        self.runner_out_of_memory = False
        self.kernel = None

    def lend_kernel(self, jobdirs: list[Path]) -> None:
        """One kernel for this student's notebooks (kernels.py), and the judge's runner, both
        launched now so that they boot while nbgrader starts and the first notebook runs."""
        from .kernels import StudentKernel
        from .preprocessors import CappedExecute
        from .sandbox import KERNEL_NAME

        self.kernel = StudentKernel(self.box, KERNEL_NAME if self.box else "python3")
        self.jobdirs = list(jobdirs)
        CappedExecute.shared_kernel = self.kernel
        self.kernel.start(self.jobdirs[0])
        # the judge's runner boots meanwhile too, and runs the set-up
        self.session.warm(self._setup_cells(self.jobdirs[0]))

    def _setup_cells(self, jobdir: Path) -> list[str]:
        """The set-up cells (tagged ``imports``) of the course's own source of the notebook in
        ``jobdir``: the runner runs them as it boots, so that the course runtime's imports (and
        IPython's, which the runner uses to read cells) are done before the first judge."""
        source = jobdir / "source" / self.settings.assignment / f"{jobdir.name}.ipynb"
        try:
            nb = nbformat.read(source, as_version=4)
        except (OSError, ValueError):
            return []
        return [
            c.source
            for c in nb.cells
            if c.cell_type == "code" and "imports" in c.metadata.get("tags", [])
        ]

    def _start_runner(self) -> judge.Runner:
        self._finish_runner_job()
        argv = [sys.executable, "-I", str(RUNNER)]
        env = {
            environment.PATH: environment.search_path(),
            "MPLBACKEND": "agg",
            "PYTHONDONTWRITEBYTECODE": "1",
            environment.GRADING: "autograde",
        }
        cwd = os.getcwd()
        if self.box:
            self._runner_job = self.box.job(
                f"{os.getpid()}-runner-{time.monotonic_ns()}", read_only=[str(RUNNER)]
            )
            argv, env, cwd = (
                self.box.command(argv),
                {**os.environ, **self._runner_job.env},
                str(self._runner_job.scratch),
            )
        return judge.Runner(argv, env, cwd, float(self.settings.cell_timeout))

    def _finish_runner_job(self) -> None:
        if self.box and self._runner_job:
            if self.session.runner is not None:
                self.session.runner.kill()
            self.runner_out_of_memory |= self.box.finish(self._runner_job)
            self._runner_job = None

    def close(self) -> None:
        if self.kernel is not None:
            self.kernel.stop()
        self.session.close()
        self._finish_runner_job()
        if self.box:
            self.box.close()

    def grade(self, jobdir: Path) -> JobOutcome:
        from nbgrader.apps import NbGraderAPI
        from nbgrader.coursedir import CourseDirectory
        from traitlets.config.loader import PyFileConfigLoader

        from .preprocessors import CappedExecute

        assignment, student = self.settings.assignment, self.student
        job = JobFolder(jobdir, assignment)
        os.chdir(jobdir)
        # a kernel nbgrader starts itself inherits it
        os.environ[environment.LANGUAGE] = edition_of(jobdir)
        if self.kernel is not None:
            # a no-op when it runs (the runtime folder nbgrader's config names)
            self.kernel.start(jobdir)
            # the public checks speak the submission's language
            self.kernel.use_language(edition_of(jobdir))
        config = PyFileConfigLoader(job.config.name, path=str(jobdir)).load_config()
        api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
        clock = time.monotonic()
        timings: dict = {}
        autograded = StepLog.from_json(api.autograde(assignment, student, force=True, create=True))
        over_output_limit = (
            CappedExecute.failure is not None and CappedExecute.failure.status == "output_limit"
        )
        if (
            self.kernel is not None
            and self.kernel.reused
            and not over_output_limit
            and (not autograded.success or self.kernel.out_of_memory() or self.kernel.oom_noted)
        ):
            # it failed in a kernel an earlier notebook had used: what that notebook left (in a
            # module, say) must not cost this one, so it runs again, in a fresh kernel, as if alone
            self.kernel.stop()
            self.kernel.oom_noted = False
            self.kernel.start(jobdir)
            autograded = StepLog.from_json(
                api.autograde(assignment, student, force=True, create=True)
            )
            timings["retried_in_fresh_kernel"] = 1
        # what stopped it, said where it was caught (grading reads it)
        stopped = CappedExecute.failure
        outcome = JobOutcome(autograded, timings=timings)
        if stopped is not None:
            outcome = dataclasses.replace(outcome, status=stopped.status, detail=stopped.detail)
        timings["autograde"] = round(time.monotonic() - clock, 3)
        if self.kernel is not None:
            # kernels started for this student up to the one that ran this notebook (not the next
            # one's)
            timings["kernel_starts"] = self.kernel.starts
            later = self.jobdirs[self.jobdirs.index(jobdir) + 1 :] if jobdir in self.jobdirs else []
            outcome = dataclasses.replace(
                outcome, out_of_memory=self.kernel.after_notebook(later[0] if later else None)
            )
        notebooks = sorted(job.autograded(student).glob("*.ipynb"))
        if autograded.success and len(notebooks) == 1:
            outcome = self._judged(api, job, notebooks[0], outcome)
        return outcome

    def _judged(self, api, job: JobFolder, notebook: Path, outcome: JobOutcome) -> JobOutcome:
        """The judge's results and scores of an autograded notebook, then nbgrader's feedback
        step."""
        self.runner_out_of_memory = False
        clock = time.monotonic()
        results, load_errors = self._judge(job.root, notebook)
        # each notebook is judged in a runner of its own (started while it ran in its kernel);
        # a runner that fails is restarted, and a restart reports whether it ran out of memory
        runner_out_of_memory = self.runner_out_of_memory or bool(
            self.box and self._runner_job and self.box.groups.out_of_memory(self._runner_job.name)
        )
        scores, manual = self._record(job.root, notebook.stem, results)
        self._fresh_runner(job.root)
        outcome.timings["judge"] = round(time.monotonic() - clock, 3)
        clock = time.monotonic()
        feedback = StepLog.from_json(
            api.generate_feedback(job.assignment, self.student, force=True)
        )
        outcome.timings["feedback"] = round(time.monotonic() - clock, 3)
        return dataclasses.replace(
            outcome,
            feedback=feedback,
            runner_out_of_memory=runner_out_of_memory,
            judge=results,
            load_errors=tuple(load_errors),
            scores=scores,
            manual=manual,
        )

    def _fresh_runner(self, jobdir: Path) -> None:
        """A new runner for the student's next notebook, booting while that notebook runs in its
        kernel: nothing one notebook's code left in the runner (a module, a global, a cache of
        the hidden inputs it saw) reaches the judging of another."""
        self.session.close()
        self._finish_runner_job()
        later = (
            self.jobdirs[self.jobdirs.index(jobdir) + 1 :]
            if jobdir in getattr(self, "jobdirs", [])
            else []
        )
        if later:
            self.session.warm(self._setup_cells(later[0]))

    def input_salt(self, jobdir: Path) -> str:
        """The salt of this submission's hidden random inputs (tools.checks.hidden_random): a digest
        of the student's whole submission as sent, every notebook's bytes (run.student._prepare
        wrote it), and of the hidden tests. The same submission always gets the same inputs; any
        change to any of its notebooks, a re-save included, other inputs for all of them; and
        without the hidden tests nobody can work out which."""
        submitted = JobFolder(jobdir, "").submission_digest.read_text(encoding="utf-8").strip()
        return hashlib.sha256(f"{self.spec_digest}|{submitted}".encode()).hexdigest()

    def _judge(self, jobdir: Path, path: Path) -> judge.Judged:
        from tools import checks

        notebook = path.stem
        spec = self.spec.notebooks[notebook]
        nb = nbformat.read(path, as_version=4)
        cells = judge.learner_cells(nb, set(spec.given))
        checks.set_input_salt(self.input_salt(jobdir))
        try:
            judged = judge.judge_notebook(spec.tests, self.spec.solutions, self.session, cells)
        finally:
            checks.set_input_salt(None)
        results = judged.results
        for cell in nb.cells:  # the ideas' results, under each test cell, for the feedback page
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid in results and cell.cell_type == "code":
                words = self.spec.translations.get(edition_of(jobdir), {})
                cell.outputs.append(
                    nbformat.v4.new_output(
                        "stream", name="stdout", text=ideas_report(results[gid], gid, words)
                    )
                )
        nbformat.write(nb, path)
        return judged

    def _record(self, jobdir: Path, notebook: str, results: dict[str, CellResult]) -> Scored:
        """Replace nbgrader's scores (public checks only) by the judge's, in the gradebook.
        Returns (the judge's scores, the answers a person grades: None when written, 0 when
        left as released, as nbgrader's autograde recorded them)."""
        from nbgrader.api import Gradebook

        assignment = self.settings.assignment
        with Gradebook(f"sqlite:///{JobFolder(jobdir, assignment).gradebook}") as gradebook:
            submitted = gradebook.find_submission_notebook(notebook, assignment, self.student)
            manual_ids = {cell.name for cell in submitted.notebook.solution_cells}
            manual = {}
            for grade in submitted.grades:
                if grade.name in manual_ids:  # a written answer: formgrader's, never the judge's
                    manual[grade.name] = (
                        None if grade.auto_score is None else float(grade.auto_score)
                    )
                elif grade.name in results:
                    grade.auto_score = results[grade.name].score
                elif grade.cell.max_score:
                    grade.auto_score = 0.0  # a grade cell the judge has no tests for earns nothing
            gradebook.db.commit()
            scores = {
                g.name: float(g.auto_score or 0.0)
                for g in submitted.grades
                if g.cell.max_score and g.name not in manual_ids
            }
            return Scored(scores, manual)


def ideas_report(
    result: CellResult, grade_id: str = "", words: dict[str, str] | None = None
) -> str:
    """What a learner reads under a test cell: each graded idea, passed or not, and why, in the
    submission's language (``words``: the feedback translations of its edition, empty for English).
    A failure message is rendered from its catalog keys and values (the judge's ``said``), so a
    Chinese page says it in Chinese with the values the English one shows."""
    from ..judging.ideas import render_message

    words = words or {}
    marks = {"passed": "✓", "failed": "✗", "error": "✗", "not_started": "…", "skipped": "·"}
    head = "Graded ideas (hidden tests, run outside your notebook): {score} / {points} points"
    lines = [words.get(head, head).format(score=f"{result.score:g}", points=f"{result.points:g}")]
    for idea in result.ideas:
        text = words.get(f"{grade_id}:{idea.id}", idea.text)
        lines.append(f"  {marks.get(idea.status, '?')} {text} [{idea.earned:g}/{idea.points:g}]")
        if idea.message and idea.status != "passed":
            message = (
                judge.shorten(render_message(idea.said, words, judge.MAX_TEXT))
                if words and idea.said
                else idea.message
            )
            lines.append(f"      → {message}")
    if result.status == "not_started":
        stub = "This TODO still raises NotImplementedError, so it earns no points yet."
        lines.append("  " + words.get(stub, stub))
    return "\n".join(lines) + "\n"


MAX_KERNEL_MESSAGE = 64 << 20


def edition_of(jobdir: Path) -> str:
    """The edition run.student._prepare recorded for this job (English when it recorded none)."""
    try:
        language = JobFolder(jobdir, "").edition.read_text(encoding="utf-8").strip()
    except OSError:
        return "en"
    return language if language in EDITIONS else "en"


def _cap_messages() -> None:
    """A kernel message over 64 MiB is refused by this process's sockets (ZeroMQ drops the
    connection), so one huge output cannot fill this trusted process's memory: the notebook
    then fails, at its own cost. Many smaller outputs are dropped as they arrive once a
    notebook has sent its share (preprocessors.CappedExecute)."""
    import zmq
    import zmq.asyncio

    original = zmq.asyncio.Context.__init__

    def capped(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.setsockopt(zmq.MAXMSGSIZE, MAX_KERNEL_MESSAGE)

    zmq.asyncio.Context.__init__ = capped


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when the process that started it dies (parent-death
    signal), so a grading process killed outright (SIGKILL, a cluster worker's machine taken
    away) takes this worker with it; the sandboxed kernel and runner then follow, as
    bubblewrap runs them with --die-with-parent. The parent's pid is checked after the call:
    a parent that died before it leaves this worker nothing to do."""
    parent = environment.parent_pid()
    if not parent or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(parent):
        os._exit(1)


MAX_LOG = 100_000  # characters of each nbgrader log kept in result.json


def _limit_memory(limit: int) -> None:
    """Cap this worker's address space (the soft limit only), so that a worker that still blows
    up fails alone, as its student's problem, and the grading parent never does. The sandbox's
    launcher sets the kernel's and the runner's own limits (sandbox._enter), not these."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if limit > 0 and (hard == resource.RLIM_INFINITY or limit <= hard):
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def scratch_gradebooks() -> None:
    """Let SQLite skip waiting for the disk in this process's gradebooks.

    A worker's gradebooks are the job folders' scratch copies of the master's (grading rebuilds a
    job folder, gradebook included, every time it grades the notebook): what counts reaches the
    course gradebook through ``result.json``. nbgrader commits about 75 times per notebook, and
    each commit waits for the disk (``fdatasync``, a millisecond here, far more when workers
    write at once). Without it a crash can leave a scratch copy broken, which nothing reads
    again. The course gradebook is written by the grading process, which never calls this."""
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "connect")
    def _no_sync(connection, _record) -> None:
        if isinstance(connection, sqlite3.Connection):
            cursor = connection.cursor()
            cursor.execute("PRAGMA synchronous = OFF")
            cursor.execute("PRAGMA journal_mode = MEMORY")
            cursor.close()


def one_engine_per_gradebook() -> None:
    """Let nbgrader reuse one SQLAlchemy engine per gradebook in this process.

    nbgrader opens a new ``Gradebook`` about eleven times per notebook, each with an engine of its
    own, and an engine keeps the SQL it has compiled for itself: every statement was compiled
    again each time (324 compilations per student, 0.35 s). With the engine made once per
    database URL, 174 and 0.14 s. An engine holds no connection between two gradebooks (nbgrader
    disposes of its pool on closing), so a job folder's gradebook replaced between two gradings
    is opened afresh. Only in a worker: the course gradebook's engines are the grading process's."""
    import functools

    import nbgrader.api

    if not hasattr(nbgrader.api.create_engine, "cache_info"):
        nbgrader.api.create_engine = functools.lru_cache(maxsize=64)(nbgrader.api.create_engine)


def main(argv: list[str]) -> int:
    _die_with_parent()
    settings = WorkerSettings.from_json(json.loads(Path(argv[0]).read_text(encoding="utf-8")))
    _limit_memory(int(settings.worker_memory_limit))
    student, jobdirs = argv[1], [Path(p).resolve() for p in argv[2:]]
    _cap_messages()
    scratch_gradebooks()
    one_engine_per_gradebook()
    worker = Worker(settings, student, jobdirs[0].parent / Out.SANDBOX_LEDGER)
    try:
        worker.lend_kernel(jobdirs)
        for jobdir in jobdirs:
            job = JobFolder(jobdir, settings.assignment)
            started = job.started.with_name(job.STARTED + ".tmp")
            started.write_text(repr(time.time()))
            os.replace(started, job.started)
            try:
                outcome = worker.grade(jobdir)
            except MemoryError:  # this process, not the kernel: the notebook's output did not fit
                _write_result(
                    job,
                    JobOutcome(
                        status="out_of_memory",
                        detail="the grading process ran out of memory on this notebook's output",
                    ),
                )
                raise
            # nbgrader's logs quote the notebook: the parent reads a bounded part
            _write_result(job, outcome.cut(MAX_LOG))
    finally:
        worker.close()
    return 0


def _write_result(job: JobFolder, outcome: JobOutcome) -> None:
    """The job's outcome, written by its type (``JobOutcome.to_json``), whole or not at all."""
    tmp = job.result.with_name(job.RESULT + ".tmp")
    tmp.write_text(json.dumps(outcome.to_json()), encoding="utf-8")
    os.replace(tmp, job.result)


if __name__ == "__main__":
    _profiles = environment.profile_dir()
    if _profiles:  # development: a cProfile of each student's worker, <student>.prof
        import cProfile

        _prof = cProfile.Profile()
        _rc = _prof.runcall(main, sys.argv[1:])
        _prof.dump_stats(os.path.join(_profiles, f"{sys.argv[2]}.prof"))
        sys.exit(_rc)
    sys.exit(main(sys.argv[1:]))
