"""formgrader's submissions list, read by nbgrader's own API: a student graded with a known
submission time is "autograded" (nbgrader compares the gradebook's time with
OUT/submitted/<student>/<assignment>/timestamp.txt)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autograde.course import Course

from submissions import NOTEBOOKS, build, run_grade, write

ASSIGNMENT = Course.load().assignment


@pytest.mark.slow
def test_formgrader_lists_a_timed_submission_as_autograded(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    for student in ("ana", "ben"):
        write(subs, student, NOTEBOOKS[3], build(NOTEBOOKS[3]))
    (tmp_path / "times.csv").write_text("student_id,submitted_at\nana,2026-12-19T10:00:00+08:00\n")
    run_grade(
        subs,
        out,
        "--timestamps",
        str(tmp_path / "times.csv"),
        "--deadline",
        "2026-12-20T23:59:00+08:00",
    )
    assert (
        (out / "submitted" / "ana" / ASSIGNMENT / "timestamp.txt")
        .read_text()
        .startswith("2026-12-19 02:00:00")
    )
    # no time known: none written
    assert not (out / "submitted" / "ben" / ASSIGNMENT / "timestamp.txt").exists()

    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    here = Path.cwd()
    os.chdir(out)
    try:
        config = PyFileConfigLoader("nbgrader_config.py", path=str(out)).load_config()
        api = NbGraderAPI(CourseDirectory(root=str(out), config=config), config=config)
        assert api.get_autograded_students(ASSIGNMENT) == {"ana", "ben"}
        listed = {s["student"]: s for s in api.get_submissions(ASSIGNMENT)}
        assert listed["ana"]["autograded"] and listed["ana"]["max_score"] > 0, listed["ana"]
        assert api.get_assignment(ASSIGNMENT)["duedate"].startswith("2026-12-20T15:59:00"), (
            "grade sets nbgrader's due date (UTC)"
        )
    finally:
        os.chdir(here)
