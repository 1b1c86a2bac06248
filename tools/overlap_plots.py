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


def plot_controls(result: dict) -> None:
    """Each calibrated case and each negative control: how much work completed inside the other
    side's interval (median over repeats), against the bar a repeat must reach."""
    from .overlap_evidence import MIN_COVERED

    rows = [(f"{c['payload_mib']:g} MiB calibrated", c["overlap_evidence"], ROLE["hidden"])
            for c in result["cases"] if c["window"] == "calibrated"]
    rows += [(f"control: {c['name']}", c["overlap_evidence"], ROLE["exposed"]) for c in result.get("controls", [])]
    if not rows:
        print("No cases or controls to plot.")
        return
    fig, ax = new_figure(height=0.6 * len(rows) + 1.9)
    y = range(len(rows))
    ax.barh(list(y), [ev["covered_fraction_median"] for _, ev, _ in rows], color=[c for *_, c in rows])
    for i, (_, ev, _) in enumerate(rows):
        ax.text(1.02, i, evidence_label(ev), va="center", fontsize=8, transform=ax.get_yaxis_transform())
    ax.axvline(MIN_COVERED, color="black", linestyle="--", linewidth=1)
    ax.set_yticks(list(y), [label for label, *_ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("work completed inside the other side's interval\n(share of the shorter side, median)")
    ax.set_title("Evidence: confirmed when most repeats cross the dashed bar\n"
                 "and the copy stays within its limit; controls must not be", fontsize=10)
    plt.show()


def evidence_label(ev: dict) -> str:
    """The verdict and both of its conditions, each with its limit, on two lines: e.g. 'not confirmed ·
    12/20 repeats (> 10 needed)' and 'copy x1.88 > 1.30 limit'."""
    verdict = "confirmed" if ev["confirmed"] else "not confirmed"
    slowdown, limit = ev["copy_slowdown"], ev["max_copy_slowdown"]
    return (f"{verdict} · {ev['overlapped_repeats']}/{ev['repeats']} repeats (> {ev['repeats'] / 2:g} needed)\n"
            f"copy x{slowdown:.2f} {'>' if slowdown > limit else '≤'} {limit:.2f} limit")


def _warn(what: dict, fig) -> None:
    """Print a measurement's warnings before its figure, and mark the figure, so it is never read silently."""
    for text in what.get("warnings", []):
        print(f"WARNING: {text}")
    if what.get("warnings"):
        fig.suptitle(f"Not trustworthy as measured: {len(what['warnings'])} warning(s) printed above",
                     color=PALETTE["vermillion"], fontsize=10)


def plot_pipeline(sweep: dict) -> None:
    """Measured exposed time against chunks, with Step 2's layer-wise model."""
    fig, ax = new_figure(height=3.6)
    _warn(sweep, fig)
    n = sweep["chunks"]
    ax.plot(n, sweep["exposed_ms"], marker="o", color=ROLE["exposed"], label="measured exposed (total - compute alone)")
    ax.plot(n, sweep["model_exposed_ms"], marker="s", linestyle="--", color=ROLE["copy"],
            label=f"model: copy / n + n x {sweep['per_chunk_cost_ms']:.3f} ms")
    ax.axhline(sweep["copy_alone_ms"], color=ROLE["wait"], linewidth=1, linestyle=":", label="copy alone (nothing hidden)")
    ax.axvline(sweep["best_chunks"], color=ROLE["hidden"], linewidth=1, label=f"best measured: {sweep['best_chunks']} chunks")
    ax.set_xscale("log", base=2)
    ax.set_xticks(n, [str(k) for k in n])
    ax.set_xlabel("chunks (copy chunk i+1 while computing on chunk i)")
    ax.set_ylabel("exposed time (ms)")
    ax.set_title(f"Pipeline sweep on {sweep['device']}: {sweep['payload_mib']:g} MiB, "
                 f"compute alone {sweep['compute_alone_ms']:.1f} ms, copy alone {sweep['copy_alone_ms']:.1f} ms")
    # beside the axes, not in them: anywhere inside, some sweep puts a line or the best chunk under it
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    plt.show()


def plot_bandwidth(curve: dict) -> None:
    """Copy time and achieved bandwidth against size, with the fitted t0 + bytes / bandwidth."""
    colors = [PALETTE["blue"], PALETTE["orange"], PALETTE["green"], PALETTE["vermillion"]]
    fig, axes = new_figure(rows=1, cols=2, height=3.6)
    _warn(curve, fig)
    for color, (name, s) in zip(colors, curve["series"].items()):
        sizes = s["bytes"]
        fitted = [s["t0_ms"] + b / (s["gbytes_per_s"] * 1e6) for b in sizes]
        axes[0].loglog(sizes, s["ms"], "o", color=color, label=f"{name}: t0 {s['t0_ms'] * 1e3:.1f} µs, {s['gbytes_per_s']:.1f} GB/s")
        axes[0].loglog(sizes, fitted, "-", color=color, linewidth=1)
        axes[1].semilogx(sizes, [b / (t * 1e6) for b, t in zip(sizes, s["ms"])], "o-", color=color, label=name)
    axes[0].set_xlabel("bytes")
    axes[0].set_ylabel("copy time (ms)")
    axes[0].set_title("time = t0 + bytes / bandwidth (lines: fit)")
    axes[0].legend(frameon=False, fontsize=7)
    axes[1].set_xlabel("bytes")
    axes[1].set_ylabel("achieved bandwidth (GB/s)")
    axes[1].set_title(f"Small copies pay t0 ({curve['device']})")
    plt.show()
