"""A grading worker: ``python -m autograde.job ASSIGNMENT STUDENT JOBDIR...``.

Each JOBDIR is an nbgrader course folder that holds one submitted notebook. For each in
turn the worker writes JOBDIR/started (the time), runs nbgrader's autograde and then its
feedback in-process (one start-up for all of a student's notebooks), and writes
JOBDIR/result.json. The parent watches ``started`` and kills this process and its kernel
when a notebook runs past the wall-clock limit."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def grade_job(jobdir: Path, assignment: str, student: str) -> dict:
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    os.chdir(jobdir)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(jobdir)).load_config()
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    result: dict = {"autograde": api.autograde(assignment, student, force=True, create=True)}
    notebooks = sorted((jobdir / "autograded" / student / assignment).glob("*.ipynb"))
    if result["autograde"].get("success") and len(notebooks) == 1:
        with Gradebook(f"sqlite:///{jobdir / 'gradebook.db'}") as gradebook:
            try:
                submitted = gradebook.find_submission_notebook(notebooks[0].stem, assignment, student)
                result["scores"] = {g.name: float(g.score or 0.0) for g in submitted.grades}
            except MissingEntry:
                pass
        result["feedback"] = api.generate_feedback(assignment, student, force=True)
    return result


def main(argv: list[str]) -> int:
    assignment, student, jobdirs = argv[0], argv[1], [Path(p).resolve() for p in argv[2:]]
    for jobdir in jobdirs:
        (jobdir / "started.tmp").write_text(repr(time.time()))
        os.replace(jobdir / "started.tmp", jobdir / "started")
        result = grade_job(jobdir, assignment, student)
        tmp = jobdir / "result.json.tmp"
        tmp.write_text(json.dumps(result), encoding="utf-8")
        os.replace(tmp, jobdir / "result.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
