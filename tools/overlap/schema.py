"""Step 5's result contract: names, decisions, and a validator that enforces honesty.

The JSON Schema in ``tools/schemas/`` states what a result may claim for its run mode (the
evidence level, a CPU decision of its own, ``path_confirmed`` only with its evidence, cases and
controls for a measured run, device facts for a GPU run, no unknown field). What JSON Schema
cannot state, ``validate_result`` checks after it: ratios consistent with the medians, the
evidence's verdict consistent with its own counts, preconditions consistent with their flag.
"""

from __future__ import annotations

import json
import math
from importlib import resources

from .evidence import MIN_COVERED, MIN_REPEATS, preconditions_met

SCHEMA_VERSION = "inference-mechanism-gpu/v1"
SEMANTIC_ID = "INF-SERVING-OVERLAP"
RUN_MODES = ("dry_run", "real_gpu", "real_cpu")
# What the learner's decide_overlap (TODO 5) may return.
LEARNER_DECISIONS = (
    "accept_physical_overlap",
    "tune_overlap_window",
    "reject_incorrect_path",
    "reject_instrument_fault",
    "rerun_on_quiet_machine",
)
# The CPU analogue's acceptance: a CPU run never carries the GPU decision.
CPU_ACCEPT = "accept_cpu_analogue_overlap"
DECISIONS = LEARNER_DECISIONS + (
    CPU_ACCEPT,
    "reject_until_environment_fixed",
    "not_measured",
    "not_decided",
)
REL_TOL = 1e-6


def load_schema() -> dict:
    return json.loads(
        resources.files("tools")
        .joinpath("schemas/inf_serving_overlap.schema.json")
        .read_text(encoding="utf-8")
    )


def validate_result(result: dict) -> None:
    """Raise ``jsonschema.ValidationError`` when ``result`` breaks the schema or is inconsistent."""
    import jsonschema

    jsonschema.validate(result, load_schema())
    problems = consistency_problems(result)
    if problems:
        raise jsonschema.ValidationError("inconsistent result: " + "; ".join(problems))


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-9)


def _evidence_problems(where: str, ev: dict) -> list[str]:
    out = []
    if ev["overlapped_repeats"] > ev["repeats"]:
        out.append(f"{where}: more overlapped repeats than repeats")
    if not _close(ev["overlapped_fraction"], ev["overlapped_repeats"] / ev["repeats"]):
        out.append(f"{where}: overlapped_fraction is not overlapped_repeats / repeats")
    verdict = (
        ev["overlapped_fraction"] > MIN_REPEATS and ev["copy_slowdown"] <= ev["max_copy_slowdown"]
    )
    if ev["confirmed"] != verdict:
        out.append(f"{where}: evidence confirmed={ev['confirmed']} but its counts say {verdict}")
    return out


def consistency_problems(result: dict) -> list[str]:
    """What the numbers in a schema-valid result contradict; empty when consistent."""
    problems = []
    for i, c in enumerate(result.get("cases", [])):
        where = f"case {i} ({c['payload_mib']} MiB, {c['window']})"
        if c["serial_median_ms"] <= 0 or not _close(
            c["latency_ratio"], c["overlap_median_ms"] / c["serial_median_ms"]
        ):
            problems.append(f"{where}: latency_ratio is not overlap_median_ms / serial_median_ms")
        if not _close(c["hidden_ms"], max(c["serial_median_ms"] - c["overlap_median_ms"], 0.0)):
            problems.append(f"{where}: hidden_ms is not serial median - overlapped median")
        if not _close(c["predicted_serial_ms"], c["copy_alone_ms"] + c["compute_alone_ms"]):
            problems.append(f"{where}: predicted_serial_ms is not copy alone + compute alone")
        if not _close(c["predicted_overlap_ms"], max(c["copy_alone_ms"], c["compute_alone_ms"])):
            problems.append(f"{where}: predicted_overlap_ms is not max(copy alone, compute alone)")
        if (
            c["serial_p95_ms"] < c["serial_median_ms"]
            or c["overlap_p95_ms"] < c["overlap_median_ms"]
        ):
            problems.append(f"{where}: a P95 below its median")
        if c["preconditions_met"] != preconditions_met(c["preconditions"]):
            problems.append(f"{where}: preconditions_met does not follow the preconditions")
        if c["path_confirmed"] != (c["preconditions_met"] and c["overlap_confirmed"]):
            problems.append(
                f"{where}: path_confirmed is not preconditions_met and overlap_confirmed"
            )
        problems += _evidence_problems(where, c["overlap_evidence"])
    for ctl in result.get("controls", []):
        where = f"control {ctl['name']}"
        if ctl["serial_median_ms"] <= 0 or not _close(
            ctl["latency_ratio"], ctl["control_median_ms"] / ctl["serial_median_ms"]
        ):
            problems.append(f"{where}: latency_ratio is not control median / serial median")
        problems += _evidence_problems(where, ctl["overlap_evidence"])
    return problems


__all__ = [
    "SCHEMA_VERSION",
    "SEMANTIC_ID",
    "RUN_MODES",
    "LEARNER_DECISIONS",
    "CPU_ACCEPT",
    "DECISIONS",
    "MIN_COVERED",
    "load_schema",
    "validate_result",
    "consistency_problems",
]
