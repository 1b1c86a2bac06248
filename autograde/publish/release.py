"""Generate the learner release from the instructor sources with nbgrader."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import nbformat

from tools.i18n import EDITIONS

from ..course import Course, prepare_course_dir, run_nbgrader
from ..errors import GraderError
from ..judging.ideas import split_hidden
from .catalogs import CatalogError
from .editions import EditionError, code_differences, edition_source, setup_messages


class ReleaseFailed(GraderError, RuntimeError):
    pass


def generate(course: Course, build: Path, strip_hidden: bool = False, language: str = "en") -> Path:
    """Run ``nbgrader generate_assignment`` in a fresh course folder ``build``.

    Returns the folder that holds the released notebooks. ``build/gradebook.db`` then
    holds every grade cell: autograding restores test cells from there. With
    ``strip_hidden`` the sources lose their hidden tests first, so the test cells that
    autograding restores into a learner's notebook hold the public checks only (the
    grading master: hidden tests run in the trusted judge, never in a kernel).
    ``language`` is the edition: its markdown comes from the translation catalogs
    (editions.edition_source), its code is the same in every edition.
    """
    prepare_course_dir(build)
    # nbgrader_config.py gives the edition its own stubs
    (build / "EDITION").write_text(language, encoding="utf-8")
    source = build / "source" / course.assignment
    source.mkdir(parents=True)
    for path in course.source_paths():
        nb = edition_source(path, language, course)
        if strip_hidden:
            for cell in nb.cells:
                if cell.metadata.get("nbgrader", {}).get("grade") and not cell.metadata[
                    "nbgrader"
                ].get("solution"):
                    cell.source = split_hidden(cell.source)[0].rstrip()
        nbformat.write(nb, source / path.name)
    result = run_nbgrader(["generate_assignment", course.assignment, "--force"], build, timeout=600)
    released = build / "release" / course.assignment
    if result.returncode != 0 or not released.is_dir():
        raise ReleaseFailed(f"nbgrader generate_assignment failed:\n{result.log[-4000:]}")
    return released


def release_folder(course: Course, language: str) -> Path:
    """Where an edition's release lives: ``notebooks/`` for English, ``notebooks/<lang>/`` beside
    it."""
    return course.release if language == "en" else course.release / language


def write_release(course: Course) -> list[Path]:
    """Regenerate ``notebooks/`` (English) and ``notebooks/<lang>/`` (each translated edition) from
    ``solutions/``. Every edition is generated before any file is replaced, so a catalog that is not
    complete leaves the release as it was (CatalogError names what is missing)."""
    written = []
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        released = {lang: generate(course, Path(tmp) / lang, language=lang) for lang in EDITIONS}
        for lang, folder in released.items():
            target_dir = release_folder(course, lang)
            target_dir.mkdir(exist_ok=True)
            for stale in target_dir.glob("*.ipynb"):
                stale.unlink()
            for name in course.notebooks:
                target = target_dir / f"{name}.ipynb"
                shutil.copy(folder / f"{name}.ipynb", target)
                written.append(target)
    return written


def release_differences(course: Course) -> list[str]:
    """What differs between the committed editions and a fresh release (empty when in sync), and
    any code cell in which a translated edition differs from the English one."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        for lang in EDITIONS:
            try:
                released = generate(course, Path(tmp) / lang, language=lang)
            except CatalogError as exc:
                problems += exc.problems
                continue
            except EditionError as exc:
                problems.append(str(exc))
                continue
            problems += _folder_differences(released, release_folder(course, lang), course.root)
            if lang != "en":
                messages = setup_messages(course, lang)
                for name in course.notebooks:
                    problems += code_differences(
                        release_folder(course, "en") / f"{name}.ipynb",
                        released / f"{name}.ipynb",
                        lang,
                        messages,
                    )
    return problems


def _folder_differences(released: Path, committed_dir: Path, root: Path) -> list[str]:
    problems = []
    shown = committed_dir.relative_to(root).as_posix()
    expected = {p.name for p in released.glob("*.ipynb")}
    present = {p.name for p in committed_dir.glob("*.ipynb")}
    for name in sorted(expected - present):
        problems.append(f"{shown}/{name} is missing")
    for name in sorted(present - expected):
        problems.append(f"{shown}/{name} is not generated from solutions/")
    for name in sorted(expected & present):
        fresh = json.loads((released / name).read_text(encoding="utf-8"))
        committed = json.loads((committed_dir / name).read_text(encoding="utf-8"))
        if fresh != committed:
            problems.append(f"{shown}/{name} is stale: run `python -m autograde release`")
    return problems
