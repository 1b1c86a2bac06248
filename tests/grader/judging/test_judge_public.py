"""The public checks and the graded ideas agree, both ways.

- By construction: the judge runs every public check (from the instructor's source, against the
  learner's functions through the same proxies as the hidden tests) as part of the idea it names, so
  an answer that fails a public check never keeps that idea's points; ``check_course`` refuses a
  public check that names no idea, or an idea its cell does not grade.
- Measured: benchmarks/mutation_report.py judges every mutant mutmut makes of each answer; here a
  handful of them (TODO 3 and 4, and the two cases an earlier review found) in the same way.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from autograde.judging import ideas, judge

from submissions import course_cells, judge_in_process, lost_in_judge, mutate, public_failures

ROOT = Path(__file__).resolve().parents[3]
RUNNER = ROOT / "autograde" / "judging" / "runner.py"

# an answer that fails a public check and used to keep every hidden point
KNOWN = {
    "exposed_added": (
        "todo1_exposed_interval",
        "todo1_solution",
        "'exposed_ms': total_ms - hidden_ms",
        "'exposed_ms': total_ms + hidden_ms",
        {"merge"},
    ),
    "ready_ignores_identity": (
        "todo3_validate_state",
        "todo3_solution",
        "'ready': not missing and not incompatible",
        "'ready': not missing",
        {"both_kinds"},
    ),
}


def _real_judge(cell: str, answers: dict[str, str], tmp_path) -> dict:
    """judge.judge_cell with runner.py in its own process, as grading runs it (without the
    sandbox)."""
    tests, solutions = course_cells()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    session = judge.Session(
        lambda: judge.Runner([sys.executable, "-I", str(RUNNER)], env, str(tmp_path), 10.0), 10.0
    )
    cells = list({**solutions, **answers}.values())
    try:
        return judge.judge_cell(tests[cell], solutions, session, cells)
    finally:
        session.close()


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_an_answer_that_fails_a_public_check_loses_that_idea(name, tmp_path):
    cell, solution, old, new, lost = KNOWN[name]
    answers = mutate(solution, old, new)
    failing = public_failures(cell, answers)
    assert failing, "the slip fails a public check in the learner's notebook"
    result = _real_judge(cell, answers, tmp_path)
    assert result.score < result.points
    assert {i.id for i in result.ideas if i.earned < i.points} == lost
    named = {f["name"].rsplit("[", 1)[1].rstrip("]") for f in failing}
    assert named == lost, "the failing public checks name the idea lost, and only it"
    failed = next(i for i in result.ideas if i.id in lost)
    assert failed.message, failed
    # the judge run in this process (the mutation report's) gives the same result as the real runner
    assert judge_in_process(cell, answers) == result
    # and the hidden asserts alone see the slip as well
    assert lost_in_judge(cell, answers, public=False) == lost


def test_the_course_answers_keep_full_marks_with_the_public_checks(tmp_path):
    tests, _ = course_cells()
    for cell in tests:
        assert public_failures(cell, {}) == [], cell
        result = judge_in_process(cell, {})
        assert result.score == result.points, (
            cell,
            [i for i in result.ideas if i.status != "passed"],
        )
    # WORK's items are in the cell: it runs outside the notebook
    result = _real_judge("todo0_check_overlap", {}, tmp_path)
    assert result.score == result.points, result


def test_a_public_check_the_judge_runs_comes_from_the_course_not_the_learner(tmp_path):
    """A learner who rewrites a public check in their copy changes nothing: the judge reads the open
    part of the cell from the instructor's source (judge.json), and calls the learner's function
    through the runner."""
    cell, solution, old, new, lost = KNOWN["exposed_added"]
    answers = mutate(solution, old, new)
    # a learner's own 'check' defined in a cell
    answers["todo1_exposed_interval"] = "def chapter_example():\n    pass\n"
    result = _real_judge(cell, answers, tmp_path)
    assert {i.id for i in result.ideas if i.earned < i.points} == lost


def test_mutmut_mutants_of_two_answers_agree_both_ways():
    """Every mutant mutmut makes of TODO 3 and TODO 4 (54): one that fails a public check loses an
    idea in the judge and in the hidden asserts alone; one that loses a hidden idea fails a public
    check that names one of the ideas it loses; the rest are listed as equivalent, each with its
    reason, and pass everything."""
    pytest.importorskip("mutmut")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import mutation_report
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    equivalents = json.loads(mutation_report.EQUIVALENTS.read_text(encoding="utf-8"))
    count = 0
    for solution in ("todo3_solution", "todo4_solution"):
        for key, code in mutation_report.mutants(solution):
            count += 1
            got = mutation_report.judge_mutant(solution, code)
            if key in equivalents.get(solution, {}):
                assert not got["public"] and not got["judge"] and not got["hidden"], (key, got)
                continue
            assert got["public"], f"a survivor: {key}"
            assert got["judge"] and got["hidden"], (key, got)
            assert got["hidden"] & got["named"], (
                f"the failing public checks name none of the ideas lost: {key}"
            )
    assert count >= 50


def test_check_refuses_public_checks_the_judge_cannot_run():
    hidden = (
        "from tools.checks import idea, uses\nuses('f')\n"
        "@idea('one', 1.0, 'The first rule, stated fully')\ndef _():\n    assert f(1) == 2\n"
        "@idea('two', 1.0, 'The second rule, stated fully')\ndef _():\n    assert f(2) == 3\n"
    )
    spec = ideas.load(hidden, "cell", 2.0)
    head = "from tools.checks import PublicChecks\nchecks = PublicChecks('T')\n"

    def case(idea_arg: str, body: str = "assert f(1) == 2") -> str:
        return (
            f"@checks.case({idea_arg})\ndef c_{abs(hash(idea_arg + body))}():\n    '''a "
            f"check'''\n    {body}\n"
        )

    good = head + case("idea='one'") + case("idea='two'") + "checks.run()\n"
    assert ideas.check_public(spec, good) == []
    assert "names no idea" in " ".join(ideas.check_public(spec, good + case("")))
    assert "'three', which is not an idea" in " ".join(
        ideas.check_public(spec, good + case("idea='three'"))
    )
    assert "no public check names the idea 'two'" in " ".join(
        ideas.check_public(spec, head + case("idea='one'"))
    )
    assert "read ['WORK'] from the notebook" in " ".join(
        ideas.check_public(spec, good + "ITEMS = list(WORK)\n")
    )
    assert "must not call" in " ".join(ideas.check_public(spec, good + "f(0)\n"))


def test_todo0_checks_hold_the_same_work_items_as_the_notebook():
    """TODO 0's public checks carry WORK's items themselves (the judge runs them outside the
    notebook): they are the items the notebook defines and draws."""
    import ast

    import nbformat

    cells = nbformat.read(ROOT / "solutions" / "01_what_can_overlap.ipynb", as_version=4).cells
    given = next(
        c.source for c in cells if c.cell_type == "code" and c.source.startswith("WORK = [")
    )
    work = next(
        ast.literal_eval(n.value)
        for n in ast.parse(given).body
        if isinstance(n, ast.Assign) and n.targets[0].id == "WORK"
    )
    public = course_cells()[0]["todo0_check_overlap"].public
    raw = next(
        n.value
        for n in ast.parse(public).body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "_raw"
    )
    assert ast.literal_eval(raw.generators[0].iter) == work
