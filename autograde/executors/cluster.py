"""Grading on a Dask distributed cluster: ``grade SUBMISSIONS --out OUT --scheduler ADDRESS``.

One task per student goes to an existing cluster (``dask scheduler`` and ``dask worker``
processes, each worker with the course installed). A task carries the student's notebook
bytes and the grading limits, never the key that signs saved results nor the database URL.
On the worker, ``grade_task`` builds (once per course version) the grading master from its
own copy of the course, refuses the task when that copy differs from the instructor's or when
it cannot sandbox, and runs the same loop as a local run (``run.student.run_student``: one
grading process per student, wall-clock limits, kills). It returns, for each notebook, the
files a local run leaves in the job folder: nbgrader's outcome, the autograded notebook, the
submitted copy and the feedback page. Workers share no folder with the instructor.

The parent stays the only writer: it checks the shape of what came back (a worker is not
trusted blindly), rebuilds the job folder, and turns it into the record, feedback page and
formgrader copy exactly as a local run does (``grading.finish_record``), then signs, saves and
merges the record into the gradebook. A task that fails, or whose worker dies more often
than the scheduler allows, gives the student's notebooks an ``error`` row that is not saved,
so the next run grades them again. A worker killed mid-task loses nothing: the scheduler
runs the task again elsewhere, and a task is idempotent (a fresh folder each time).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import logging
import os
import shutil
import socket
import tarfile
import tempfile
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import nbformat

from .. import settings as environment
from ..course import Course, UnusableInput
from ..errors import GraderError
from ..grading import Ran
from ..ledger.facts import ClusterInfo, SandboxInfo
from ..ledger.layout import JobFolder, Out
from ..model import JobOutcome, MalformedResult, Record, new_record
from .tasks import Answer, NotebookAnswer, Task, TaskSettings

log = logging.getLogger(__name__)  # warnings, to stderr as the command line configures it
MAX_LOG = 200_000  # characters of a grading log sent back
CONNECT_SECONDS = 30
FIRST_WORKER_SECONDS = 120


class WorkerRefused(GraderError, RuntimeError):
    """A worker will not grade: it cannot sandbox, or its course differs from the instructor's."""


# ---------------------------------------------------------------- both sides
def course_digest(course: Course) -> str:
    """The course sources and the grader's own code: a worker grades only when its copy matches."""
    digest = hashlib.sha256(course.sources_digest().encode())
    package = Path(__file__).resolve().parents[1]
    for path in sorted(package.rglob("*.py")):
        digest.update(
            path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0"
        )
    return digest.hexdigest()[:20]


# ---------------------------------------------------------------- worker side
_PROBED: dict[tuple, str | None] = {}


def _worker_base(digest: str) -> Path:
    root = Path(environment.worker_dir() or tempfile.gettempdir())
    base = root / f"autograde-worker-{os.getuid()}" / digest
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    return base


@contextmanager
def _flock(path: Path):
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _where() -> str:
    try:
        from distributed import get_worker

        return f"{get_worker().address} on {socket.gethostname()}"
    except Exception:
        return socket.gethostname()


def _ready(
    course: Course, digest: str, settings: TaskSettings, shipped: bytes | None = None
) -> tuple[Path, Path]:
    """Check this worker can grade (same course and grader, sandbox working unless the
    instructor turned it off), have the grading master for this course version (the one the
    instructor's machine built, ``shipped`` as a tar.gz before the batch, kept when it verifies
    against this worker's course; built here otherwise), and sweep what tasks of a killed
    worker left. Returns (base folder, master)."""
    from ..publish.master import grading_master
    from ..run.sandbox import Limits, probe

    mine = course_digest(course)
    if mine != digest:
        raise WorkerRefused(
            f"worker {_where()} refuses to grade: its copy of the course or of the grader "
            f"({course.root}, version {mine}) differs from the instructor's (version {digest}); "
            "install the same course version on every worker"
        )
    base = _worker_base(digest)
    _remove_other_versions(base)
    with _flock(Out(base).lock):
        if shipped and not Out(base).master_digest.is_file():
            with tarfile.open(fileobj=io.BytesIO(shipped), mode="r:gz") as archive:
                archive.extractall(base, filter="data")
        # verifies sources and tree digests; rebuilds when they differ
        master = grading_master(course, base)
        if settings.sandbox:
            limits = Limits(settings.memory_limit, settings.process_limit)
            key = (str(base), limits, environment.bwrap())
            if key not in _PROBED:
                _PROBED[key] = probe(Out(base).sandbox, limits)
            if _PROBED[key]:
                raise WorkerRefused(
                    f"worker {_where()} cannot run the grading sandbox: {_PROBED[key]}. "
                    "It refuses to "
                    "grade untrusted submissions unsandboxed: give this machine user namespaces "
                    "(bubblewrap), or grade code you trust with --no-sandbox"
                )
        (base / "tasks").mkdir(exist_ok=True)
        # a task whose lock nobody holds belonged to a worker that died
        for folder in (base / "tasks").iterdir():
            with _unused(folder) as free:
                if free:
                    _remove(folder)
    return base, master


