"""The learner runtime's settings from the environment: every variable ``tools/`` reads is read
here, typed, with its default and what it means (``VARIABLES``; docs/instructors.md,
"Configuration", shows the same table, and tests/test_configuration.py keeps the two equal). The
rest of ``tools/`` asks these functions, which read the environment when called (a kernel may change
it while it runs). Standard library only: the bottom of the runtime's layers."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    default: str  # as the table shows it: "unset" when nothing stands in for it
    meaning: str  # one line


LANGUAGE = "COURSE_LANG"
WIDGETS = "COURSE_WIDGETS"
CHECK_REPORT = "COURSE_CHECK_REPORT"
CHECKS_STOP = "COURSE_CHECKS_STOP"
PROJECT_ROOT = "LLM_ALGO_PROJECT_ROOT"
RESULTS_DIR = "LLM_ALGO_RESULTS_DIR"
GRADING = "NBGRADER_EXECUTION"
SESSION_NAME = "JPY_SESSION_NAME"
VSCODE_PID, VSCODE_CWD = "VSCODE_PID", "VSCODE_CWD"

VARIABLES = (
    Variable(
        LANGUAGE,
        "unset",
        "zh or en: the language the runtime speaks, above the edition the notebook names",
    ),
    Variable(
        WIDGETS,
        "unset",
        "live or static: the explorer's widgets forced on or off (unset: "
        "detected from the frontend)",
    ),
    Variable(CHECKS_STOP, "unset", "1: a failed public check stops Run All, as at grading"),
    Variable(
        CHECK_REPORT,
        "unset",
        "a file each public check suite appends one JSON line to (set by `validate`)",
    ),
    Variable(
        PROJECT_ROOT,
        "unset",
        "the course folder (the one holding course.toml), when it is not found from the notebook",
    ),
    Variable(
        RESULTS_DIR,
        "unset",
        "where notebooks write their result files (unset: results/ "
        "beside the notebook, or the course's)",
    ),
    Variable(
        GRADING,
        "unset",
        "autograde or validate: nbgrader runs the notebook (set by nbgrader and the grader)",
    ),
    Variable(
        SESSION_NAME,
        "unset",
        "the running notebook's path, as Jupyter's frontend names it (set by Jupyter)",
    ),
    Variable(VSCODE_PID, "unset", "set by VS Code: its widget frontend serves this kernel"),
    Variable(VSCODE_CWD, "unset", "set by VS Code: its widget frontend serves this kernel"),
)


def language() -> str:
    """COURSE_LANG as given, stripped and lower-cased ("" when unset)."""
    return os.environ.get(LANGUAGE, "").strip().lower()


def widgets() -> str:
    """COURSE_WIDGETS, stripped and lower-cased ("" when unset); what it may say is the explorer's
    to check."""
    return os.environ.get(WIDGETS, "").strip().lower()


def checks_stop() -> bool:
    """Whether COURSE_CHECKS_STOP=1 asks a failed public check to stop the run."""
    return os.environ.get(CHECKS_STOP) == "1"


def check_report() -> str | None:
    """The file COURSE_CHECK_REPORT names, or None (unset or empty)."""
    return os.environ.get(CHECK_REPORT) or None


def project_root() -> str | None:
    """LLM_ALGO_PROJECT_ROOT, or None (unset or empty)."""
    return os.environ.get(PROJECT_ROOT) or None


def results_dir() -> str | None:
    """LLM_ALGO_RESULTS_DIR, or None (unset or empty)."""
    return os.environ.get(RESULTS_DIR) or None


def grading() -> str | None:
    """NBGRADER_EXECUTION ('autograde' or 'validate' while nbgrader runs the notebook), or None."""
    return os.environ.get(GRADING) or None


def session_name() -> str | None:
    """JPY_SESSION_NAME (the running notebook's path as the frontend gives it), or None when
    unset."""
    return os.environ.get(SESSION_NAME)


def in_vscode() -> bool:
    """Whether VS Code started this kernel (VSCODE_PID or VSCODE_CWD set)."""
    return bool(os.environ.get(VSCODE_PID) or os.environ.get(VSCODE_CWD))
