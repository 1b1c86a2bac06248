"""The course's folders, and how nbgrader is run on a course folder built for one job."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import nbformat
import psutil

from tools.project_runtime import course_manifest, resolve_project_root

from . import settings
from .errors import GraderError

CONFIG_FILE = Path(__file__).with_name("nbgrader_config.py")


class UnusableInput(GraderError):
    """The instructor's input cannot be used (the command exits 2)."""


@dataclass(frozen=True)
class Course:
    root: Path
    assignment: str
    notebooks: tuple[str, ...]  # file stems, in course order
    # (edition, nbgrader assignment): each edition besides English released on an exchange as an
    # assignment of its own (course.toml's [course.editions]); a submission to one is a submission
    # of ``assignment``
    editions: tuple[tuple[str, str], ...] = ()

    @classmethod
    def load(cls, root: Path | None = None) -> Course:
        root = root or resolve_project_root(Path(__file__).resolve().parent)
        manifest = course_manifest(root)
        assignment = manifest["course"]["assignment"]
        editions = _edition_assignments(assignment, manifest["course"].get("editions", {}))
        return cls(root, assignment, tuple(nb["name"] for nb in manifest["notebooks"]), editions)

    def assignment_names(self) -> dict[str, str]:
        """{nbgrader assignment name: edition} under which this course's assignment is submitted:
        its own name (the English edition, or any edition a learner chose inside it) and each
        edition's own assignment."""
        return {self.assignment: "en", **{name: edition for edition, name in self.editions}}

    @property
    def solutions(self) -> Path:
        return self.root / "solutions"

    @property
    def release(self) -> Path:
        return self.root / "notebooks"

    @property
    def grading(self) -> settings.GradingTable:
        """course.toml's ``[grading]`` table (deadline, late_policy, extensions, deadlines; none
        when it has none)."""
        return settings.GradingTable.from_toml(course_manifest(self.root).get("grading", {}))

    def source_paths(self) -> list[Path]:
        paths = [self.solutions / f"{name}.ipynb" for name in self.notebooks]
        absent = [p for p in paths if not p.is_file()]
        if absent:
            raise UnusableInput(f"instructor sources missing: {', '.join(str(p) for p in absent)}")
        return paths

    def catalog_paths(self) -> list[Path]:
        """The translation catalogs of the editions besides English (their text is on the pages)."""
        return sorted((self.root / "translations").glob("*/*.po")) + sorted(
            (self.root / "tools" / "locale").glob("*/*.po")
        )

    def sources_digest(self) -> str:
        """A hash of everything that decides a grade or a feedback page: sources, catalogs and
        nbgrader config."""
        digest = hashlib.sha256()
        for path in [*self.source_paths(), *self.catalog_paths(), CONFIG_FILE]:
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
        return digest.hexdigest()[:16]


def _edition_assignments(assignment: str, table) -> tuple[tuple[str, str], ...]:
    """course.toml's ``[course.editions]`` ({edition: assignment name}), checked: a name nbgrader
    accepts (no ``+``, no ``/``), other than the course's assignment and each other, for an edition
    the course has."""
    from tools.i18n import EDITIONS

    if not isinstance(table, dict):
        raise UnusableInput(
            'course.toml: [course.editions] must be a table of edition = "assignment name"'
        )
    seen = {assignment}
    for edition, name in sorted(table.items()):
        where = f"course.toml: [course.editions] {edition} = {name!r}"
        if edition not in EDITIONS or edition == "en":
            raise UnusableInput(
                f"{where}: the course's editions besides English are "
                f"{', '.join(e for e in EDITIONS if e != 'en')}"
            )
        if (
            not isinstance(name, str)
            or not name.strip()
            or set(name) & set("+/\\ ")
            or name in seen
        ):
            others = ", ".join(sorted(seen))
            raise UnusableInput(
                f"{where}: give an assignment name of its own, without '+', '/', "
                f"'\\' or spaces, other than {others}"
            )
        seen.add(name)
    return tuple(sorted(table.items()))


@functools.cache
def assignment_names(assignment: str) -> dict[str, str]:
    """{nbgrader assignment name: edition} that stand for ``assignment``: the course's editions when
    it is the course's assignment (``Course.assignment_names``), else ``assignment`` alone."""
    course = Course.load()
    return course.assignment_names() if assignment == course.assignment else {assignment: "en"}