@contextmanager
def _unused(folder: Path):
    """True when nobody holds ``folder/.lock`` (held here, then, for the block), else False."""
    try:
        handle = open(Out(folder).lock, "a+")
    except OSError:
        yield False
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True


def _remove(folder: Path) -> None:
    """Remove a worker folder, first what the sandboxes recorded in it left elsewhere."""
    from ..run.sandbox import sweep

    for ledger in folder.rglob(Out.SANDBOX_LEDGER):
        sweep(ledger)
    shutil.rmtree(folder, ignore_errors=True)


def _remove_other_versions(base: Path) -> None:
    """Remove the folders other course versions left on this worker, unless one is in use
    (its lock, or a task's, is held: another batch of that version runs here now)."""
    for folder in base.parent.iterdir():
        if folder == base or not folder.is_dir():
            continue
        with _unused(folder) as free:
            if free and all(_is_unused(task) for task in (folder / "tasks").glob("*")):
                _remove(folder)


def _is_unused(folder: Path) -> bool:
    with _unused(folder) as free:
        return free


def worker_check(digest: str, settings: TaskSettings, shipped: bytes | None = None) -> str:
    """Run on each worker before a batch: raises WorkerRefused when it cannot grade. Returns the
    worker."""
    course = Course.load()
    _ready(course, digest, settings, shipped)
    return _where()


def pack_master(out: Path) -> bytes:
    """The instructor's grading master (in OUT, with its digest record) as a tar.gz, laid out as in
    OUT."""
    buffer = io.BytesIO()
    layout = Out(out)
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(layout.master, arcname=Out.MASTER)
        archive.add(layout.master_digest, arcname=Out.MASTER_DIGEST)
    return buffer.getvalue()


def _called_off():
    """True once the batch no longer wants the running task (its grade was interrupted): Dask
    cannot stop a running task, so the task stops its grading process itself."""
    try:
        from distributed import get_worker

        worker = get_worker()
        key = worker.get_current_task()
    except Exception:
        return None

    def stop() -> bool:
        state = worker.state.tasks.get(key)
        return state is None or state.state in ("cancelled", "released", "forgotten")

    return stop


def grade_task(task: Task) -> dict:
    """Grade one student on this worker (``task``: the student, the course version, the limits and
    the notebooks' bytes). Returns its ``Answer`` as plain data (``Answer.to_wire``): per notebook,
    whether it ran, its record fields decided here (status and detail of one that did not run, notes
    on repaired cells), the kill flag, the grading log, seconds, and the job's files."""
    from ..model import Options
    from ..run.student import job_settings, run_student

    course = Course.load()
    settings = task.settings
    base, master = _ready(course, task.digest, settings)
    folder, lock = _task_folder(base)
    options = Options(workers=1, progress=False, **vars(settings))
    layout = Out(folder, course.assignment)  # the task's folder, laid out as OUT
    try:
        layout.work.mkdir()
        layout.worker_settings.write_text(
            json.dumps(job_settings(course, master, Out(base).sandbox, options).to_json())
        )
        entries = []
        for notebook, data in task.notebooks:
            path = folder / "in" / f"{notebook}.ipynb"
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(data)
            entries.append(
                (new_record(task.student, notebook).but(submission=task.submission or None), path)
            )
        layout.work_of(task.student).mkdir()
        collected = _Collected(Answer(task.student, _where()), course.assignment)
        run_student(
            course,
            master,
            folder,
            task.student,
            entries,
            options,
            collected.finished,
            collected.fail,
            _called_off(),
        )
        return collected.answer.to_wire()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        lock.close()


