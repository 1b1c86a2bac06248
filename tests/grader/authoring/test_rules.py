"""Every graded rule checked in public (autograde/authoring/rules.py): the check finds the hidden
asserts that no public check stands behind, by running the ideas and the public checks against
wrong answers, and it cannot pass vacuously. On the course: TODO 5's and TODO 6's test cells as
they were before their public cases were added give the two gaps readers found (an incorrect fixed
window let through, ``layers=4.0`` rejected); as they are now, none; and the whole course
checks every rule it grades in public (what ``check`` asks: no gap at all). How finely the classes
are cut (``rule_classes.py``) is tested refinement by refinement, each beside its control."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from autograde.authoring import rules
from autograde.authoring.rule_classes import Classes, Outcome
from autograde.course import Course
from autograde.judging.ideas import GradeCellTests, course_tests

# a small TODO: a layer count must be a whole number >= 1 (4.0 is one)
SOLUTION = """def count(layers):
    ### BEGIN SOLUTION
    if isinstance(layers, bool) or not isinstance(layers, (int, float)) or layers < 1 or \
int(layers) != layers:
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
    test = GradeCellTests("todo9_count", 1.0, hidden, PUBLIC.replace("CHECK_A_FLOAT", public_float))
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
        # a failure swallowed
        "try:\n        assert count(3.0) == 3\n    except Exception:\n        pass",
    ],
    ids=["absent", "result_ignored", "failure_swallowed"],
)
def test_a_rule_the_public_checks_never_grade_is_found(public_float):
    report = _report(public_float)
    assert report.problems == []
    assert [(gap.idea, gap.fact, gap.decision) for gap in report.gaps] == [
        ("valid", "args[0] is a float >= 0", "returns a int")
    ]
    assert report.gaps[0].example == "count(4.0)"


def test_an_idea_no_wrong_answer_can_fail_is_reported_not_passed():
    blind = HIDDEN.replace(
        "    assert count(4.0) == 4",
        "    try:\n        count(4.0)\n    except Exception:\n        pass\n    assert True",
    )
    blind = blind.replace("except ValueError:", "except Exception:").replace(
        '        raise AssertionError(f"count({bad}) must raise ValueError")', "        pass"
    )
    report = _report('assert count(3.0) == 3, "3.0 is a whole number"', hidden=blind)
    assert any(
        "no wrong answer on the calls of idea 'valid' makes it fail" in problem
        for problem in report.problems
    ), report.problems


def test_a_reference_answer_that_fails_its_own_checks_is_reported():
    report = _report(
        'assert count(3.0) == 3, "3.0 is a whole number"',
        solution=SOLUTION.replace("return int(layers)", "return int(layers) + 1"),
    )
    assert (
        any("the reference answer fails" in problem for problem in report.problems)
        and report.gaps == []
    )


# ---------------------------------------------------------------- how finely the classes are cut
# Each refinement merges classes the reference answer treats alike, proved by running it; each
# comes with its control: the same cell where the answer does tell them apart, and the gap found.


def _toy(solution: str, hidden: str, public: str, uses: str) -> rules.CellReport:
    """A one-idea cell: ``hidden`` the idea's body, ``public`` the one public case's body."""
    indent = lambda body: "".join(f"    {line}\n" for line in body.strip("\n").splitlines())  # noqa: E731
    hidden_src = (
        f"from tools.checks import idea, uses\nuses('{uses}')\n\n@idea('rule', 1.0, 'The "
        f"rule')\ndef _():\n{indent(hidden)}"
    )
    public_src = (
        "from tools.checks import PublicChecks\nchecks = PublicChecks('TODO "
        "9')\n\n@checks.case(idea='rule')\n"
        f'def the_rule():\n    """The rule"""\n{indent(public)}\nchecks.run()\n'
    )
    test = GradeCellTests("todo9_toy", 1.0, hidden_src, public_src)
    report = rules.check_cell(rules.load_cell(test, {"todo9_solution": solution}))
    assert report.problems == [] and report.tried > 0 and report.graded > 0
    return report


def _facts(report: rules.CellReport) -> list[tuple[str, str]]:
    return [(gap.fact, gap.decision) for gap in report.gaps]


# keys one at a time: the ideas' items have one optional key each, the public ones none or both
PICK = """def pick(item):
    ### BEGIN SOLUTION
    if 'name' not in item:
        return -1
    return len(item.get('links', [])) + len(item.get('reads', []))
    ### END SOLUTION
"""
PICK_IDEA = """
assert pick({'name': 'a', 'links': ['x']}) == 1, "one link"
assert pick({'name': 'a', 'reads': ['y']}) == 1, "one read"
assert pick({'reads': ['x']}) == -1, "no name: -1"
"""
PICK_PUBLIC = """
assert pick({'name': 'a'}) == 0, "nothing"
assert pick({'name': 'a', 'links': ['p'], 'reads': ['q']}) == 2, "both"
NO_NAME
"""
WITHOUT_A_NAME = "assert pick({'links': ['q']}) == -1, 'no name: -1'"


