"""Figures for Step 5: serial against overlapped, prediction against measurement, and
one overlapped run per stream."""
from __future__ import annotations

import matplotlib.pyplot as plt

from .plotting import PALETTE, ROLE, draw_lanes, new_figure


def plot_result(result: dict, source: str = "") -> None:
    """Three panels from a measured result. ``source`` names where the data came from."""
    cases = result["cases"]
    if not cases:
        print("No measured cases to plot.")
        return
    where = result["hardware"].get("device", "?")
    fig, axes = new_figure(rows=1, cols=2, height=3.8)
    _serial_vs_overlap(axes[0], cases)
    _prediction(axes[1], cases)
    fig.suptitle(f"{result['run_mode']} on {where}{' · ' + source if source else ''}", fontsize=11)
    plt.show()
    balanced = max((c for c in cases if c["window"] == "calibrated"), key=lambda c: c["payload_mib"], default=cases[-1])
    fig, ax = new_figure(height=2.4)
    t = balanced["timeline"]
    lanes = ["copy (stream / thread 1)", "compute (stream / thread 2)"]
    draw_lanes(ax, [
        {"lane": lanes[0], "start": t["copy_start"], "end": t["copy_end"], "label": f"copy {balanced['payload_mib']} MiB", "role": "copy"},
        {"lane": lanes[1], "start": t["compute_start"], "end": t["compute_end"], "label": f"{balanced['matmul_count']} matmuls", "role": "compute"},
    ], lanes, title=f"One overlapped run, calibrated window: total {t['total']:.2f} ms (serial median {balanced['serial_median_ms']:.2f} ms)")
    plt.show()


def _serial_vs_overlap(ax, cases: list[dict]) -> None:
    labels = [f"{c['payload_mib']:g} MiB\n{c['window']}" for c in cases]
    x = range(len(cases))
    ax.bar([i - 0.2 for i in x], [c["serial_median_ms"] for c in cases], width=0.4, color=ROLE["exposed"], label="serial (median)")
    ax.bar([i + 0.2 for i in x], [c["overlap_median_ms"] for c in cases], width=0.4, color=ROLE["hidden"], label="overlapped (median)")
    for i, c in enumerate(cases):
        ax.text(i + 0.2, c["overlap_median_ms"], f"{c['latency_ratio']:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_ylabel("time (ms)")
    ax.set_title("Serial vs overlapped (label: latency_ratio)")
    ax.legend(frameon=False)


def _prediction(ax, cases: list[dict]) -> None:
    colors = {"fixed": PALETTE["orange"], "calibrated": PALETTE["blue"]}
    top = 0.0
    for window, color in colors.items():
        sel = [c for c in cases if c["window"] == window]
        ax.scatter([c["predicted_overlap_ms"] for c in sel], [c["overlap_median_ms"] for c in sel], color=color, label=f"{window} window", zorder=3)
        top = max([top] + [max(c["predicted_overlap_ms"], c["overlap_median_ms"]) for c in sel])
    ax.plot([0, top * 1.1], [0, top * 1.1], color="black", linewidth=1, linestyle="--", label="measured = predicted")
    ax.set_xlabel("predicted overlapped time (ms)\nmax(copy alone, compute alone)")
    ax.set_ylabel("measured overlapped time (ms)")
    ax.set_title("Model against measurement")
    ax.legend(frameon=False, fontsize=8)
