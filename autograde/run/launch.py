"""Starting grading workers without paying their imports each time.

A grading worker (``autograde.run.job``) imports nbgrader, nbconvert, jupyter_client and ZeroMQ
before it grades anything: about a second of CPU, paid again for every student when each worker
is a new interpreter. Here each worker is forked from Python's *forkserver*: one clean,
single-threaded process, started once per grading run, that imported those modules once
(``PRELOAD``). A fork shares them, so a worker starts at once, in a fresh process of its own: its
own session, working folder, environment and log, as a new interpreter would have. No learner code
runs in a worker (learner code runs in the sandboxed kernel the worker starts), and no worker state
outlives its student: each one is a new process, forked from the same clean server.

Where ``multiprocessing`` cannot start a child (a daemonic process, such as some cluster workers)
or the grader runs other than as the command (see ``forkserver_usable``), the worker is a new
interpreter (``course.spawn``)."""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from pathlib import Path

from .. import settings
from ..course import nbgrader_env, spawn, track

# what every worker imports before its first notebook (measured with python -X importtime)
PRELOAD = [
    "autograde.run.job",
    "autograde.run.kernels",
    "autograde.run.preprocessors",
    "autograde.record.exporters",
    "nbgrader.apps",
    "nbgrader.api",
    "nbgrader.coursedir",
    "nbconvert.exporters",
    "traitlets.config.loader",
    "zmq.asyncio",
    "sqlalchemy.dialects.sqlite",  # the scratch gradebooks' dialect, loaded on first connect
    "bleach",  # the feedback page's sanitizer (nbconvert imports it on first use)
]

_CONTEXT = None
_CONTEXT_LOCK = threading.Lock()


def forkserver_usable() -> bool:
    """Whether workers are forked from a preloaded server here (see the module's text).

    By default only under the command line (``python -m autograde``): a child of the server
    re-imports the parent's main module, which the command's ``__main__`` allows; a script that
    calls the grader without an ``if __name__ == "__main__"`` guard would run again in every worker.
    ``COURSE_FORKSERVER=1`` forks anyway, ``0`` never does."""
    wanted = settings.forkserver()
    main = getattr(getattr(sys.modules.get("__main__"), "__spec__", None), "name", None)
    return (
        wanted != "0"
        and (wanted == "1" or main == "autograde.__main__")
        and not settings.profile_dir()  # a profiled worker is a new interpreter (job.py's __main__)
        and sys.platform.startswith("linux")
        and not multiprocessing.current_process().daemon
        and "forkserver" in multiprocessing.get_all_start_methods()
    )


def _context():
    global _CONTEXT
    with _CONTEXT_LOCK:
        main = sys.modules.get("__main__")
        if main is not None and not hasattr(main, "__spec__"):
            # a main module made by exec (an embedding host, pytest-xdist's workers) lacks the
            # attribute that multiprocessing reads; None is what `python -c` has: nothing to
            # re-import
            main.__spec__ = None
        if _CONTEXT is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(PRELOAD)
            _CONTEXT = context
        return _CONTEXT


def prestart() -> None:
    """Start the worker server now, where workers will be forked from it, so that it imports
    ``PRELOAD`` while the batch prepares (the first worker would otherwise wait for that)."""
    if forkserver_usable():
        from multiprocessing import forkserver

        _context()
        forkserver.ensure_running()


class ForkedWorker:
    """A worker forked from the server, with the part of ``subprocess.Popen`` the grader uses:
    ``pid``, ``poll()``, ``wait()`` and ``returncode`` (negative: the signal that ended it)."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], log_path: Path):
        self.process = _context().Process(
            target=_worker_main, args=(argv, str(cwd), env, str(log_path)), name="grading-worker"
        )
        self.process.start()
        self.pid = self.process.pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        # the server reaps the worker and reports its status through a pipe: None until then
        if self.returncode is None:
            self.returncode = self.process.exitcode
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        self.process.join(timeout)
        return self.poll()


def start_worker(
    argv: list[str], cwd: Path, env: dict[str, str], log_path: Path, log
) -> ForkedWorker:
    """Start ``python -m autograde.run.job ARGV`` in ``cwd`` with ``env`` added to this process's
    environment, its output to ``log`` (open on ``log_path``): forked from the preloaded server
    where that works, else a new interpreter. Registered so that Ctrl-C can kill it."""
    if not forkserver_usable():
        return spawn([sys.executable, "-m", "autograde.run.job", *argv], cwd, env, log)
    worker = ForkedWorker(argv, cwd, nbgrader_env(env), log_path)
    track(worker)
    return worker


def _worker_main(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    log_path: str,
    target: str = "autograde.run.job:main",
) -> None:
    """In the forked worker: what a new interpreter started by ``course.spawn`` would have (a
    session of its own, the working folder, exactly ``env``, output to the log), then the job.

    Its parent is the server, not the grading process: the job's parent-death signal (job.py) is
    tied to the server, which exits when the grading process does. A grading process already gone
    before that signal was set leaves the worker nothing to do."""
    grading = settings.parent_pid(env)
    if grading:
        try:
            os.kill(int(grading), 0)
        except ProcessLookupError:
            os._exit(1)
        env = {**env, settings.PARENT_PID: str(os.getppid())}
    os.setsid()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    out = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.close(null)
    import importlib

    module, name = target.split(":")
    sys.exit(getattr(importlib.import_module(module), name)(argv))
