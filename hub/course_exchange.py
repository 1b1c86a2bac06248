"""The learner's checks before a submission leaves their lab (nbgrader's ``ExchangeFactory.submit``,
set in each role's nbgrader_config.py by hub/classroom.py; this file sits on the servers'
PYTHONPATH).

nbgrader's own ``submit`` copies whatever lies in the assignment folder, and the grader then takes
each learner's newest submission. So a submission that cannot be graded would replace one that can.
Before anything is copied, this refuses, with a message that says what to do (the Assignments tab
shows it in its "Invalid Submission" dialog; ``nbgrader submit`` prints it):

- a submission after the feedback on an earlier one was released (the assignment has been graded),
  in this edition's assignment or another's (``CourseSubmit.editions``: one assignment, released
  once per edition);
- a notebook that is not this assignment's: under a released notebook's name, one that shares none
  of its graded cells, or an extra notebook with graded cells of its own;
- a submission with nothing answered: every exercise cell as released.

Nothing is lost by a refusal: the learner's folder is not touched, and their earlier submission
stays. Runs in the learner's own server with nbgrader's Python; imports nothing of the course."""

from __future__ import annotations

import glob
import json
import os

from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import notebook_hash
from traitlets import List, Unicode

SKIPPED = (".ipynb_checkpoints", "feedback")  # JupyterLab's checkpoints; fetched feedback pages


def notebooks_in(folder: str) -> dict[str, str]:
    """Every notebook under ``folder`` by its path relative to it (nbgrader submits them all)."""
    found = {}
    for top, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in SKIPPED and not (top == folder and d == "feedback")]
        for name in files:
            if name.endswith(".ipynb"):
                path = os.path.join(top, name)
                found[os.path.relpath(path, folder)] = path
    return found


def graded_cells(path: str) -> dict[str, tuple[bool, str]] | None:
    """{grade_id: (is an exercise, source)} of a notebook's nbgrader cells; None when it is not a
    notebook."""
    try:
        with open(path, encoding="utf-8") as handle:
            nb = json.load(handle)
        cells = {}
        for cell in nb.get("cells", []):
            meta = cell.get("metadata", {}).get("nbgrader") or {}
            if meta.get("grade_id"):
                source = cell.get("source", "")
                cells[meta["grade_id"]] = (
                    bool(meta.get("solution")),
                    "".join(source) if isinstance(source, list) else source,
                )
        return cells
    except (OSError, ValueError, AttributeError, TypeError):
        return None


def problems(submitted: str, released: str, assignment: str) -> list[str]:
    """What makes the folder ``submitted`` no submission of the release in ``released``; [] when it
    is one."""
    mine, theirs = notebooks_in(submitted), notebooks_in(released)
    found, answered = [], False
    for rel, path in sorted(mine.items()):
        cells = graded_cells(path)
        if cells is None:
            found.append(
                f"{rel} cannot be read as a notebook: open it in JupyterLab and save it "
                "again, or fetch a fresh copy"
            )
            continue
        if rel not in theirs:
            if cells:
                found.append(
                    f"{rel} is not a notebook of {assignment} (its graded cells are "
                    "another assignment's): move it out of the folder"
                )
            continue
        released_cells = graded_cells(theirs[rel]) or {}
        if released_cells and not set(cells) & set(released_cells):
            found.append(
                f"{rel} is not {assignment}'s {os.path.basename(rel)}: none of its graded "
                "cells are this assignment's "
                "(a notebook from another assignment saved under this name?). Put your "
                "answers back into this assignment's "
                "notebook (rename yours, then fetch the assignment again to restore the "
                "missing file)"
            )
            continue
        answered = answered or any(
            solution and gid in released_cells and source.strip() != released_cells[gid][1].strip()
            for gid, (solution, source) in cells.items()
        )
    if not found and not answered:
        found.append(
            f"nothing is answered: every exercise cell of {assignment} is as it was "
            "released. Write your answers, save, then submit"
        )
    return found


class CourseSubmit(ExchangeSubmit):
    """nbgrader's submit, after the course's checks (the module's docstring)."""

    editions = List(
        Unicode(),
        help="The assignment names under which one assignment is released, one per edition: "
        "feedback released on a "
        "submission to any of them means the assignment has been graded.",
    ).tag(config=True)

    def released_feedback(self) -> tuple[str, str] | None:
        """(the time, the assignment name) of an earlier submission of this assignment, in any of
        its editions, whose feedback is in the exchange."""
        feedback = os.path.join(self.root, self.coursedir.course_id, "feedback")
        names = (
            self.editions
            if self.coursedir.assignment_id in self.editions
            else [self.coursedir.assignment_id]
        )
        folders = [
            f
            for name in names
            for f in glob.glob(
                os.path.join(glob.escape(self.cache_path), f"*+{glob.escape(name)}+*")
            )
        ]
        for folder in sorted(folders):
            try:
                with open(os.path.join(folder, "submission_secret.txt")) as handle:
                    secret = handle.read()
            except OSError:
                continue
            for path in glob.glob(os.path.join(folder, "*.ipynb")):
                notebook_id = os.path.splitext(os.path.basename(path))[0]
                if os.path.exists(
                    os.path.join(
                        feedback, f"{notebook_hash(secret=secret, notebook_id=notebook_id)}.html"
                    )
                ):
                    return folder.rsplit("+", 1)[-1], os.path.basename(folder).split("+")[-2]
        return None

    def copy_files(self):
        self.init_release()
        assignment = self.coursedir.assignment_id
        graded = self.released_feedback()
        if graded:
            when, name = graded
            to = "" if name == assignment else f" to {name}"
            self.fail(
                f"Not submitted: the feedback on your submission{to} of {when} has been "
                f"released, so {assignment} has been graded "
                "and a new submission would not be. Your files and your earlier "
                "submission are unchanged. If you need to "
                "hand in again, ask your instructor."
            )
        found = problems(self.src_path, self.release_path, assignment)
        if found:
            self.fail(
                "Not submitted (your files and any earlier submission are unchanged): "
                f"{'; '.join(found)}."
            )
        super().copy_files()
