"""A learner who replays the public checks instead of solving the TODO.

The public checks are in the learner's notebook, so their inputs can be read and their expected
values recorded (here: by running them once against the course's answer). An answer that looks
each call up in that table passes every public check: the notebook shows all green. The judge runs
those same checks, but only as part of ideas whose hidden asserts call with other inputs, so the
table must earn no idea that a do-nothing answer (the same functions returning None) does not earn.
tests/grader/run/test_security.py grades the same attack on TODO 3 through ``autograde grade``."""

from __future__ import annotations

import pytest

from submissions import (
    course_cells,
    do_nothing_answer,
    judge_in_process,
    public_failures,
    replay_answer,
)

CELLS = sorted(course_cells()[0])


def _earned(result) -> set[str]:
    return {idea.id for idea in result.ideas if idea.earned >= idea.points > 0}


@pytest.mark.parametrize("cell", CELLS)
def test_replaying_the_public_checks_earns_nothing_a_stub_does_not(cell):
    solution = cell.split("_", 1)[0] + "_solution"
    replay, stub = replay_answer(cell, solution), do_nothing_answer(solution)
    assert public_failures(cell, {solution: replay}) == [], (
        "the replay passes every public check in the notebook"
    )
    assert public_failures(cell, {solution: stub}), (
        "the control fails public checks, so the replay is what passes them"
    )
    cheat, control = (
        judge_in_process(cell, {solution: replay}),
        judge_in_process(cell, {solution: stub}),
    )
    assert _earned(cheat) <= _earned(control), (
        f"the table alone earned {sorted(_earned(cheat) - _earned(control))}"
    )
    assert cheat.score <= control.score < cheat.points