def test_a_dicts_keys_are_facts_one_at_a_time():
    """Items with only 'links' or only 'reads' are not classes of their own: each key's presence and
    absence is checked in public, on items with none or both."""
    assert _toy(PICK, PICK_IDEA, PICK_PUBLIC.replace("NO_NAME", WITHOUT_A_NAME), "pick").gaps == []


def test_a_rule_about_one_key_is_still_found():
    """Control: an item without its 'name' counts -1, and no public check calls one without it."""
    report = _toy(PICK, PICK_IDEA, PICK_PUBLIC.replace("NO_NAME", ""), "pick")
    assert _facts(report) == [("args[0] lacks the key 'name'", "returns a number")]


# int and float one kind of number where the answer asks no type
GATE = """def gate(ready_at, deadline):
    ### BEGIN SOLUTION
    ASK_A_TYPE
    return 'wait' if ready_at <= deadline else 'fallback'
    ### END SOLUTION
"""
GATE_IDEA = "assert gate(3, 7) == 'wait', 'in time'\nassert gate(7, 3) == 'fallback', 'late'"
GATE_PUBLIC = (
    "assert gate(8.0, 10.0) == 'wait', 'in time'\nassert gate(12.0, 10.0) == 'fallback', 'late'"
)


def test_int_and_float_are_one_kind_where_the_answer_asks_no_type():
    """The ideas' times are ints, the public checks' floats: one class, since nothing in the answer
    can tell 3 from 3.0."""
    assert _toy(GATE.replace("ASK_A_TYPE", "pass"), GATE_IDEA, GATE_PUBLIC, "gate").gaps == []


def test_int_and_float_stay_apart_where_the_answer_asks_a_type():
    """Control: an answer that asks a value's type (as TODO 6's does of layers) keeps the kinds
    apart."""
    asks = "if isinstance(ready_at, bool):\n        raise ValueError('a flag is not a time')"
    report = _toy(GATE.replace("ASK_A_TYPE", asks), GATE_IDEA, GATE_PUBLIC, "gate")
    assert ("args[0] is an int >= 0", "returns 'wait'") in _facts(report)


# a value the answer never reads is no fact
TTFT = """def slowest(records):
    ### BEGIN SOLUTION
    values = [r['ttft'] for r in records if r['ttft'] is not None READS_THE_ID]
    return max(values)
    ### END SOLUTION
"""
TTFT_IDEA = (
    "assert slowest([{'id': 0, 'ttft': 4.0}, {'id': -1, 'ttft': None}, {'id': 1, 'ttft': "
    "9.0}]) == 9.0, 'the slowest'"
)
TTFT_PUBLIC = (
    "assert slowest([{'id': 0, 'ttft': 3.0}, {'id': 1, 'ttft': None}, {'id': 2, 'ttft': "
    "1.0}]) == 3.0, 'the slowest'"
)


def test_a_value_the_answer_never_reads_is_no_fact():
    """The ideas' failed records have negative ids, the public ones not: the answer never reads an
    id."""
    assert _toy(TTFT.replace(" READS_THE_ID", ""), TTFT_IDEA, TTFT_PUBLIC, "slowest").gaps == []


def test_a_value_the_answer_reads_is_a_fact():
    """Control: an answer that reads the id (it skips negative ones) makes a negative id a class."""
    report = _toy(
        TTFT.replace("READS_THE_ID", "and r['id'] >= 0"), TTFT_IDEA, TTFT_PUBLIC, "slowest"
    )
    assert ("args[0][*]['id'] is a number < 0", "returns a number") in _facts(report)


# a value the answer only compares with others is one class, whatever its kind
MATCH = """def match(state, expected):
    ### BEGIN SOLUTION
    if state.get('rid') == expected:
        return 'ok'
    if isinstance(expected, int) and state.get('rid') == expected + 1:
        return 'next'
    return 'other'
    ### END SOLUTION
"""
MATCH_IDEA = (
    "assert match({'rid': 7}, 7) == 'ok', 'the same request'\nassert match({'rid': 9}, "
    "7) == 'other', 'another request'"
)
MATCH_PUBLIC = (
    "assert match({'rid': 'r1'}, 'r1') == 'ok', 'the same request'\nassert "
    "match({'rid': 'r2'}, 'r1') == 'other', 'another request'"
)


def test_a_value_the_answer_only_compares_is_one_class_of_any_kind():
    """The ideas' request ids are ints, the public ones strings: on these calls the answer only
    compares them, so whether an id is an int or a string decides nothing."""
    assert _toy(MATCH, MATCH_IDEA, MATCH_PUBLIC, "match").gaps == []


