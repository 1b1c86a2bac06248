"""A term through nbgrader's own exchange, checked by nbgrader's own commands: a learner fetches and
submits with ``nbgrader fetch_assignment`` and ``nbgrader submit``; the course grades the exchange's
inbound/; the feedback written with ``feedback --format exchange`` is released with ``nbgrader
release_feedback`` and arrives in the learner's folder with ``nbgrader fetch_feedback``, byte for
byte the page grading wrote."""

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
    argv = [
        sys.executable,
        "-m",
        "nbgrader",
        *args,
        f"--course={COURSE_ID}",
        f"--Exchange.root={exchange}",
        f"--Exchange.cache={cache}",
    ]
    run = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return run


@pytest.mark.slow
def test_feedback_goes_back_through_nbgraders_own_release_and_fetch(tmp_path):
    exchange, cache, learner = tmp_path / "exchange", tmp_path / "cache", tmp_path / "learner"
    # what release_assignment leaves there
    outbound = exchange / COURSE_ID / "outbound" / ASSIGNMENT
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
        [sys.executable, "-m", "autograde", "feedback", str(out), "--format", "exchange"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert handback.returncode == 0 and "not in the exchange layout" not in handback.stderr, (
        handback.stdout + handback.stderr
    )

    course_folder = out / "handback" / "exchange"
    released = nbgrader(
        course_folder, "release_feedback", ASSIGNMENT, exchange=exchange, cache=cache
    )
    assert released.stderr.count("Feedback released to") == len(SENT), released.stderr
    nbgrader(learner, "fetch_feedback", ASSIGNMENT, exchange=exchange, cache=cache)
    arrived = {p.name: p.read_bytes() for p in (learner / ASSIGNMENT / "feedback").glob("*/*.html")}
    assert arrived == {
        f"{name}.html": (out / "feedback" / student / f"{name}.html").read_bytes() for name in SENT
    }


@pytest.mark.slow
def test_the_chinese_edition_as_its_own_assignment_goes_round_through_nbgrader(tmp_path):
    """The Chinese edition released as its own assignment (course.toml's [course.editions]): a
    learner fetches both editions, submits a draft in English, then their answers in Chinese; the
    grader takes the Chinese (the newest) as the course's assignment, in Chinese, names the other,
    and its page goes back to the Chinese assignment, where ``fetch_feedback`` finds it; the English
    assignment gets nothing."""
    zh = dict(Course.load().editions)["zh"]
    exchange, cache, learner = tmp_path / "exchange", tmp_path / "cache", tmp_path / "learner"
    for name, folder in ((ASSIGNMENT, RELEASE), (zh, RELEASE / "zh")):
        outbound = exchange / COURSE_ID / "outbound" / name
        outbound.mkdir(parents=True)
        shutil.copy(folder / f"{SENT[0]}.ipynb", outbound / f"{SENT[0]}.ipynb")
    (exchange / COURSE_ID / "inbound").mkdir()
    (exchange / COURSE_ID / "feedback").mkdir()
    learner.mkdir()
    for name, nb in (
        (ASSIGNMENT, build(SENT[0], fill=False, edits={"reflection_01_q1": "A draft."})),
        (zh, build(SENT[0], edition="zh")),
    ):
        nbgrader(learner, "fetch_assignment", name, exchange=exchange, cache=cache)
        nbformat.write(nb, learner / name / f"{SENT[0]}.ipynb")
        nbgrader(learner, "submit", name, exchange=exchange, cache=cache)

    out = tmp_path / "out"
    graded = run_grade(exchange / COURSE_ID / "inbound", out)
    student = getpass.getuser()
    intake = json.loads((out / "intake.json").read_text())
    assert intake["students"][student]["assignment"] == zh
    assert any(
        f"to {ASSIGNMENT}) was not used" in note and "two editions" in note
        for note in intake["notes"]
    ), intake["notes"]
    row = next(
        r
        for r in (out / "grades.csv").read_text(encoding="utf-8").splitlines()
        if r.startswith(f"{student},")
    )
    assert row.endswith(",zh"), (row, graded.stdout)
    handback = subprocess.run(
        [sys.executable, "-m", "autograde", "feedback", str(out), "--format", "exchange"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert handback.returncode == 0, handback.stdout + handback.stderr
    course_folder = out / "handback" / "exchange"
    assert (
        nbgrader(
            course_folder, "release_feedback", zh, exchange=exchange, cache=cache
        ).stderr.count("Feedback released to")
        == 1
    )
    assert (
        "Feedback released to"
        not in nbgrader(
            course_folder, "release_feedback", ASSIGNMENT, exchange=exchange, cache=cache
        ).stderr
    )
    nbgrader(learner, "fetch_feedback", zh, exchange=exchange, cache=cache)
    nbgrader(learner, "fetch_feedback", ASSIGNMENT, exchange=exchange, cache=cache)
    assert {p.name: p.read_bytes() for p in (learner / zh / "feedback").glob("*/*.html")} == {
        f"{SENT[0]}.html": (out / "feedback" / student / f"{SENT[0]}.html").read_bytes()
    }
    # the English draft was not graded
    assert not list((learner / ASSIGNMENT).glob("feedback/*/*.html"))
