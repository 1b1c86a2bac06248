"""The late line shows the deadline as the instructor gave it: its date and time at the UTC offset
it was written with, then that offset (``2026-12-20 23:59, UTC+08:00``), in both editions; a
per-notebook deadline and a student's extension each at their own offset. What machines read is
as it was: the facts keep the deadline in UTC (the offset beside it), and the hours late and the
penalty are the same numbers."""

from __future__ import annotations

import datetime as dt

import pytest

from autograde.ledger.late import (
    LateSpec,
    late_spec,
    late_text,
    notebook_late,
    parse_policy,
    parse_time,
)
from autograde.model import LateFacts
from autograde.settings import GradingTable

NB = "04_decode_start_gate"
# 58.02 hours after 2026-12-20 23:59 at +08:00: three started days
SUBMITTED = parse_time("2026-12-23T02:00:00Z", "test")


@pytest.fixture(scope="module")
def zh_words(root):
    from autograde.course import Course
    from autograde.publish.editions import feedback_translations

    return feedback_translations(Course.load(root)).of("zh")


def _facts(deadline: str, score: float = 8.0) -> LateFacts:
    spec = LateSpec(
        parse_policy("deduct:10%/day"), parse_time(deadline, "test"), times={"bob": {NB: SUBMITTED}}
    )
    return notebook_late(spec, "bob", NB, score, 10.0)


def test_an_english_page_shows_the_deadline_at_the_offset_it_was_given(zh_words):
    facts = _facts("2026-12-20T23:59:00+08:00")
    policy = parse_policy("deduct:10%/day")
    assert late_text(facts, policy) == (
        "Submitted 58.02 hour(s) after the deadline (2026-12-20 23:59, UTC+08:00): late "
        "penalty 3 point(s) (10% of the maximum per day late)."
    )
    zh = (
        "在截止时间（2026-12-20 23:59，UTC+08:00）之后 58.02 小时提交：迟交扣 3 "
        "分（每迟交一天扣满分的 10%）。"
    )
    assert late_text(facts, policy, zh_words) == zh


def test_the_numbers_and_what_machines_read_are_as_they_were():
    """The same instant written at +08:00 or in UTC: the same hours late and penalty, the deadline
    kept in UTC; only the offset beside it differs, and with it the words shown."""
    given, utc = _facts("2026-12-20T23:59:00+08:00"), _facts("2026-12-20T15:59:00Z")
    assert given.deadline == utc.deadline == "2026-12-20T15:59:00+00:00"
    assert (
        given.late_seconds == utc.late_seconds == 208_860.0 and given.penalty == utc.penalty == 3.0
    )
    assert (
        given.to_json() == {**utc.to_json(), "deadline_offset": "+08:00"}
        and utc.to_json()["deadline_offset"] == "+00:00"
    )
    assert "(2026-12-20 15:59, UTC)" in late_text(utc, parse_policy("deduct:10%/day"))


def test_a_notebooks_deadline_and_an_extension_keep_their_own_offsets(tmp_path):
    extensions = tmp_path / "ext.csv"
    extensions.write_text(
        "student_id,deadline\nalice,2026-12-21T09:30:15-05:00\n", encoding="utf-8"
    )
    grading = {
        "deadline": "2026-12-20T23:59:00+08:00",
        "deadlines": {"06_handoff_simulator": "2026-12-22T12:00:00+05:30"},
    }
    spec = late_spec(GradingTable.from_toml(grading), None, "deduct:10%/day", extensions)
    spec = LateSpec.from_json(spec.to_json())  # as a later command reads it back from OUT
    spec.times = {
        "alice": {NB: SUBMITTED},
        "bob": {"06_handoff_simulator": SUBMITTED, NB: SUBMITTED},
    }
    policy = spec.policy

    def shown(student, notebook):
        return late_text(notebook_late(spec, student, notebook, 8.0, 10.0), policy)

    assert "(2026-12-21 09:30:15, UTC-05:00)" in shown("alice", NB)
    assert "(2026-12-22 12:00, UTC+05:30)" in shown("bob", "06_handoff_simulator")
    assert "(2026-12-20 23:59, UTC+08:00)" in shown("bob", NB)
    # the instants are what counts: 06's deadline is 2026-12-22 06:30 UTC, 19.5 hours before the
    # submission
    assert notebook_late(spec, "bob", "06_handoff_simulator", 8.0, 10.0).late_seconds == 19.5 * 3600


def test_facts_without_an_offset_show_the_deadline_in_its_own_zone():
    """Facts written before the offset was kept (a log.jsonl line, a test's facts) say the deadline
    they hold, in UTC, in the same words."""
    facts = LateFacts(0.5, "2026-12-20T15:59:00+00:00", late_seconds=7200)
    assert "the deadline (2026-12-20 15:59, UTC)" in late_text(facts, parse_policy("zero"))
    assert (
        LateFacts.from_json({**facts.to_json(), "deadline_offset": "+08:00"}).deadline_offset
        == "+08:00"
    )
    odd = LateFacts(0.5, "not a time", late_seconds=7200)
    assert "the deadline (not a time)" in late_text(odd, parse_policy("zero"))


def test_the_offset_is_the_instants_own_at_the_boundaries():
    """A deadline far east or west of UTC, given at its offset, is shown on its own calendar day."""
    east = parse_time("2026-12-21T00:30:00+14:00", "test")
    west = parse_time("2026-12-20T00:30:00-12:00", "test")
    assert east.astimezone(dt.UTC).day == 20 and west.astimezone(dt.UTC).day == 20
    for given, said in (
        (east, "2026-12-21 00:30, UTC+14:00"),
        (west, "2026-12-20 00:30, UTC-12:00"),
    ):
        spec = LateSpec(
            parse_policy("zero"), given, times={"bob": {NB: given + dt.timedelta(hours=1)}}
        )
        assert f"({said})" in late_text(notebook_late(spec, "bob", NB, 8.0, 10.0), spec.policy)