def test_a_value_whose_kind_the_answer_reads_keeps_its_kind():
    """Control: the ideas also call where the answer does arithmetic on an int id (the next
    request): the kinds stay apart, and the int ids no public check makes are a gap."""
    idea = MATCH_IDEA + "\nassert match({'rid': 8}, 7) == 'next', 'the next request'"
    report = _toy(MATCH, idea, MATCH_PUBLIC, "match")
    assert ("args[0]['rid'] is an int >= 0", "returns 'ok'") in _facts(report)


def test_two_facts_on_the_same_calls_are_one_class():
    """A list that is non-empty and whose items are strings: the same calls, one gap, not two; a
    fact that holds on other calls stays its own."""
    classes = Classes(frozenset(), kinds_apart=False)
    calls = []
    for names in (["a"], ["b", "c"], []):
        call = rules.Call("f", (names,), {}, Outcome(len(names)), True)
        call.classed(classes)
        calls.append(call)
    targets = {}
    for call in calls:
        for fact in sorted(call.facts, key=repr):
            targets.setdefault(rules.Target("f", fact, call.result), call)
    kept = [target for target, _ in rules._distinct(targets, calls, [])]
    non_empty = [
        t.fact
        for t in kept
        if t.fact in (("args[0]", "list", "not empty"), ("args[0][*]", ("str",)))
    ]
    assert len(non_empty) == 1  # the two facts of the same two calls: one class
    assert rules.ANY in [t.fact for t in kept] and ("args[0]", "list", "empty") in [
        t.fact for t in kept
    ]


# ---------------------------------------------------------------- the course

# the public cases added to TODO 5's and TODO 6's test cells for these two rules (and the others the
# check found there), each as (before, after): the cells as they were are the cells now, undone
BEFORE_THE_PUBLIC_CASES = {
    "todo5_decide_overlap": [
        (
            '"""A wrong copy, or a missing precondition flag, rejects the run first, '
            'however fast"""',
            '"""A case that is not correct (a flag False, None or missing; fixed or '
            'calibrated) rejects the run first, however fast"""',
        ),
        (
            """    missing = _case()
    del missing['preconditions_met']
    got = decide_overlap([missing], _controls())
    assert got == 'reject_incorrect_path', f"a case without preconditions_met is not correct: got \
{got!r}"
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
    assert got == 'reject_incorrect_path', f"an incorrect fixed window rejects the run too (rule \
1: any case, fixed or calibrated): got {got!r}"
""",
        ),
        (
            "",
            """    got = decide_overlap([_case()], [{'name': 'control_0'}])
    assert got == 'reject_instrument_fault', f"a control without overlap_confirmed is not False: \
got {got!r}"
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
        raise AssertionError(f"4.0 is a whole number of layers: stream_layers(0.0, 0.0, 10.0, 4.0, \
1.0, 0.0) raised ValueError: {exc}") from None
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
    tests = found.cells
    return tests, found.solutions


def _gaps(grade_id: str, undone: bool) -> list[rules.Gap]:
    tests, solutions = _course()
    test = tests[grade_id]
    for before, after in BEFORE_THE_PUBLIC_CASES[grade_id] if undone else []:
        assert test.public.count(after) == 1, (
            f"the public case added to {grade_id} changed since: {after[:80]!r}"
        )
        test = dataclasses.replace(test, public=test.public.replace(after, before))
    report = rules.check_cell(rules.load_cell(test, solutions))
    assert report.problems == []
    return report.gaps


@pytest.mark.parametrize("grade_id", sorted(BEFORE_THE_PUBLIC_CASES))
def test_the_two_gaps_readers_found_are_found_on_the_cells_before_their_public_cases(grade_id):
    gaps = _gaps(grade_id, undone=True)
    for gap in gaps:
        print(gap.line())
    if grade_id == FIXED_WINDOW[0]:
        assert [g for g in gaps if (g.grade_id, g.idea, g.fact, g.decision) == FIXED_WINDOW], (
            "the fixed window let through"
        )
        gap = next(g for g in gaps if g.fact == FIXED_WINDOW[2])
        assert (
            "'window': 'fixed'" in gap.example
            and ("an incorrect fixed window rejects the run too") in gap.said
        )
    else:
        assert [g for g in gaps if (g.grade_id, g.idea, g.fact) == FLOAT_LAYERS], (
            "layers=4.0 rejected"
        )
        gap = next(g for g in gaps if g.fact == FLOAT_LAYERS[2])
        assert (
            gap.example == "stream_layers(5.0, 0.0, 10.0, 4.0, 1.0, 0.0)"
            and gap.wrong == "raises ValueError"
        )


@pytest.mark.parametrize("grade_id", sorted(BEFORE_THE_PUBLIC_CASES))
def test_todo_5_and_6_check_every_graded_rule_in_public_now(grade_id):
    assert [gap.line() for gap in _gaps(grade_id, undone=False)] == []


def test_the_course_checks_every_graded_rule_in_public(root):
    """What ``check`` asks: no gap at all, and nothing that keeps the check from answering."""
    course = Course.load(root)
    assert rules.rule_problems(course.source_paths()) == []
