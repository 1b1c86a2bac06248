"""Recorded results of the handoff simulator, to prove that a change to its code (a refactor, a
speed-up) changes no result: every request's record and every summary, to the last bit.

``CASES`` covers both link policies, both ways of sending the KV, every fault, both block policies,
both failure policies, a shortage of decode blocks, a tight deadline and a trace. ``digest`` is the
SHA-256 of a case's whole result as canonical JSON (floats as Python writes them, exactly).

    python tests/sim_golden.py          # rewrite tests/data/handoff_sim_golden.json

Rewrite it only when the model is meant to change, and say so in the commit; the test
(test_handoff_sim.test_results_match_the_recorded_ones) then compares against the new record.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "data" / "handoff_sim_golden.json"

_ALL_FAULTS = {
    "lost_metadata": 0.04,
    "version_skew": 0.04,
    "slow_link": 0.06,
    "stalled_link": 0.04,
    "out_of_blocks": 0.04,
}
_SCENARIOS = {
    "busy": dict(
        n_requests=400, rate_per_s=30.0, prompt_tokens=[256, 8192], output_tokens=[8, 256]
    ),
    "faults_wait_recompute": dict(
        n_requests=400,
        rate_per_s=20.0,
        prompt_tokens=[512, 16384],
        output_tokens=[8, 128],
        faults=_ALL_FAULTS,
        block_policy="wait",
        failure_policy="recompute",
    ),
    "faults_reject_fail": dict(
        n_requests=400,
        rate_per_s=20.0,
        prompt_tokens=[512, 16384],
        output_tokens=[8, 128],
        faults=_ALL_FAULTS,
        block_policy="reject",
        failure_policy="fail",
    ),
    "few_blocks": dict(
        n_requests=300,
        rate_per_s=12.0,
        prompt_tokens=[1024, 8192],
        output_tokens=[64, 512],
        decode_blocks=4000,
        faults={"out_of_blocks": 0.1},
    ),
    "tight_deadline_slow_link": dict(
        n_requests=300,
        rate_per_s=8.0,
        model="Llama-3-70B",
        link="Ethernet 25G",
        deadline_ms=5.0,
        faults={"slow_link": 0.2, "stalled_link": 0.05},
        seed=3,
    ),
}
CASES: dict[str, dict] = {
    f"{name}/{sharing}/{streaming}": {**scenario, "link_sharing": sharing, "streaming": streaming}
    for name, scenario in _SCENARIOS.items()
    for sharing in ("fifo", "fair")
    for streaming in ("whole", "layerwise")
}
CASES["trace/fifo/layerwise"] = dict(
    trace=[
        [0.0, 4096, 16],
        [0.0, 8192, 4],
        [1.5, 128, 64],
        [40.0, 32768, 8],
        [40.0, 2048, 2048],
        [41.0, 1, 1],
    ],
    streaming="layerwise",
    faults={"version_skew": 0.3},
    seed=5,
)
CASES["trace/fair/whole"] = {
    **CASES["trace/fifo/layerwise"],
    "link_sharing": "fair",
    "streaming": "whole",
}


def digest(result: dict) -> str:
    return hashlib.sha256(json.dumps(result, sort_keys=True).encode()).hexdigest()


def run_cases(steps: dict) -> dict[str, dict]:
    """Each case's digest and summary (the summary is kept so that a mismatch can be read)."""
    from tools.handoff import sim as handoff_sim

    found = {}
    for name, config in CASES.items():
        result = handoff_sim.simulate(config, steps=steps)
        found[name] = {"digest": digest(result), "summary": result["summary"]}
    return found


if __name__ == "__main__":
    sys.path[:0] = [str(HERE.parent), str(HERE)]
    from submissions import REFERENCE

    GOLDEN.write_text(
        json.dumps(run_cases(REFERENCE), indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    print(f"wrote {GOLDEN.relative_to(HERE.parent)} ({len(CASES)} cases)")
