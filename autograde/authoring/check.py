"""``python -m autograde check``: may this release go out? The release is what ``solutions/`` makes,
every edition's catalogs are complete and its figure glyphs shipped, nothing leaks, the hidden tests
follow the ideas format, every rule they grade is checked in public (``rules.py``: no gap at all),
and a grading run of the sources (in every edition) and of the untouched release gives full marks
and zero. Each question is answered with one line, ``yes`` or ``NO``; the problems behind a ``NO``
are returned, for the command to list."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..course import Course
from ..grading import Options, grade_batch
from ..judging.ideas import check_course
from ..ledger.facts import Summary
from ..ledger.folder import Ledger
from ..ledger.tables import ScoreRow
from ..publish import catalogs, editions, fonts
from ..publish.leaks import scan_learner_tree
from ..publish.release import release_differences
from .rules import rule_problems
from .translations import drawn_texts

Say = Callable[[str], None]
# the grades.csv columns an edition may change
IGNORED_BY_EDITION = {"student_id": "", "edition": ""}


def answer(say: Say, question: str, problems: list[str]) -> list[str]:
    """Say ``question: yes`` (or ``NO``) and hand the problems on."""
    say(f"{question}: " + ("yes" if not problems else "NO"))
    return problems


def catalog_problems(course: Course) -> list[str]:
    """What keeps a translated edition from being released: its catalogs, or a glyph its figures
    draw that the shipped CJK font lacks."""
    problems = [
        problem for spec in editions.course_catalogs(course) for problem in catalogs.problems(spec)
    ]
    missing = fonts.missing_glyphs(drawn_texts(course) if not problems else [])
    if missing:
        problems.append(
            f"the shipped CJK font lacks {''.join(missing[:20])}: run `python -m "
            "autograde translations font`"
        )
    return problems


@dataclass(frozen=True)
class SourceGrades:
    """How ``check`` graded the course: grades.csv's row of the sources, of the untouched release
    and of the sources in each translated edition (by language), and the batch's summary."""

    solutions: ScoreRow
    untouched: ScoreRow
    translated: dict[str, ScoreRow]
    summary: Summary


def grade_sources(course: Course, workers: int) -> SourceGrades:
    """Grade three students: ``solutions`` (the sources), ``untouched`` (the release) and
    ``solutions_<lang>`` (the sources in each translated edition)."""
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp:
        subs = Path(tmp) / "submissions"
        for student, folder in (("solutions", course.solutions), ("untouched", course.release)):
            (subs / student).mkdir(parents=True)
            for name in course.notebooks:
                shutil.copy(folder / f"{name}.ipynb", subs / student / f"{name}.ipynb")
        for lang in editions.translated_editions():  # the same answers in each translated edition
            (subs / f"solutions_{lang}").mkdir(parents=True)
            for path in course.source_paths():
                nbformat.write(
                    editions.edition_source(path, lang, course),
                    subs / f"solutions_{lang}" / path.name,
                )
        summary = grade_batch(
            course, subs, Path(tmp) / "out", Options(workers=workers, progress=False)
        )
        rows = {
            row.student_id: row for row in Ledger(Path(tmp) / "out", course).scores_sheet().rows
        }
    translated = {lang: rows[f"solutions_{lang}"] for lang in editions.translated_editions()}
    return SourceGrades(rows["solutions"], rows["untouched"], translated, summary)


def edition_problems(grades: SourceGrades) -> list[str]:
    """A translated edition of the sources that grades otherwise than the English one."""
    english = dataclasses.replace(grades.solutions, **IGNORED_BY_EDITION)
    return [
        f"the {lang} edition of the sources grades differently: {row}"
        for lang, row in grades.translated.items()
        if dataclasses.replace(row, **IGNORED_BY_EDITION) != english
    ]


def grading_problems(grades: SourceGrades, say: Say) -> list[str]:
    """The sources must score every automatic point and leave each written answer for a person, in
    every edition; the untouched release must score nothing; no notebook may need a look."""
    sources, untouched, summary = grades.solutions, grades.untouched, grades.summary
    full, zero, waiting = sources.auto_total, untouched.total, int(sources.pending)
    say(
        f"instructor sources score {full:g}/{summary.max_auto:g} automatic points, "
        f"{waiting} answer(s) "
        f"({summary.max_manual:g} points) left for a person; untouched release scores {zero:g}"
    )
    problems = [f"the sources lose points: {sources}"] if full != summary.max_auto else []
    problems += answer(
        say, "each translated edition of the sources grades the same", edition_problems(grades)
    )
    if waiting != len(summary.manual_columns):
        problems.append(f"the sources' written answers are not all left for a person: {sources}")
    if zero != 0 or int(untouched.pending):
        problems.append(
            "the untouched release earns points or asks a person to grade blank "
            f"answers: {untouched}"
        )
    for problem in summary.problems:
        problems.append(
            f"{problem.student_id}/{problem.notebook}: {problem.what_happened} {problem.detail}"
        )
    return problems


def check_release(course: Course, workers: int, say: Say = print) -> list[str]:
    """Every question of ``check``, each answered through ``say``; the problems found (none: it may
    go out)."""
    problems = answer(say, "release in sync with solutions/", release_differences(course))
    problems += answer(
        say,
        "every edition's catalogs complete, and its figure glyphs shipped",
        catalog_problems(course),
    )
    problems += answer(
        say, "learner tree free of answers and hidden tests", scan_learner_tree(course)
    )
    problems += answer(
        say,
        "hidden tests follow the ideas format and their points add up",
        check_course(course.source_paths()),
    )
    problems += answer(
        say, "every graded rule is checked in public", rule_problems(course.source_paths())
    )
    return problems + grading_problems(grade_sources(course, workers), say)
