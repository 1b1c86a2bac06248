"""One grading job, run as ``python -m autograde.job JOBDIR ASSIGNMENT STUDENT`` in a
course folder that holds one submitted notebook: nbgrader's autograde, then its feedback,
in one process (one start-up instead of two). Writes JOBDIR/result.json. The parent
enforces the wall-clock limit by killing this process and its kernel."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    jobdir, assignment, student = Path(argv[0]).resolve(), argv[1], argv[2]
    os.chdir(jobdir)
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(jobdir)).load_config()
    coursedir = CourseDirectory(config=config)
    api = NbGraderAPI(coursedir=coursedir, config=config)
    result: dict = {"autograde": api.autograde(assignment, student, force=True, create=True)}
    notebooks = sorted((jobdir / "autograded" / student / assignment).glob("*.ipynb"))
    result["scores"] = {}
    if result["autograde"].get("success") and notebooks:
        with Gradebook(f"sqlite:///{jobdir / 'gradebook.db'}") as gradebook:
            for path in notebooks:
                try:
                    submitted = gradebook.find_submission_notebook(path.stem, assignment, student)
                except MissingEntry:
                    continue
                result["scores"][path.stem] = {g.name: float(g.score or 0.0) for g in submitted.grades}
        result["feedback"] = api.generate_feedback(assignment, student, force=True)
    (jobdir / "result.json").write_text(json.dumps(result), encoding="utf-8")
    return 0 if result["autograde"].get("success") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
