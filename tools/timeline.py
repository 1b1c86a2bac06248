"""Tiny timeline helpers for the lane figures of Step 1.

``schedule_greedy`` places work items in list order: each starts once every earlier
item it cannot overlap with has finished. The overlap rule is passed in (the learner's
``check_overlap``), so this module holds no exercise answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .i18n import N_

# lane names, translated where they are drawn
ENGINE_LANES = {
    "cpu": "CPU",
    "sm": N_("GPU SMs"),
    "copy_h2d": N_("copy engine H2D"),
    "copy_d2h": N_("copy engine D2H"),
    "nic": N_("NIC / network"),
}
ENGINE_ROLE = {
    "cpu": "cpu",
    "sm": "compute",
    "copy_h2d": "copy",
    "copy_d2h": "copy",
    "nic": "network",
}


def nominal_schedule(items: Sequence[Mapping], durations_ms: Mapping[str, float]) -> list[dict]:
    """Every item starts at 0: what "it all overlaps" promises on paper."""
    return [_bar(item, 0.0, durations_ms[item["name"]]) for item in items]


def schedule_greedy(
    items: Sequence[Mapping],
    durations_ms: Mapping[str, float],
    check_overlap: Callable[[Mapping, Mapping], Mapping],
) -> list[dict]:
    """Start each item after the earlier items it conflicts with; return lane bars."""
    bars: list[dict] = []
    for i, item in enumerate(items):
        start = 0.0
        for earlier, bar in zip(items[:i], bars):
            if not check_overlap(item, earlier)["can_overlap"]:
                start = max(start, bar["end"])
        bars.append(_bar(item, start, start + durations_ms[item["name"]], waited=start > 0))
    return bars


def makespan(bars: Sequence[Mapping]) -> float:
    """End of the last bar (ms)."""
    return max((b["end"] for b in bars), default=0.0)


def _bar(item: Mapping, start: float, end: float, waited: bool = False) -> dict:
    engine = item["engine"]
    return {
        "lane": ENGINE_LANES.get(engine, engine),
        "start": start,
        "end": end,
        "label": item["name"],
        "role": ENGINE_ROLE.get(engine, "compute"),
        "hatch": waited,
    }