def bin_dir() -> Path:
    return Path(sys.executable).parent


def nbgrader_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for an nbgrader run: the venv's bin/ first (nbgrader shells out to alembic)."""
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir()}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["MPLBACKEND"] = "agg"
    env.pop(settings.SESSION_NAME, None)  # grading kernels are never a live frontend
    if extra:
        env.update(extra)
    return env


def prepare_course_dir(folder: Path) -> Path:
    """An empty nbgrader course folder with the course's config."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    shutil.copy(CONFIG_FILE, folder / "nbgrader_config.py")
    return folder


@dataclass
class RunResult:
    returncode: int | None  # None: killed at the wall-clock limit
    log: str
    seconds: float


_LIVE: dict[int, subprocess.Popen] = {}
_LIVE_LOCK = threading.Lock()


def kill_live_runs() -> None:
    """Kill every nbgrader run still going (on Ctrl-C or SIGTERM of the batch)."""
    with _LIVE_LOCK:
        procs = list(_LIVE.values())
    for proc in procs:
        kill_unreaped(proc)


def kill_unreaped(proc: subprocess.Popen) -> None:
    """Kill ``proc`` and its descendants while it is still ours: once it has been waited for,
    its process id may already belong to another process (a kernel of another batch), which
    must never be killed in its place. (Its descendants are by then its sandbox's to end.)"""
    if proc.poll() is None:  # not reaped: the id stays this process's, even if it exits now
        kill_tree(proc.pid)


def spawn(command: list[str], cwd: Path, env: dict[str, str] | None, log) -> subprocess.Popen:
    """Start ``command`` in a session of its own, registered so that Ctrl-C can kill it."""
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=nbgrader_env(env),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    track(proc)
    return proc


def track(proc) -> None:
    """Register a started process (a Popen, or a worker with its ``pid``, ``poll`` and ``wait``)
    so that Ctrl-C or SIGTERM of the batch kills it (kill_live_runs); ``reap`` forgets it."""
    with _LIVE_LOCK:
        _LIVE[proc.pid] = proc


def reap(proc: subprocess.Popen) -> None:
    """Kill what is left of ``proc`` (its kernels too) and forget it."""
    kill_unreaped(proc)
    proc.wait()
    with _LIVE_LOCK:
        _LIVE.pop(proc.pid, None)


def run_nbgrader(
    args: list[str],
    course_dir: Path,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
) -> RunResult:
    """Run ``nbgrader ARGS`` in ``course_dir`` (see run_process)."""
    return run_process([str(bin_dir() / "nbgrader"), *args], course_dir, timeout, env)


def run_process(
    command: list[str],
    course_dir: Path,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
) -> RunResult:
    """Run ``command`` in ``course_dir``, output to ``course_dir/run.log``. At ``timeout``
    seconds, kill it and its kernels (which jupyter_client starts in sessions of their
    own) and return code None."""
    import time

    begin = time.monotonic()
    log_path = course_dir / "run.log"
    with open(log_path, "w", encoding="utf-8") as log:
        proc = spawn(command, course_dir, env, log)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            reap(proc)
    return RunResult(
        code, log_path.read_text(encoding="utf-8", errors="replace"), time.monotonic() - begin
    )


def kill_tree(pid: int) -> None:
    """Kill a process and every descendant, kernels included."""
    try:
        parent = psutil.Process(pid)
        family = parent.children(recursive=True) + [parent]
    except psutil.NoSuchProcess:
        return
    for proc in family:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=10)


@dataclass(frozen=True)
class Exercise:
    notebook: str
    grade_id: str
    points: float
    manual: bool = False  # an answer a person grades in formgrader (a reflection)


def exercises(course: Course) -> list[Exercise]:
    """Every graded cell of the course, in notebook order."""
    found = []
    for path in course.source_paths():
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade"):
                found.append(
                    Exercise(
                        path.stem,
                        meta["grade_id"],
                        float(meta["points"]),
                        bool(meta.get("solution")),
                    )
                )
    return found


def install_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt so a killed batch stops its nbgrader runs too."""

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (a test calling us from a thread)
        pass
