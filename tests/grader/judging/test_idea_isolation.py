"""One slip costs one idea: every plausible single mistake in tests/submissions.py's MISTAKES loses
the hidden ideas listed for it and no other.

The hidden ideas run in-process, the way the judge runs them but without the sandbox: the course's
answer with one mistake in it is defined in the ideas' namespace (with the course's answers standing
in for the functions the hidden tests replace, as the judge does), and each idea is called. Run this
file as a script (``python tests/grader/judging/test_idea_isolation.py``) to print the table "wrong
answer -> ideas lost" for every TODO."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

# run as a script: the course and the tests' helpers on the path, as pytest puts them
if __name__ == "__main__":
    sys.path[:0] = [
        str(Path(__file__).resolve().parents[3]),
        str(Path(__file__).resolve().parents[2]),
    ]

from autograde.judging.ideas import course_tests, load  # noqa: E402

from submissions import MISTAKES, SOLUTIONS, lost_in_judge, mutate  # noqa: E402


@functools.cache
def _course() -> dict:
    found = course_tests(sorted(SOLUTIONS.glob("*.ipynb")))
    tests = found.cells
    solutions = found.solutions
    return {"tests": tests, "solutions": solutions}


def idea_results(cell: str, answers: dict[str, str]) -> dict[str, str | None]:
    """{idea id: None if passed, else the first line of its failure} for the hidden ideas of
    ``cell`` against ``answers`` ({solution grade id: source})."""
    test = _course()["tests"][cell]
    spec = load(test.hidden, test.grade_id, test.points)
    for source_id in spec.stand_ins.values():
        exec(_course()["solutions"][source_id], spec.namespace)  # noqa: S102 - the course's own answer
    for source in answers.values():
        exec(source, spec.namespace)  # noqa: S102 - the course's answer with one mistake in it
    results = {}
    for item in spec.ideas:
        try:
            item.check()
        except Exception as exc:  # an idea fails by raising anything
            results[item.id] = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
        else:
            results[item.id] = None
    return results


def lost_ideas(row) -> set[str]:
    _student, cell, solution, old, new, _expected = row
    return {
        idea for idea, failure in idea_results(cell, mutate(solution, old, new)).items() if failure
    }


@pytest.mark.parametrize("cell", sorted({row[1] for row in MISTAKES}))
def test_the_course_answer_passes_every_idea(cell):
    solution = next(row[2] for row in MISTAKES if row[1] == cell)
    failures = {
        k: v
        for k, v in idea_results(cell, {solution: _course()["solutions"][solution]}).items()
        if v
    }
    assert not failures, failures


@pytest.mark.parametrize("row", MISTAKES, ids=[row[0] for row in MISTAKES])
def test_a_single_mistake_loses_its_own_idea_only(row):
    assert lost_ideas(row) == row[5]


@pytest.mark.parametrize("row", MISTAKES, ids=[row[0] for row in MISTAKES])
def test_in_the_judge_with_its_public_checks_too(row):
    """The judge also runs each public check with the idea it names: a slip still costs its own idea
    only (the judge's and the runner's own code, in this process: submissions.judge_in_process)."""
    _student, cell, solution, old, new, expected = row
    assert lost_in_judge(cell, mutate(solution, old, new)) == expected


def test_every_exercise_has_mistakes_and_each_costs_one_idea():
    """Every graded TODO has at least two mistakes in the list, and each row names exactly one
    idea."""
    cells = [row[1] for row in MISTAKES]
    assert set(cells) == set(_course()["tests"]), (
        "a graded TODO without a plausible mistake in MISTAKES"
    )
    assert all(cells.count(cell) >= 2 for cell in set(cells))
    assert all(len(row[5]) == 1 for row in MISTAKES), [
        row[0] for row in MISTAKES if len(row[5]) != 1
    ]


def test_the_messages_name_the_rule_that_broke():
    """The feedback for a units slip talks about units, and the latency idea does not blame it."""
    row = next(r for r in MISTAKES if r[0] == "w2_bits_as_bytes")
    results = idea_results(row[1], mutate(*row[2:5]))
    assert "125,000 bytes per ms" in results["units"] and results["latency_added"] is None


# an answer that does nothing (or returns a constant) for each exercise of notebooks 01-03
_STUBS = {
    "todo0_check_overlap": (
        "todo0_solution",
        "    if first['name'] in second.get('after', [])",
        "    return {'can_overlap': True, 'reasons': []}\n    if first['name'] in "
        "second.get('after', [])",
    ),
    "todo1_exposed_interval": (
        "todo1_solution",
        "hidden_ms = sum(right - left for left, right in merged)",
        "hidden_ms = 0.0",
    ),
    "todo2_estimate_handoff": (
        "todo2_solution",
        "transfer_ms = fixed_latency_ms + payload_bytes / bytes_per_ms",
        "transfer_ms = 1.0",
    ),
    "todo3_validate_state": (
        "todo3_solution",
        "    incompatible = []\n",
        "    return {'ready': True, 'missing': [], 'incompatible': []}\n",
    ),
}


@pytest.mark.parametrize("cell", sorted(_STUBS))
def test_an_answer_that_does_nothing_earns_at_most_a_quarter(cell):
    """The ideas that read an answer's own numbers (to keep one slip to one idea) do not make a
    constant answer pass: it earns only what the scaffold already does, at most 0.75 of 3 points."""
    solution, old, new = _STUBS[cell]
    test = _course()["tests"][cell]
    spec = load(test.hidden, test.grade_id, test.points)
    points = {i.id: i.points for i in spec.ideas}
    earned = [
        idea
        for idea, failure in idea_results(cell, mutate(solution, old, new)).items()
        if not failure
    ]
    assert sum(points[i] for i in earned) <= 0.75, earned


def test_a_constant_list_of_every_reason_earns_only_the_scaffold():
    """TODO 0's order idea reads the answer's own reasons; an answer that always returns all four,
    in order, must still earn nothing beyond what the scaffold does (input checks, inputs
    unchanged)."""
    constant = mutate(
        "todo0_solution",
        "    if first['name'] in second.get('after', [])",
        "    return {'can_overlap': False, 'reasons': ['dependency', 'same_engine', "
        "'shared_link', 'shared_state']}\n"
        "    if first['name'] in second.get('after', [])",
    )
    earned = {
        idea
        for idea, failure in idea_results("todo0_check_overlap", constant).items()
        if not failure
    }
    assert earned <= {"input_validation", "inputs_unchanged"}, earned


def table() -> str:
    """The table "wrong answer -> ideas lost (points)" for the closing note and the docs."""
    lines = ["| TODO | wrong answer | ideas lost | points lost |", "|---|---|---|---|"]
    for row in MISTAKES:
        test = _course()["tests"][row[1]]
        spec = load(test.hidden, test.grade_id, test.points)
        points = {i.id: i.points for i in spec.ideas}
        lost = sorted(lost_ideas(row))
        lines.append(
            f"| {row[1]} | {row[0]} | {', '.join(lost) or '(none)'} | "
            f"{sum(points[i] for i in lost):g} of {test['points']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
