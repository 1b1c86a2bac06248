"""Hidden ideas that a lazy or half-right answer cannot pass.

An idea that only asserts what a correct answer returns can be passed by an answer that always
returns that value. These tests run TODO 5's hidden ideas in-process (the way the judge runs
them, without the sandbox) against constant answers and against answers that look at one case
only, and check that they earn no more than the ideas any stub earns.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograde.judging.ideas import course_tests, load

ROOT = Path(__file__).resolve().parents[3]
DECISIONS = (
    "reject_incorrect_path",
    "reject_instrument_fault",
    "rerun_on_quiet_machine",
    "accept_physical_overlap",
    "tune_overlap_window",
)
# what the released scaffold already does (raise on no cases, touch nothing): any stub passes these
SCAFFOLD_IDEAS = {"empty_raises", "inputs_unchanged"}


def _todo5():
    found = course_tests([ROOT / "solutions" / "05_cuda_stream_overlap.ipynb"]).notebooks[
        "05_cuda_stream_overlap"
    ]
    test = next(t for t in found.tests if t.grade_id == "todo5_decide_overlap")
    return test, found.solutions["todo5_solution"]


def passed_ideas(fn) -> set[str]:
    """The ids of the hidden ideas of TODO 5 that ``fn`` passes."""
    test, _ = _todo5()
    spec = load(test.hidden, test.grade_id, test.points)
    spec.namespace["decide_overlap"] = fn
    passed = set()
    for idea in spec.ideas:
        try:
            idea.check()
        except Exception:
            continue
        passed.add(idea.id)
    return passed


def _constant(decision):
    def decide_overlap(cases, controls):
        if not cases:
            raise ValueError("no cases")
        return decision

    return decide_overlap


def _reference():
    namespace: dict = {}
    exec(_todo5()[1], namespace)
    return namespace["decide_overlap"]


def test_the_reference_passes_every_idea():
    test, _ = _todo5()
    spec = load(test.hidden, test.grade_id, test.points)
    assert passed_ideas(_reference()) == {idea.id for idea in spec.ideas}


@pytest.mark.parametrize("decision", DECISIONS)
def test_a_constant_answer_earns_only_the_scaffold(decision):
    assert passed_ideas(_constant(decision)) <= SCAFFOLD_IDEAS


def _one_case_only(pick):
    """The reference, except that noise and the bar look at one calibrated case only."""
    reference = _reference()

    def decide_overlap(cases, controls):
        calibrated = [c for c in cases if c.get("window") == "calibrated"]
        fixed = [c for c in cases if c.get("window") != "calibrated"]
        return reference(fixed + pick(calibrated), controls)

    return decide_overlap


@pytest.mark.parametrize(
    "pick,lost",
    [
        (lambda cal: cal[:1], {"noisy_machine", "every_payload"}),
        (lambda cal: cal[-1:], {"noisy_machine", "every_payload"}),
    ],
)
def test_looking_at_one_calibrated_case_loses_points(pick, lost):
    assert not passed_ideas(_one_case_only(pick)) & lost


@pytest.mark.parametrize("factor", [1.15, 1.3])
def test_a_bound_of_its_own_loses_the_bar(factor):
    """An answer that uses a fixed factor instead of each case's bound_factor (the GPU's or the
    CPU's)."""
    source = _todo5()[1].replace("case['bound_factor'] * bound", f"{factor} * bound")
    assert source != _todo5()[1], "the reference no longer reads case['bound_factor']"
    namespace: dict = {}
    exec(source, namespace)
    passed = passed_ideas(namespace["decide_overlap"])
    assert "calibrated_bar" not in passed and "correctness_first" in passed


# ----------------------------------------------------------------- notebook 06 (TODO 6-8)