def _task_folder(base: Path) -> tuple[Path, io.TextIOWrapper]:
    """A new task's folder under ``base``, and its lock, held: made and locked under the base lock,
    so that a sweep never takes a live task's folder."""
    with _flock(Out(base).lock):
        folder = base / "tasks" / uuid.uuid4().hex
        folder.mkdir(parents=True)
        lock = open(Out(folder).lock, "a+")
        fcntl.flock(lock, fcntl.LOCK_EX)
    return folder, lock


@dataclass
class _Collected:
    """A task's answer as its notebooks finish: each run one's files, log and seconds (its job
    folder then removed), each one that did not run its status and detail."""

    answer: Answer
    assignment: str

    def finished(self, record: Record, job: Path, killed: bool = False, log: str = "") -> None:
        from ..matching import MAX_GRADED_BYTES
        from ..run.student import elapsed_since

        files = {}
        for name, relative in (
            JobFolder(job, self.assignment).returned(self.answer.student, record.notebook).items()
        ):
            path = job / relative
            # a file over the size the parent would read anyway is not sent (the parent reports it
            # missing)
            files[name] = (
                path.read_bytes()
                if path.is_file() and path.stat().st_size <= MAX_GRADED_BYTES
                else None
            )
        notes = tuple(record.matching_notes or ())
        item = NotebookAnswer(
            record.notebook,
            True,
            bool(killed),
            log[-MAX_LOG:],
            elapsed_since(job),
            notes,
            record.edition or "en",
            files,
        )
        self.answer.notebooks.append(item)
        shutil.rmtree(job, ignore_errors=True)

    def fail(self, record: Record) -> None:
        notes = tuple(record.matching_notes or ())
        self.answer.notebooks.append(
            NotebookAnswer(
                record.notebook,
                False,
                matching_notes=notes,
                status=record.status,
                detail=record.detail,
            )
        )


# ---------------------------------------------------------------- parent side
def _security(options):
    files = {
        "--tls-ca-file": options.tls_ca_file,
        "--tls-cert": options.tls_cert,
        "--tls-key": options.tls_key,
    }
    given = {flag: value for flag, value in files.items() if value}
    if not given:
        # plain tcp://, or TLS set up in the Dask configuration (distributed.comm.tls.*)
        return None
    if len(given) != len(files):
        raise UnusableInput(
            f"TLS needs all of {', '.join(files)} (missing "
            f"{', '.join(f for f in files if f not in given)})"
        )
    for flag, value in given.items():
        if not Path(value).is_file():
            raise UnusableInput(f"{flag} {value}: no such file")
    from distributed.security import Security

    return Security(
        tls_ca_file=str(options.tls_ca_file),
        tls_client_cert=str(options.tls_cert),
        tls_client_key=str(options.tls_key),
        require_encryption=True,
    )


def connect(options):
    """A Client of the scheduler at options.scheduler (with TLS when the files are given)."""
    from distributed import Client

    security = _security(options)
    if security is not None and not options.scheduler.startswith("tls://"):
        raise UnusableInput(
            f"--tls-* given, but the scheduler address {options.scheduler} is not a tls:// address"
        )
    try:
        return Client(
            options.scheduler, security=security, timeout=CONNECT_SECONDS, set_as_default=False
        )
    except TypeError as exc:  # distributed's word for a tls:// address without TLS settings
        raise UnusableInput(
            f"cannot reach the Dask scheduler at {options.scheduler}: it speaks TLS; give "
            "--tls-ca-file, "
            "--tls-cert and --tls-key (or set distributed.comm.tls in the Dask "
            f"configuration) ({exc})"
        ) from None
    except (OSError, TimeoutError, ValueError) as exc:
        raise UnusableInput(
            f"cannot reach the Dask scheduler at {options.scheduler}: "
            f"{type(exc).__name__}: {exc}. Start "
            "one with `dask scheduler`, and workers with `dask worker ADDRESS` (see "
            "docs/instructors.md)"
        ) from None


def task_settings(options) -> TaskSettings:
    return TaskSettings.of(options)


