"""``python -m autograde validate FILE``: run a learner's notebook and report its public
checks, the way the grader would run them, minus the hidden tests."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from tools.checks import REPORT_ENV


def validate_notebook(path: Path, timeout: int = 120) -> tuple[bool, list[str]]:
    """Execute ``path`` in its own folder; return (all public checks passed, report lines)."""
    nb = nbformat.read(path, as_version=4)
    expected = sum(1 for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))
    with tempfile.TemporaryDirectory(prefix="course-validate-") as tmp:
        report = Path(tmp) / "checks.jsonl"
        previous = os.environ.get(REPORT_ENV)
        os.environ[REPORT_ENV] = str(report)
        os.environ.setdefault("MPLBACKEND", "agg")
        try:
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                    resources={"metadata": {"path": str(path.parent.resolve())}})
            client.execute()
        finally:
            if previous is None:
                os.environ.pop(REPORT_ENV, None)
            else:
                os.environ[REPORT_ENV] = previous
        suites = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()] if report.exists() else []
    lines, passed_all = [], True
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
