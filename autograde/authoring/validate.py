"""``python -m autograde validate FILE``: check that a learner's notebook keeps the graded cells the
grader looks for (ids and metadata a platform may rewrite), then run it and report its public
checks, the way the grader would run them, minus the hidden tests. The notebook runs as the learner
runs it (notebook 05 in its own ``RUN_MODE``), but its result files go to a temporary folder, so
that checking a notebook never overwrites a result file the learner measured and quotes."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from unittest import mock

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from tools.checks import SuiteReport
from tools.integrity import release_cells, submission_problems

from .. import settings


def validate_notebook(path: Path, timeout: int = 120) -> tuple[bool, list[str]]:
    """Execute ``path`` in its own folder; return (all public checks passed, report lines).

    The kernel talks over a socket file in a private temporary folder (not a TCP port: two
    validations at once cannot pick the same port, and nothing else on the machine can
    listen in). A kernel that dies, fails to start, or a cell that runs past ``timeout``
    seconds ends this notebook's run with a line that says so and names the cell; the checks
    that ran are still reported, and the next file is validated as usual."""
    try:
        cells = release_cells(path.stem)
    except ValueError:
        # a name no release notebook has: the grader matches it by its cells; nothing to compare
        # here
        cells = None
    integrity, notes = (
        submission_problems(json.loads(path.read_text(encoding="utf-8")), cells)
        if cells
        else ([], [])
    )
    nb = nbformat.read(path, as_version=4)
    # test cells (answers graded by a person, such as the reflections, run no checks)
    expected = sum(
        1
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("grade")
        and not c.metadata["nbgrader"].get("solution")
    )
    suites, stopped = _execute(nb, path, timeout)
    lines = [f"✗ graded cells: {problem}" for problem in integrity] + [
        f"· {note}" for note in notes
    ]
    passed_all = not integrity and stopped is None
    if stopped:
        lines.append(f"✗ {stopped}")
    for suite in suites:
        mark = "✓" if suite.passed == suite.total else "✗"
        lines.append(f"{mark} {suite.title}: public checks {suite.passed}/{suite.total} passed")
        for case in suite.cases:
            if case.status != "pass":
                lines.append(f"    ✗ {case.name}: {case.message}")
        passed_all &= suite.passed == suite.total
    if len(suites) < expected:
        passed_all = False
        lines.append(
            f"✗ {expected - len(suites)} test cell(s) stopped before running their "
            "checks: open the notebook and read the error"
        )
    passed, total = sum(s.passed for s in suites), sum(s.total for s in suites)
    ended = "; the run stopped early (above)" if stopped else ""
    lines.append(
        f"{path}: public checks {passed}/{total} passed{ended}; hidden tests run at grading"
    )
    return passed_all, lines


def _execute(nb, path: Path, timeout: int) -> tuple[list[SuiteReport], str | None]:
    """Run ``nb`` in ``path``'s folder, its result files kept apart; return (the check suites
    reported, why the run stopped early or None)."""
    with tempfile.TemporaryDirectory(prefix="course-validate-") as tmp:
        report = Path(tmp) / "checks.jsonl"
        run_env = {
            settings.CHECK_REPORT: str(report),
            settings.RESULTS_DIR: str(Path(tmp) / "results"),
            settings.MPL_BACKEND: settings.mpl_backend(),
        }
        stopped = None
        with mock.patch.dict(os.environ, run_env):
            try:
                km = AsyncKernelManager(
                    kernel_name="python3",
                    transport="ipc",
                    connection_file=str(Path(tmp) / "kernel.json"),
                    ip=str(Path(tmp) / "ipc"),
                )
                client = NotebookClient(
                    nb,
                    km=km,
                    timeout=timeout,
                    kernel_name="python3",
                    allow_errors=True,
                    resources={"metadata": {"path": str(path.parent.resolve())}},
                )
                client.execute()
            except CellTimeoutError:
                stopped = (
                    f"{_where(nb)} ran past {timeout} s and was stopped (an endless loop, "
                    "or work far larger than the course needs?)"
                )
            except DeadKernelError:
                stopped = (
                    f"the kernel died in {_where(nb)} (out of memory, or a call that ended "
                    "the process?)"
                )
            except RuntimeError as exc:  # the kernel did not start or answer
                stopped = f"the notebook's kernel could not run it: {exc}"
        suites = (
            [
                SuiteReport.from_json(json.loads(line))
                for line in report.read_text(encoding="utf-8").splitlines()
            ]
            if report.exists()
            else []
        )
    return suites, stopped


def _where(nb) -> str:
    """The code cell a run stopped in: the first one nbclient has no reply time for (it records
    each cell's start and reply; a cell whose kernel died may not even have a start), as
    'code cell N (`its first line`)'."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    for number, cell in enumerate(code, start=1):
        if cell.source.strip() and "shell.execute_reply" not in cell.metadata.get("execution", {}):
            first = next(line.strip() for line in cell.source.splitlines() if line.strip())
            return f"code cell {number} (`{first[:60]}`)"
    return "a code cell"