def make_task(student: str, items: list[tuple], digest: str, settings: TaskSettings) -> Task:
    """A student's task: the notebooks' bytes, and the digest of the student's whole submission (the
    salt of its hidden inputs: ledger.store.submission_digest)."""
    notebooks = tuple((item[0], item[1].read_bytes()) for item in items)
    return Task(
        student, digest, settings, notebooks, getattr(items[0], "submission", "") if items else ""
    )


class Workers(NamedTuple):
    """The workers asked before a batch: those that can grade, and why each other cannot."""

    usable: list[str]
    refused: dict[str, str]


def _usable_workers(client, digest: str, settings: TaskSettings, shipped: bytes) -> Workers:
    """Ask every worker whether it can grade."""
    try:
        client.wait_for_workers(1, timeout=FIRST_WORKER_SECONDS)
    except TimeoutError:
        raise UnusableInput(
            f"no Dask worker joined the scheduler within {FIRST_WORKER_SECONDS} s: start one with "
            "`dask worker ADDRESS` on a machine with the course installed"
        ) from None
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    checks = {
        address: client.submit(
            worker_check,
            digest,
            settings,
            shipped,
            workers=[address],
            allow_other_workers=False,
            pure=False,
            key=f"autograde-check-{uuid.uuid4().hex[:12]}",
        )
        for address in workers
    }
    usable, refused = [], {}
    for address, future in checks.items():
        try:
            future.result(timeout=900)
            usable.append(address)
        except Exception as exc:
            refused[address] = str(exc) or type(exc).__name__
    if not usable:
        raise UnusableInput(
            "no Dask worker can grade:\n" + "\n".join(f"  {a}: {why}" for a, why in refused.items())
        )
    return Workers(usable, refused)


def check_outcome(outcome, points: dict[str, float], manual_ids: set[str]) -> JobOutcome:
    """A worker's result.json through the one parser (``JobOutcome.from_json``), with the ranges a
    worker is not trusted with: scores only for the course's automatic cells, within their points.
    Raises MalformedResult."""
    return JobOutcome.from_json(outcome, points, manual_ids)


def check_result(result, student: str, names: set[str], file_limit: int) -> list[NotebookAnswer]:
    """The notebooks of a worker's answer, once its shape is what grade_task returns (else
    MalformedResult)."""
    return Answer.read(result, student, names, file_limit).notebooks


class ClusterExecutor:
    """The cluster executor for ``grading.grade_batch`` (what ``grade --scheduler`` passes): the
    same jobs, one Dask task per student, on the scheduler at ``options.scheduler``. Each worker
    checks its own sandbox and writes its own settings; nothing is started here before the batch."""

    def check(self, options) -> None:
        if not options.scheduler:
            raise ValueError(
                "the cluster executor needs options.scheduler (a Dask scheduler's address)"
            )

    def prestart(self) -> None:
        pass  # the workers are the cluster's

    def sandbox(self, out: Path, options) -> SandboxInfo:
        if options.sandbox:
            return SandboxInfo(
                enabled=True, isolation="bubblewrap on every worker (each checked before the batch)"
            )
        from ..grading import sandbox_settings

        return sandbox_settings(out, options)  # the warning that submissions run unsandboxed

    def prepare(self, course: Course, master: Path, out: Path, options) -> None:
        pass  # each worker writes its own (grade_task)

    def run(
        self,
        course: Course,
        master: Path,
        out: Path,
        by_student: dict,
        options,
        done,
        fault,
        secrets: dict[str, str],
    ) -> Ran:
        return grade_on_cluster(
            course, out, by_student, options, done, fault, secrets, course_digest(course)
        )


