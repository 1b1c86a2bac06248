"""Every graded rule checked in public (autograde/authoring/rules.py): the check finds the hidden
asserts that no public check stands behind, by running the ideas and the public checks against
wrong answers, and it cannot pass vacuously. On the course: TODO 5's and TODO 6's test cells as
they were before their public cases were added give the two gaps readers found (an incorrect fixed
window let through, ``layers=4.0`` rejected); as they are now, none; and the whole course agrees
with its list of known gaps (what ``check`` asks)."""

from __future__ import annotations

import functools

import pytest

from autograde.authoring import rules
from autograde.course import Course
from autograde.judging.ideas import course_tests

# a small TODO: a layer count must be a whole number >= 1 (4.0 is one)
SOLUTION = """def count(layers):
    ### BEGIN SOLUTION
    if isinstance(layers, bool) or not isinstance(layers, (int, float)) or layers < 1 or int(layers) != layers:
        raise ValueError(f"not a layer count: {layers!r}")
    return int(layers)
    ### END SOLUTION
"""
HIDDEN = """from tools.checks import idea, uses
uses('count')

@idea('valid', 1.0, 'A whole number >= 1 is a layer count, anything else raises ValueError')
def _():
    for bad in (0, 2.5, -3):
        try:
            count(bad)
        except ValueError:
            continue
        raise AssertionError(f"count({bad}) must raise ValueError")
    assert count(4.0) == 4, "4.0 is a whole number"
"""
PUBLIC = '''from tools.checks import PublicChecks
checks = PublicChecks('TODO 9 · count')

@checks.case(idea='valid')
def rejects_what_is_not_a_layer_count():
    """A whole number >= 1, else ValueError"""
    for bad in (0, 2.5, -1):
        try:
            count(bad)
        except ValueError:
            continue
        raise AssertionError(f"count({bad}) must raise ValueError")
    assert count(2) == 2, "2 is a layer count"
    CHECK_A_FLOAT

checks.run()
'''


def _report(public_float: str, hidden: str = HIDDEN, solution: str = SOLUTION) -> rules.CellReport:
    test = {"grade_id": "todo9_count", "points": 1.0, "hidden": hidden, "public": PUBLIC.replace("CHECK_A_FLOAT", public_float)}
    return rules.check_cell(rules.load_cell(test, {"todo9_solution": solution}))


def test_a_rule_checked_in_public_is_no_gap():
    report = _report('assert count(3.0) == 3, "3.0 is a whole number"')
    assert report.problems == [] and report.gaps == []
    assert report.tried > 0 and report.graded > 0  # wrong answers ran, and the idea failed on some


@pytest.mark.parametrize(
    "public_float",
    [
        "pass",  # no public case for a float that is a whole number
        "count(3.0)",  # called, its result never checked
        "try:\n        assert count(3.0) == 3\n    except Exception:\n        pass",  # a failure swallowed
    ],
    ids=["absent", "result_ignored", "failure_swallowed"],
)
def test_a_rule_the_public_checks_never_grade_is_found(public_float):
    report = _report(public_float)
    assert report.problems == []
    assert [(gap.idea, gap.fact, gap.decision) for gap in report.gaps] == [("valid", "args[0] is a float >= 0", "returns a int")]
    assert report.gaps[0].example == "count(4.0)"


def test_an_idea_no_wrong_answer_can_fail_is_reported_not_passed():
    blind = HIDDEN.replace("    assert count(4.0) == 4", "    try:\n        count(4.0)\n    except Exception:\n        pass\n    assert True")
    blind = blind.replace("except ValueError:", "except Exception:").replace(
        '        raise AssertionError(f"count({bad}) must raise ValueError")', "        pass"
    )
    report = _report('assert count(3.0) == 3, "3.0 is a whole number"', hidden=blind)
    assert any("no wrong answer on the calls of idea 'valid' makes it fail" in problem for problem in report.problems), report.problems


def test_a_reference_answer_that_fails_its_own_checks_is_reported():
    report = _report('assert count(3.0) == 3, "3.0 is a whole number"', solution=SOLUTION.replace("return int(layers)", "return int(layers) + 1"))
    assert any("the reference answer fails" in problem for problem in report.problems) and report.gaps == []


# ---------------------------------------------------------------- the course