def _ideas_06(grade_id: str, name: str, fn, extra: dict | None = None) -> set[str]:
    """The ids of a notebook 06 cell's hidden ideas that ``fn`` (standing for ``name``) passes."""
    found = course_tests([ROOT / "solutions" / "06_handoff_simulator.ipynb"]).notebooks[
        "06_handoff_simulator"
    ]
    test = next(t for t in found.tests if t.grade_id == grade_id)
    spec = load(test.hidden, test.grade_id, test.points)
    spec.namespace.update({name: fn, **(extra or {})})
    passed = set()
    for item in spec.ideas:
        try:
            item.check()
        except Exception:
            continue
        passed.add(item.id)
    return passed


@pytest.mark.parametrize(
    "value",
    [
        {"start_ms": 0.0, "end_ms": 0.0, "transfer_ms": 0.0, "exposed_ms": 0.0, "hidden_ms": 0.0},
        {"start_ms": 1.0, "end_ms": 2.0, "transfer_ms": 1.0, "exposed_ms": 1.0, "hidden_ms": 0.0},
    ],
)
def test_todo6_a_constant_stream_earns_nothing(value):
    def stream_layers(grant_ms, prefill_start_ms, prefill_ms, layers, payload_ms, latency_ms):
        if layers < 1 or int(layers) != layers or min(prefill_ms, payload_ms, latency_ms) < 0:
            raise ValueError("bad input")
        return dict(value)

    assert _ideas_06("todo6_stream_layers", "stream_layers", stream_layers) <= {"valid_input"}


@pytest.mark.parametrize(
    "decision,outcome",
    [
        ("ready", "ok"),
        ("wait", "ok"),
        ("fallback", "recomputed"),
        ("fallback", "failed"),
        ("recompute", "recomputed"),
    ],
)
def test_todo7_a_constant_handoff_earns_only_the_policy_check(decision, outcome):
    def handoff_step(handoff):
        if handoff["policy"] not in ("recompute", "fail"):
            raise ValueError("policy")
        now = handoff["now_ms"]
        return {
            "decision": decision,
            "outcome": outcome,
            "act_ms": now,
            "decode_start_ms": None if outcome == "failed" else now,
        }

    assert _ideas_06("todo7_handoff_step", "handoff_step", handoff_step) <= {"policy_checked"}


@pytest.mark.parametrize(
    "pick",
    [
        lambda values, q: values[0],
        lambda values, q: values[-1],
        lambda values, q: sum(values) / len(values),
    ],
)
def test_todo8_a_lazy_percentile_earns_only_the_scaffold(pick):
    def ttft_percentiles(records, qs):
        values = sorted(r["ttft_ms"] for r in records if r.get("ttft_ms") is not None)
        if not values or any(not 0 <= q <= 100 for q in qs):
            raise ValueError("bad input")
        return [pick(values, q) for q in qs]

    assert _ideas_06("todo8_ttft_percentiles", "ttft_percentiles", ttft_percentiles) <= {
        "skips_none",
        "bad_input",
        "inputs_unchanged",
    }


def _checked_percentiles(records, qs):
    """Checks the input as the rules say (so bad_input is truly earned), then returns the sorted
    TTFTs."""
    values = sorted(r["ttft_ms"] for r in records if r.get("ttft_ms") is not None)
    if not values or any(not 0 <= q <= 100 for q in qs):
        raise ValueError("bad input")
    return values


def _clears_qs(records, qs):
    _checked_percentiles(records, qs)
    # the judge mirrors this back into the test's list: an idea reading qs afterwards sees []
    qs.clear()
    return []


def _min_max_rewrites_qs(records, qs):
    values = _checked_percentiles(records, qs)
    qs[:] = [0 if q < 50 else 100 for q in qs]  # rewrites qs so that min/max look right afterwards
    return [values[0] if q == 0 else values[-1] for q in qs]


@pytest.mark.parametrize(
    "answer,earned",
    [(_clears_qs, {"bad_input"}), (_min_max_rewrites_qs, {"endpoints", "bad_input"})],
)
def test_todo8_an_answer_that_mutates_qs_earns_only_what_it_truly_does(answer, earned):
    """Every TODO 8 idea takes its expected values before the call and checks the length first."""
    assert _ideas_06("todo8_ttft_percentiles", "ttft_percentiles", answer) <= earned
