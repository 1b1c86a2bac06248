"""One figure style for every notebook: labelled axes with units, a colour-blind-safe
palette (Okabe-Ito), sizes readable at notebook width."""
from __future__ import annotations

from typing import Callable, Iterable, Sequence

import matplotlib

import matplotlib.pyplot as plt
from matplotlib.patches import Patch, Rectangle

# Okabe & Ito (2008): distinguishable with the common forms of colour-blindness.
PALETTE = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "green": "#009E73",
    "vermillion": "#D55E00",
    "sky": "#56B4E9",
    "purple": "#CC79A7",
    "yellow": "#F0E442",
    "black": "#000000",
    "grey": "#999999",
}
# What each colour means, everywhere in the course.
ROLE = {
    "cpu": PALETTE["purple"],
    "compute": PALETTE["blue"],
    "copy": PALETTE["orange"],
    "network": PALETTE["sky"],
    "hidden": PALETTE["green"],
    "exposed": PALETTE["vermillion"],
    "wait": PALETTE["grey"],
}
FIGSIZE = (9.0, 3.6)


def apply_style() -> None:
    """Set the course's matplotlib defaults (idempotent)."""
    matplotlib.rcParams.update({
        "figure.figsize": FIGSIZE,
        "figure.dpi": 100,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.titlesize": 12,
        "axes.labelsize": 11,
        "legend.fontsize": 9,
        "xtick.labelsize": 9,
        "ytick.labelsize": 9,
        "axes.prop_cycle": matplotlib.cycler(color=[PALETTE[k] for k in ("blue", "orange", "green", "vermillion", "sky", "purple", "black")]),
    })


def draw_lanes(ax, bars: Iterable[dict], lanes: Sequence[str], title: str = "", xlabel: str = "time (ms)") -> None:
    """Draw a lane timeline. Each bar: {'lane', 'start', 'end', 'label', 'role'}, times in ms.

    A bar with ``'hatch': True`` is drawn hatched (work that waits or contends).
    """
    index = {lane: i for i, lane in enumerate(lanes)}
    bars = list(bars)
    rows = _sub_rows(bars)  # bars that overlap in one lane are stacked, so none hides another
    right = 0.0
    for bar, (row, count) in zip(bars, rows):
        height = 0.7 / count
        y = index[bar["lane"]] - 0.35 + row * height + height / 2
        width = bar["end"] - bar["start"]
        right = max(right, bar["end"])
        ax.broken_barh([(bar["start"], width)], (y - height / 2, height), facecolors=ROLE[bar.get("role", "compute")],
                       edgecolor="black", linewidth=0.6, hatch="//" if bar.get("hatch") else None, alpha=0.9)
        if bar.get("label"):
            ax.text(bar["start"] + width / 2, y, bar["label"], ha="center", va="center", fontsize=8,
                    color="white" if bar.get("role") in ("compute", "cpu", "exposed") else "black", clip_on=True)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(len(lanes) - 0.4, -0.6)
    ax.set_xlim(0, right * 1.04 if right else 1)
    ax.set_xlabel(xlabel)
    ax.grid(axis="y", visible=False)
    if title:
        ax.set_title(title)


def _sub_rows(bars: Sequence[dict]) -> list[tuple[int, int]]:
    """(row, rows in lane) for each bar: greedy interval partitioning per lane."""
    placement: list[int] = []
    row_ends: dict[str, list[float]] = {}
    for bar in bars:
        ends = row_ends.setdefault(bar["lane"], [])
        for row, end in enumerate(ends):
            if end <= bar["start"] + 1e-12:
                ends[row] = bar["end"]
                break
        else:
            ends.append(bar["end"])
            row = len(ends) - 1
        placement.append(row)
    return [(row, len(row_ends[bar["lane"]])) for bar, row in zip(bars, placement)]


def draw_transfer_timeline(ax, start_ms: float, end_ms: float, cover_intervals: Sequence[Sequence[float]],
                           hidden_ms: float, exposed_ms: float, title: str = "",
                           segments: Sequence[Sequence[float]] | None = None) -> None:
    """Transfer lane over the independent-work lane, hidden part green, exposed part red.

    ``segments`` draws the transfer as several pieces (one per layer) instead of one bar.
    The shading is drawn, not computed: windows are painted over each transfer bar and
    clipped to it by matplotlib. The numbers in the legend come from the caller.
    """
    covers = [tuple(map(float, w)) for w in cover_intervals]
    lefts = [start_ms] + [a for a, _ in covers]
    rights = [end_ms] + [b for _, b in covers]
    lo, hi = min(lefts), max(rights)
    pad = 0.04 * (hi - lo or 1.0)
    for a, b in covers:
        ax.broken_barh([(a, b - a)], (1.15, 0.6), facecolors=ROLE["compute"], edgecolor="black", linewidth=0.6, alpha=0.85)
    for seg_start, seg_end in segments or [(start_ms, end_ms)]:
        frame = Rectangle((seg_start, 0.15), seg_end - seg_start, 0.7, facecolor=ROLE["exposed"], edgecolor="black",
                          linewidth=0.8 if not segments or len(segments) < 12 else 0.2)
        ax.add_patch(frame)
        for a, b in covers:
            patch = Rectangle((a, 0.15), b - a, 0.7, facecolor=ROLE["hidden"], edgecolor="none")
            ax.add_patch(patch)
            patch.set_clip_path(frame)
    ax.set_yticks([0.5, 1.45], ["transfer", "independent\ncompute"])
    ax.set_ylim(2.0, -0.1)
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_xlabel("time (ms)")
    ax.grid(axis="y", visible=False)
    total = end_ms - start_ms
    ax.legend(handles=[
        Patch(facecolor=ROLE["hidden"], label=f"hidden {hidden_ms:.3g} ms"),
        Patch(facecolor=ROLE["exposed"], label=f"exposed {exposed_ms:.3g} ms"),
        Patch(facecolor=ROLE["compute"], label="overlap window"),
    ], loc="upper left", ncols=3, frameon=False, bbox_to_anchor=(0.0, -0.28))
    ax.set_title(title or f"transfer {total:.3g} ms", loc="left")


def decision_map(ax, decide: Callable[[float, float], str], ready_at: Sequence[float], deadlines: Sequence[float],
                 colors: dict[str, str], title: str = "") -> None:
    """Colour a grid of (ready_at, deadline) by the action that ``decide`` returns."""
    import numpy as np

    names = list(colors)
    grid = np.zeros((len(deadlines), len(ready_at)))
    for j, deadline in enumerate(deadlines):
        for i, ready in enumerate(ready_at):
            grid[j, i] = names.index(decide(ready, deadline))
    cmap = matplotlib.colors.ListedColormap([colors[n] for n in names])
    ax.pcolormesh(ready_at, deadlines, grid, cmap=cmap, vmin=-0.5, vmax=len(names) - 0.5, shading="nearest")
    ax.set_xlabel("state ready at (ms)")
    ax.set_ylabel("decode deadline (ms)")
    ax.grid(False)
    ax.legend(handles=[Patch(facecolor=colors[n], label=n) for n in names], loc="upper left", frameon=True, fontsize=8)
    if title:
        ax.set_title(title)


def new_figure(rows: int = 1, cols: int = 1, height: float | None = None, **kwargs):
    """``plt.subplots`` with the course's width."""
    apply_style()
    size = (FIGSIZE[0], height or FIGSIZE[1] * rows)
    return plt.subplots(rows, cols, figsize=size, constrained_layout=True, **kwargs)
