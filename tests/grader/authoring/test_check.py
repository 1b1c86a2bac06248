"""``check``'s policy (autograde/authoring/check.py) on grades.csv rows made up here; the whole
command runs in tests/grader/test_grading.py::test_check_command_passes."""

from __future__ import annotations

import dataclasses

from autograde.authoring.check import SourceGrades, answer, edition_problems, grading_problems
from autograde.ledger.facts import Problem, Summary
from autograde.ledger.tables import ScoreRow

SUMMARY = Summary(max_auto=20.0, max_manual=4.0, manual_columns=["r1", "r2"], problems=[])


def grades(summary: Summary = SUMMARY, **changes: dict) -> SourceGrades:
    base = {
        "solutions": ScoreRow("solutions", edition="en", auto_total=20.0, total=20.0, pending=2.0),
        "untouched": ScoreRow("untouched", edition="en", auto_total=0.0, total=0.0, pending=0.0),
        "solutions_zh": ScoreRow(
            "solutions_zh", edition="zh", auto_total=20.0, total=20.0, pending=2.0
        ),
    }
    for student, values in changes.items():
        base[student] = dataclasses.replace(base[student], **values)
    return SourceGrades(base["solutions"], base["untouched"], {"zh": base["solutions_zh"]}, summary)


def test_full_marks_zero_and_the_same_in_every_edition_pass():
    said: list[str] = []
    assert grading_problems(grades(), said.append) == []
    assert said == [
        "instructor sources score 20/20 automatic points, 2 answer(s) (4 points) left for "
        "a person; untouched release scores 0",
        "each translated edition of the sources grades the same: yes",
    ]


def test_each_way_the_sources_or_the_release_can_go_wrong_is_named():
    said: list[str] = []
    found = grading_problems(
        grades(
            dataclasses.replace(
                SUMMARY, problems=[Problem("untouched", "03", "timeout", "timed out", "cell 4")]
            ),
            solutions={"auto_total": 19.0, "pending": 1.0},
            untouched={"total": 1.0},
        ),
        said.append,
    )
    assert [line.split(":")[0] for line in found] == [
        "the sources lose points",
        "the zh edition of the sources grades differently",
        "the sources' written answers are not all left for a person",
        "the untouched release earns points or asks a person to grade blank answers",
        "untouched/03",
    ]
    assert said[1] == "each translated edition of the sources grades the same: NO"


def test_an_edition_differs_only_by_its_scores_not_its_name():
    assert edition_problems(grades()) == []
    assert edition_problems(grades(solutions_zh={"pending": 1.0}))[0].startswith(
        "the zh edition of the sources grades differently"
    )


def test_a_question_is_answered_yes_or_no():
    said: list[str] = []
    assert answer(said.append, "learner tree free of answers", []) == []
    assert answer(said.append, "release in sync", ["01.ipynb differs"]) == ["01.ipynb differs"]
    assert said == ["learner tree free of answers: yes", "release in sync: NO"]


def test_translations_status_counts_what_it_says(root):
    from autograde.authoring.translations import update_or_report
    from autograde.course import Course

    said: list[str] = []
    left = update_or_report(Course.load(root), update=False, only=["runtime"], say=said.append)
    assert (
        len(said) == 2
        and said[0].startswith("tools/locale/zh/runtime.po: ")
        and said[0].endswith(f"units, {left} to do")
    )
    assert said[1] == (
        "every unit is translated" if not left else f"{left} unit(s) to translate or review"
    )
