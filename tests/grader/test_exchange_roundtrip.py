"""A term through nbgrader's own exchange, checked by nbgrader's own commands: a learner fetches and submits with
``nbgrader fetch_assignment`` and ``nbgrader submit``; the course grades the exchange's inbound/; the feedback
written with ``feedback --format exchange`` is released with ``nbgrader release_feedback`` and arrives in the
learner's folder with ``nbgrader fetch_feedback``, byte for byte the page grading wrote."""

from __future__ import annotations

import getpass
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograde.course import Course

from submissions import NOTEBOOKS, RELEASE, build, run_grade

ASSIGNMENT = Course.load().assignment
COURSE_ID = "course101"
SENT = NOTEBOOKS[:2]


def nbgrader(cwd: Path, *args: str, exchange: Path, cache: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "nbgrader", *args, f"--course={COURSE_ID}", f"--Exchange.root={exchange}", f"--Exchange.cache={cache}"]
    run = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return run


@pytest.mark.slow
def test_feedback_goes_back_through_nbgraders_own_release_and_fetch(tmp_path):
    exchange, cache, learner = tmp_path / "exchange", tmp_path / "cache", tmp_path / "learner"
    outbound = exchange / COURSE_ID / "outbound" / ASSIGNMENT  # what release_assignment leaves there
    outbound.mkdir(parents=True)
    (exchange / COURSE_ID / "inbound").mkdir()
    (exchange / COURSE_ID / "feedback").mkdir()
    for name in SENT:
        shutil.copy(RELEASE / f"{name}.ipynb", outbound / f"{name}.ipynb")
    learner.mkdir()
    nbgrader(learner, "fetch_assignment", ASSIGNMENT, exchange=exchange, cache=cache)
    for name in SENT:
        nbformat.write(build(name), learner / ASSIGNMENT / f"{name}.ipynb")
    nbgrader(learner, "submit", ASSIGNMENT, exchange=exchange, cache=cache)

    out = tmp_path / "out"
    graded = run_grade(exchange / COURSE_ID / "inbound", out)
    student = getpass.getuser()
    assert "exchange layout, 1 student(s)" in graded.stdout, graded.stdout
    kept = json.loads((out / "intake.json").read_text())["students"][student]
    assert kept["layout"] == "exchange" and kept["secret"] and kept["timestamp"]
    handback = subprocess.run(
        [sys.executable, "-m", "autograde", "feedback", str(out), "--format", "exchange"], capture_output=True, text=True, timeout=300
    )
    assert handback.returncode == 0 and "not in the exchange layout" not in handback.stderr, handback.stdout + handback.stderr

    course_folder = out / "handback" / "exchange"
    released = nbgrader(course_folder, "release_feedback", ASSIGNMENT, exchange=exchange, cache=cache)
    assert released.stderr.count("Feedback released to") == len(SENT), released.stderr
    nbgrader(learner, "fetch_feedback", ASSIGNMENT, exchange=exchange, cache=cache)
    arrived = {p.name: p.read_bytes() for p in (learner / ASSIGNMENT / "feedback").glob("*/*.html")}
    assert arrived == {f"{name}.html": (out / "feedback" / student / f"{name}.html").read_bytes() for name in SENT}