# the public cases added to TODO 5's and TODO 6's test cells for these two rules (and the others the
# check found there), each as (before, after): the cells as they were are the cells now, undone
BEFORE_THE_PUBLIC_CASES = {
    "todo5_decide_overlap": [
        (
            '"""A wrong copy, or a missing precondition flag, rejects the run first, however fast"""',
            '"""A case that is not correct (a flag False, None or missing; fixed or calibrated) rejects the run first, however fast"""',
        ),
        (
            """    missing = _case()
    del missing['preconditions_met']
    got = decide_overlap([missing], _controls())
    assert got == 'reject_incorrect_path', f"a case without preconditions_met is not correct: got {got!r}"
""",
            """    for field in ('copy_correct', 'compute_correct', 'preconditions_met'):
        for value in (False, None):
            case = _case()
            case[field] = value
            got = decide_overlap([case], _controls())
            assert got == 'reject_incorrect_path', f"{field} = {value} is not correct: got {got!r}"
        missing = _case()
        del missing[field]
        got = decide_overlap([missing], _controls())
        assert got == 'reject_incorrect_path', f"a case without {field} is not correct: got {got!r}"
    fixed = _case(window='fixed')
    fixed['compute_correct'] = False
    got = decide_overlap([fixed, _case()], _controls())
    assert got == 'reject_incorrect_path', f"an incorrect fixed window rejects the run too (rule 1: any case, fixed or calibrated): got {got!r}"
""",
        ),
        (
            "",
            """    got = decide_overlap([_case()], [{'name': 'control_0'}])
    assert got == 'reject_instrument_fault', f"a control without overlap_confirmed is not False: got {got!r}"
""",
        ),
    ],
    "todo6_stream_layers": [
        (
            "(0.0, 0.0, 10.0, 0, 1.0, 0.0), (0.0, 0.0, 10.0, 2.5",
            "(0.0, 0.0, 10.0, 0, 1.0, 0.0), (0.0, 0.0, 10.0, -2, 1.0, 0.0), (0.0, 0.0, 10.0, 2.5",
        ),
        (
            "",
            """    try:
        stream_layers(0.0, 0.0, 10.0, 4.0, 1.0, 0.0)
    except ValueError as exc:
        raise AssertionError(f"4.0 is a whole number of layers: stream_layers(0.0, 0.0, 10.0, 4.0, 1.0, 0.0) raised ValueError: {exc}") from None
""",
        ),
    ],
}
# the two gaps readers found, as the check names them
FIXED_WINDOW = (
    "todo5_decide_overlap",
    "correctness_first",
    "args[0][*]['window'] is a string the answer does not name",
    "returns 'reject_incorrect_path'",
)
FLOAT_LAYERS = ("todo6_stream_layers", "valid_input", "args[3] is a float >= 0")


@functools.cache
def _course() -> tuple[dict[str, dict], dict[str, str]]:
    found = course_tests(Course.load().source_paths())
    tests = {test["grade_id"]: test for notebook in found.values() for test in notebook["tests"]}
    return tests, {gid: source for notebook in found.values() for gid, source in notebook["solutions"].items()}


def _gaps(grade_id: str, undone: bool) -> list[rules.Gap]:
    tests, solutions = _course()
    test = dict(tests[grade_id])
    for before, after in BEFORE_THE_PUBLIC_CASES[grade_id] if undone else []:
        assert test["public"].count(after) == 1, f"the public case added to {grade_id} changed since: {after[:80]!r}"
        test["public"] = test["public"].replace(after, before)
    report = rules.check_cell(rules.load_cell(test, solutions))
    assert report.problems == []
    return report.gaps


@pytest.mark.parametrize("grade_id", sorted(BEFORE_THE_PUBLIC_CASES))
def test_the_two_gaps_readers_found_are_found_on_the_cells_before_their_public_cases(grade_id):
    gaps = _gaps(grade_id, undone=True)
    for gap in gaps:
        print(gap.line())
    if grade_id == FIXED_WINDOW[0]:
        assert [g for g in gaps if (g.grade_id, g.idea, g.fact, g.decision) == FIXED_WINDOW], "the fixed window let through"
        gap = next(g for g in gaps if g.fact == FIXED_WINDOW[2])
        assert "'window': 'fixed'" in gap.example and "an incorrect fixed window rejects the run too" in gap.said
    else:
        assert [g for g in gaps if (g.grade_id, g.idea, g.fact) == FLOAT_LAYERS], "layers=4.0 rejected"
        gap = next(g for g in gaps if g.fact == FLOAT_LAYERS[2])
        assert gap.example == "stream_layers(5.0, 0.0, 10.0, 4.0, 1.0, 0.0)" and gap.wrong == "raises ValueError"


@pytest.mark.parametrize("grade_id", sorted(BEFORE_THE_PUBLIC_CASES))
def test_todo_5_and_6_check_every_graded_rule_in_public_now(grade_id):
    assert [gap.line() for gap in _gaps(grade_id, undone=False)] == []


def test_the_course_agrees_with_its_list_of_known_gaps(root):
    """What ``check`` asks: no gap the list does not name, and no line for a gap that is closed."""
    course = Course.load(root)
    assert rules.rule_problems(course.root, course.source_paths()) == []
    listed = rules.known_gaps(course.root)
    assert not [line for line in listed if line.startswith(("todo5_", "todo6_"))]
