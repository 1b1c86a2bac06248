"""``python -m autograde validate FILE``: check that a learner's notebook keeps the graded cells the
grader looks for (ids and metadata a platform may rewrite), then run it and report its public
checks, the way the grader would run them, minus the hidden tests."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from tools.checks import REPORT_ENV
from tools.notebook_runtime import release_cells, submission_problems


def validate_notebook(path: Path, timeout: int = 120) -> tuple[bool, list[str]]:
    """Execute ``path`` in its own folder; return (all public checks passed, report lines).

    The kernel talks over a socket file in a private temporary folder (not a TCP port: two
    validations at once cannot pick the same port, and nothing else on the machine can
    listen in). A kernel that dies, fails to start, or a cell that runs past ``timeout``
    seconds ends this notebook's run with a line that says so; the checks that ran are
    still reported, and the next file is validated as usual."""
    try:
        cells = release_cells(path.stem)
    except ValueError:
        cells = None  # a name no release notebook has: the grader matches it by its cells; nothing to compare here
    integrity, notes = submission_problems(json.loads(path.read_text(encoding="utf-8")), cells) if cells else ([], [])
    nb = nbformat.read(path, as_version=4)
    # test cells (answers graded by a person, such as the reflections, run no checks)
    expected = sum(1 for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution"))
    with tempfile.TemporaryDirectory(prefix="course-validate-") as tmp:
        report = Path(tmp) / "checks.jsonl"
        previous = os.environ.get(REPORT_ENV)
        os.environ[REPORT_ENV] = str(report)
        os.environ.setdefault("MPLBACKEND", "agg")
        stopped = None
        try:
            km = AsyncKernelManager(kernel_name="python3", transport="ipc", connection_file=str(Path(tmp) / "kernel.json"), ip=str(Path(tmp) / "ipc"))
            client = NotebookClient(
                nb, km=km, timeout=timeout, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(path.parent.resolve())}}
            )
            client.execute()
        except CellTimeoutError:
            stopped = f"a cell ran past {timeout} s and was stopped (an endless loop, or work far larger than the course needs?)"
        except DeadKernelError:
            stopped = "the kernel died while the notebook ran (out of memory, or a call that ended the process?)"
        except RuntimeError as exc:  # the kernel did not start or answer
            stopped = f"the notebook's kernel could not run it: {exc}"
        finally:
            if previous is None:
                os.environ.pop(REPORT_ENV, None)
            else:
                os.environ[REPORT_ENV] = previous
        suites = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()] if report.exists() else []
    lines = [f"✗ graded cells: {problem}" for problem in integrity] + [f"· {note}" for note in notes]
    passed_all = not integrity and stopped is None
    if stopped:
        lines.append(f"✗ {stopped}")
    for suite in suites:
        mark = "✓" if suite["passed"] == suite["total"] else "✗"
        lines.append(f"{mark} {suite['title']}: public checks {suite['passed']}/{suite['total']} passed")
        for case in suite["cases"]:
            if case["status"] != "pass":
                lines.append(f"    ✗ {case['name']}: {case['message']}")
        passed_all &= suite["passed"] == suite["total"]
    if len(suites) < expected:
        passed_all = False
        lines.append(f"✗ {expected - len(suites)} test cell(s) stopped before running their checks: open the notebook and read the error")
    passed = sum(s["passed"] for s in suites)
    total = sum(s["total"] for s in suites)
    lines.append(f"{path.name}: public checks {passed}/{total} passed; hidden tests run at grading")
    return passed_all, lines