def grade_on_cluster(
    course: Course,
    out: Path,
    by_student: dict[str, list[tuple[str, Path, str]]],
    options,
    done,
    fault,
    secrets: dict[str, str],
    digest: str,
) -> Ran:
    """Grade ``by_student`` on the cluster; each notebook is recorded here as its student's task
    returns (``done(record)``), a failed task goes to ``fault(student, items, exc)``. Returns
    (the saved records, what to say about the cluster in summary.json)."""
    from distributed import as_completed

    from ..course import exercises

    cells = exercises(course)
    points = {e.grade_id: e.points for e in cells}
    manual_ids = {e.grade_id for e in cells if e.manual}
    file_limit = max(64 << 20, 4 * options.max_notebook_bytes)
    settings = task_settings(options)
    records: list[Record] = []
    client = connect(options)
    try:
        usable, refused = _usable_workers(client, digest, settings, pack_master(out))
        for address, why in refused.items():
            log.warning(f"Dask worker {address} is left out of this batch: {why}")
        where = {"workers": usable, "allow_other_workers": False} if refused else {}
        futures = {}
        for student, items in by_student.items():
            # retries: a task that raised runs once more (a worker that died is the scheduler's
            # business: it reruns that worker's tasks elsewhere, up to
            # distributed.scheduler.allowed-failures)
            future = client.submit(
                grade_task,
                make_task(student, items, digest, settings),
                pure=False,
                retries=1,
                key=f"autograde-{uuid.uuid4().hex[:12]}",
                **where,
            )
            futures[future] = (student, items)
        try:
            for future in as_completed(futures, loop=client.loop):
                student, items = futures[future]
                try:
                    answer = check_result(
                        future.result(), student, {item[0] for item in items}, file_limit
                    )
                    outcomes = {
                        item.notebook: check_outcome(_load_outcome(item), points, manual_ids)
                        for item in answer
                    }
                # the task failed, or its answer is malformed: not saved, graded next run
                except Exception as exc:
                    fault(student, items, exc)
                    continue
                kept = set()
                try:
                    for record in _records_of(
                        course, out, student, items, answer, outcomes, options, secrets
                    ):
                        kept.add(record.notebook)
                        records.append(record)
                        done(record)
                # a fault here, as one in a local grading thread: the rest get error rows
                except Exception as exc:
                    fault(student, [i for i in items if i[0] not in kept], exc)
        except BaseException:
            client.cancel(list(futures))
            raise
        return Ran(
            records,
            ClusterInfo(
                options.scheduler, len(usable), refused, options.scheduler.startswith("tls://")
            ),
        )
    finally:
        client.close()


def _records_of(
    course: Course,
    out: Path,
    student: str,
    items: list[tuple],
    answer: list[NotebookAnswer],
    outcomes: dict[str, JobOutcome],
    options,
    secrets,
):
    """Each notebook of a checked answer as a local run records it: the job folder rebuilt
    from the returned files, then record, feedback page and kept notebooks by grading.finish_record,
    signed and saved here. Yields the saved records."""
    from ..grading import finish_record
    from ..ledger.store import save_record
    from ..matching import changed_answers, safe_text

    layout = Out(out, course.assignment)
    by_name = {item.notebook: item for item in answer}
    try:
        for notebook, path, fingerprint, *whole in items:
            item = by_name[notebook]
            record = new_record(
                student, notebook, file=safe_text(path.name), fingerprint=fingerprint
            )
            record = record.but(
                submission=whole[0] if whole else None,
                matching_notes=tuple(safe_text(note) for note in item.matching_notes) or None,
                # the edition the worker graded it in (check_result checked it)
                edition=item.edition,
            )
            if not item.ran:
                yield save_record(
                    out, record.but(status=item.status, detail=safe_text(item.detail or "")), 0.0
                )
                continue
            job = layout.job(student, notebook)
            shutil.rmtree(job.root, ignore_errors=True)
            for name, relative in job.returned(student, notebook).items():
                if item.files[name] is not None:
                    (job.root / relative).parent.mkdir(parents=True, exist_ok=True)
                    (job.root / relative).write_bytes(item.files[name])
            # answers changed since the copy graded last time (a person's score on one is flagged)
            try:
                changed = changed_answers(
                    layout.submitted(student, notebook),
                    nbformat.read(job.submitted(student, notebook), as_version=4),
                )
            except Exception:
                changed = None
            if changed is not None:
                record = record.but(changed_answers=tuple(changed))
            record = finish_record(
                course,
                out,
                record,
                job.root,
                outcomes[notebook],
                item.killed,
                item.log,
                options,
                secrets,
            )
            yield save_record(out, record, float(item.seconds))
            shutil.rmtree(job.root, ignore_errors=True)
    finally:
        shutil.rmtree(layout.work_of(student), ignore_errors=True)


def _load_outcome(item: NotebookAnswer):
    if not item.ran:
        return {}
    data = item.files["result"]
    if data is None:
        return {}  # no result.json: the notebook is reported as not graded, from its log
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedResult(f"result.json is not JSON ({exc})") from None
