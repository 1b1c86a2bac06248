"""Generate the learner release from the instructor sources with nbgrader."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import nbformat

from ..course import Course, prepare_course_dir, run_nbgrader
from ..judging.ideas import split_hidden


class ReleaseFailed(RuntimeError):
    pass


def generate(course: Course, build: Path, strip_hidden: bool = False) -> Path:
    """Run ``nbgrader generate_assignment`` in a fresh course folder ``build``.

    Returns the folder that holds the released notebooks. ``build/gradebook.db`` then
    holds every grade cell: autograding restores test cells from there. With
    ``strip_hidden`` the sources lose their hidden tests first, so the test cells that
    autograding restores into a learner's notebook hold the public checks only (the
    grading master: hidden tests run in the trusted judge, never in a kernel).
    """
    prepare_course_dir(build)
    source = build / "source" / course.assignment
    source.mkdir(parents=True)
    for path in course.source_paths():
        if strip_hidden:
            nb = nbformat.read(path, as_version=4)
            for cell in nb.cells:
                if cell.metadata.get("nbgrader", {}).get("grade") and not cell.metadata["nbgrader"].get("solution"):
                    cell.source = split_hidden(cell.source)[0].rstrip()
            nbformat.write(nb, source / path.name)
        else:
            shutil.copy(path, source / path.name)
    result = run_nbgrader(["generate_assignment", course.assignment, "--force"], build, timeout=600)
    released = build / "release" / course.assignment
    if result.returncode != 0 or not released.is_dir():
        raise ReleaseFailed(f"nbgrader generate_assignment failed:\n{result.log[-4000:]}")
    return released


def write_release(course: Course) -> list[Path]:
    """Regenerate ``notebooks/`` from ``solutions/``."""
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        released = generate(course, Path(tmp) / "course")
        course.release.mkdir(exist_ok=True)
        for stale in course.release.glob("*.ipynb"):
            stale.unlink()
        written = []
        for name in course.notebooks:
            target = course.release / f"{name}.ipynb"
            shutil.copy(released / f"{name}.ipynb", target)
            written.append(target)
    return written


def release_differences(course: Course) -> list[str]:
    """What differs between ``notebooks/`` and a fresh release (empty when in sync)."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        released = generate(course, Path(tmp) / "course")
        expected = {p.name for p in released.glob("*.ipynb")}
        present = {p.name for p in course.release.glob("*.ipynb")}
        for name in sorted(expected - present):
            problems.append(f"notebooks/{name} is missing")
        for name in sorted(present - expected):
            problems.append(f"notebooks/{name} is not generated from solutions/")
        for name in sorted(expected & present):
            fresh = json.loads((released / name).read_text(encoding="utf-8"))
            committed = json.loads((course.release / name).read_text(encoding="utf-8"))
            if fresh != committed:
                problems.append(f"notebooks/{name} is stale: run `python -m autograde release`")
    return problems
