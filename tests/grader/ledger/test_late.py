"""Deadlines and late penalties: the policy's arithmetic at its boundaries, and what is refused."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from autograde.course import UnusableInput
from autograde.ledger import late
from autograde.ledger.late import LateSpec, notebook_late, parse_policy, parse_time, penalty_points
from autograde.settings import GradingTable

DEADLINE = parse_time("2026-12-20T23:59:00+08:00", "test")


def _spec(policy: str, **times) -> LateSpec:
    return LateSpec(
        parse_policy(policy),
        DEADLINE,
        times={s: {"04_decode_start_gate": t} for s, t in times.items()},
    )


@pytest.mark.parametrize(
    ("policy", "seconds_late", "score", "expected"),
    [
        ("zero", 0, 8.0, 0.0),  # on time to the second
        ("zero", 1, 8.0, 8.0),  # one second late: nothing counts
        ("deduct:10%/day", 0, 8.0, 0.0),
        ("deduct:10%/day", 1, 8.0, 1.0),  # one second late is one started day: 10% of 10 points
        ("deduct:10%/day", 86_400, 8.0, 1.0),  # exactly one day late: still the first day
        ("deduct:10%/day", 86_401, 8.0, 2.0),  # the second day has started
        # 10 days would take 10 points: the floor keeps 5
        ("deduct:10%/day,floor:50%", 10 * 86_400, 8.0, 3.0),
        # already under the floor: nothing more
        ("deduct:10%/day,floor:50%", 10 * 86_400, 4.0, 0.0),
        # four started hours: all of it, never below zero
        ("deduct:25%/hour", 3 * 3600 + 1, 10.0, 10.0),
        ("none", 10 * 86_400, 8.0, 0.0),
    ],
)
def test_penalty_at_the_boundaries(policy, seconds_late, score, expected):
    assert penalty_points(parse_policy(policy), seconds_late, score, 10.0) == pytest.approx(
        expected
    )


def test_a_notebooks_late_facts_and_an_extension():
    on_time = DEADLINE
    one_second = DEADLINE + dt.timedelta(seconds=1)
    spec = _spec("deduct:10%/day", alice=on_time, bob=one_second, carol=one_second)
    spec.extensions["carol"] = DEADLINE + dt.timedelta(days=2)
    assert notebook_late(spec, "alice", "04_decode_start_gate", 5.0, 10.0).penalty == 0.0
    bob = notebook_late(spec, "bob", "04_decode_start_gate", 5.0, 10.0)
    assert (
        bob.penalty == 1.0
        and bob.late_seconds == 1.0
        and bob.submitted_at.startswith("2026-12-20T15:59:01")
    )
    assert notebook_late(spec, "carol", "04_decode_start_gate", 5.0, 10.0).penalty == 0.0
    unknown = notebook_late(spec, "dave", "04_decode_start_gate", 5.0, 10.0)
    # never on time by default
    assert unknown.penalty == 0.0 and "no submission time" in unknown.problem
    assert notebook_late(LateSpec(), "dave", "04_decode_start_gate", 5.0, 10.0).to_json() == {
        "penalty": 0.0
    }


def test_a_feedback_line_says_how_late_and_what_it_cost():
    spec = _spec("deduct:10%/day,floor:50%", bob=DEADLINE + dt.timedelta(hours=3))
    facts = notebook_late(spec, "bob", "04_decode_start_gate", 8.0, 10.0)
    line = late.late_text(facts, spec.policy)
    assert (
        line.startswith("Submitted 3.00 hour(s) after the deadline")
        and "late penalty 1 point(s)" in line
        and "10% of the maximum per day" in line
    )
    assert (
        late.late_text(
            dataclasses.replace(
                notebook_late(spec, "bob", "04_decode_start_gate", 8.0, 10.0), late_seconds=0
            ),
            spec.policy,
        )
        == ""
    )


@pytest.mark.parametrize(
    "bad", ["deduct:10%", "deduct:10/day", "minus:10%/day", "deduct:150%/day", "deduct:10%/week"]
)
def test_a_policy_not_in_the_shapes_is_refused_saying_them(bad):
    with pytest.raises(UnusableInput, match="use none, zero, or deduct:P%/day"):
        parse_policy(bad)


def test_a_time_without_a_zone_or_not_iso_is_refused():
    with pytest.raises(UnusableInput, match="no time zone"):
        parse_time("2026-12-20T23:59:00", "the deadline")
    with pytest.raises(UnusableInput, match="not an ISO 8601"):
        parse_time("20 Dec 2026", "the deadline")


def test_the_spec_comes_from_course_toml_and_the_command_line_wins(tmp_path):
    extensions = tmp_path / "ext.csv"
    extensions.write_text(
        "student_id,deadline\nalice,2026-12-22T23:59:00+08:00\n", encoding="utf-8"
    )
    grading = {
        "deadline": "2026-12-20T23:59:00+08:00",
        "late_policy": "zero",
        "deadlines": {"06_handoff_simulator": "2026-12-27T23:59:00Z"},
    }
    spec = late.late_spec(GradingTable.from_toml(grading), None, "deduct:5%/hour", extensions)
    assert (
        spec.policy.kind == "deduct"
        and spec.policy.unit_seconds == 3600
        and spec.deadline == DEADLINE
    )
    assert (
        spec.deadline_for("bob", "06_handoff_simulator").day == 27
        and spec.deadline_for("alice", "06_handoff_simulator").day == 22
    )
    with pytest.raises(UnusableInput, match="needs a deadline"):
        late.late_spec(GradingTable(), None, "zero", None)
    assert LateSpec.from_json(spec.to_json()) == spec


def test_the_lms_late_mark_is_the_least_penalty_and_a_time_wins_over_it():
    """Canvas's LATE_ says late, not how late: under zero that decides (all of it); under a
    deduction the least penalty (one started day) is taken and the lateness stays unknown while more
    days could cost more; a known time wins over the mark; without either, nothing is taken and it
    is unknown."""
    scores = {"04_decode_start_gate": (8.0, 10.0)}
    zero = late.settle(_spec("zero"), "cy", scores, flagged=["04_decode_start_gate"])
    assert (
        zero.penalty == 8.0
        and zero.unknown == []
        and zero.facts["04_decode_start_gate"].basis == "lms_flag"
    )
    deduct = late.settle(_spec("deduct:10%/day"), "cy", scores, flagged=["04_decode_start_gate"])
    assert deduct.penalty == 1.0 and deduct.unknown == ["04_decode_start_gate"]
    assert deduct.shown() == "unknown" and deduct.shown(accept_unknown=True) == 1.0
    assert deduct.basis(accept_unknown=True) == "04_decode_start_gate=lms_flag(least)"
    floored = late.settle(
        _spec("deduct:10%/day,floor:75%"), "cy", scores, flagged=["04_decode_start_gate"]
    )
    # one day already reaches the floor: how late no longer matters
    assert floored.penalty == 0.5 and floored.unknown == []
    timed = late.settle(
        _spec("deduct:10%/day", cy=DEADLINE), "cy", scores, flagged=["04_decode_start_gate"]
    )
    assert (
        timed.penalty == 0.0
        and timed.unknown == []
        and timed.basis() == "04_decode_start_gate=time"
    )
    none = late.settle(_spec("deduct:10%/day"), "dee", scores)
    assert (
        none.penalty == 0.0
        and none.unknown == ["04_decode_start_gate"]
        and none.basis() == "04_decode_start_gate=unknown"
    )


def test_the_penalty_is_taken_from_the_score_the_table_counts():
    """A person's reflection scores are part of the score the penalty is taken from: under zero all
    of it goes, under a floor the floor is measured against it."""
    spec = _spec("zero", bob=DEADLINE + dt.timedelta(seconds=1))
    assert late.settle(spec, "bob", {"04_decode_start_gate": (4.0, 4.0)}).penalty == 4.0
    floor = _spec("deduct:25%/hour,floor:50%", bob=DEADLINE + dt.timedelta(hours=1))
    # the automatic 2 of 4: at the floor
    assert late.settle(floor, "bob", {"04_decode_start_gate": (2.0, 4.0)}).penalty == 0.0
    # with a person's 2: one hour's 25%
    assert late.settle(floor, "bob", {"04_decode_start_gate": (4.0, 4.0)}).penalty == 1.0
