"""Figures for Step 5: serial against overlapped, prediction against measurement, and
one overlapped run per stream."""

from __future__ import annotations

from ..i18n import N_, Message, localize, tr
from ..plotting import PALETTE, ROLE, binary_size, draw_lanes, new_figure


def _show() -> None:
    """pyplot's show, imported when a figure is drawn (see tools.plotting: the judge never
    draws)."""
    import matplotlib.pyplot as plt

    plt.show()


def device_name(device: str) -> str:
    """A device as a figure names it: ``CPU`` for the CPU analogue, a GPU by its own name."""
    return "CPU" if device == "cpu" else device


# where a result shown came from (the notebook's 5.3 names one): translated where it is drawn
SOURCES = (N_("this run"), N_("reference measurement shipped with the course"))


def plot_result(result: dict, source: str = "") -> None:
    """Three panels from a measured result. ``source`` names where the data came from (a catalog
    key, ``SOURCES``)."""
    cases = result["cases"]
    if not cases:
        print(tr("No measured cases to plot."))
        return
    where = result["hardware"].get("device", "?")
    fig, axes = new_figure(rows=1, cols=2, height=3.8)
    _serial_vs_overlap(axes[0], cases)
    _prediction(axes[1], cases)
    title = tr("{mode} on {device}", mode=result["run_mode"], device=device_name(where))
    fig.suptitle(
        tr("{title} · {source}", title=title, source=tr(source)) if source else title, fontsize=11
    )
    _show()
    balanced = max(
        (c for c in cases if c["window"] == "calibrated"),
        key=lambda c: c["payload_mib"],
        default=cases[-1],
    )
    fig, ax = new_figure(height=2.4)
    t = balanced["timeline"]
    lanes = [N_("copy (stream / thread 1)"), N_("compute (stream / thread 2)")]
    draw_lanes(
        ax,
        [
            {
                "lane": lanes[0],
                "start": t["copy_start"],
                "end": t["copy_end"],
                "label": tr("copy {mib} MiB", mib=balanced["payload_mib"]),
                "role": "copy",
            },
            {
                "lane": lanes[1],
                "start": t["compute_start"],
                "end": t["compute_end"],
                "label": tr("{count} matmuls", count=balanced["matmul_count"]),
                "role": "compute",
            },
        ],
        lanes,
        title=tr(
            "One overlapped run, calibrated window: total {total} ms (serial median {serial} ms)",
            total=format(t["total"], ".2f"),
            serial=format(balanced["serial_median_ms"], ".2f"),
        ),
    )
    _show()


# a case's window, as its tick label and its legend entry name it (translated where they are drawn)
WINDOW_NAME = {"fixed": N_("fixed"), "calibrated": N_("calibrated")}
WINDOW_LABEL = {"fixed": N_("fixed window"), "calibrated": N_("calibrated window")}


def _serial_vs_overlap(ax, cases: list[dict]) -> None:
    labels = [
        tr(
            "{mib} MiB\n{window}",
            mib=format(c["payload_mib"], "g"),
            window=tr(WINDOW_NAME.get(c["window"], c["window"])),
        )
        for c in cases
    ]
    x = range(len(cases))
    ax.bar(
        [i - 0.2 for i in x],
        [c["serial_median_ms"] for c in cases],
        width=0.4,
        color=ROLE["exposed"],
        label=tr("serial (median)"),
    )
    ax.bar(
        [i + 0.2 for i in x],
        [c["overlap_median_ms"] for c in cases],
        width=0.4,
        color=ROLE["hidden"],
        label=tr("overlapped (median)"),
    )
    for i, c in enumerate(cases):
        ax.text(
            i + 0.2,
            c["overlap_median_ms"],
            f"{c['latency_ratio']:.2f}",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_ylabel(tr("time (ms)"))
    ax.set_title(tr("Serial vs overlapped (label: latency_ratio)"))
    ax.legend(frameon=False)


def _prediction(ax, cases: list[dict]) -> None:
    colors = {"fixed": PALETTE["orange"], "calibrated": PALETTE["blue"]}
    top = 0.0
    for window, color in colors.items():
        sel = [c for c in cases if c["window"] == window]
        ax.scatter(
            [c["predicted_overlap_ms"] for c in sel],
            [c["overlap_median_ms"] for c in sel],
            color=color,
            label=tr(WINDOW_LABEL[window]),
            zorder=3,
        )
        top = max([top] + [max(c["predicted_overlap_ms"], c["overlap_median_ms"]) for c in sel])
    ax.plot(
        [0, top * 1.1],
        [0, top * 1.1],
        color="black",
        linewidth=1,
        linestyle="--",
        label=tr("measured = predicted"),
    )
    ax.set_xlabel(tr("predicted overlapped time (ms)\nmax(copy alone, compute alone)"))
    ax.set_ylabel(tr("measured overlapped time (ms)"))
    ax.set_title(tr("Model against measurement"))
    ax.legend(frameon=False, fontsize=8)


# The evidence chart's colours carry the verdict, never the kind of row: a bar is green only when it
# confirms overlap; a control (hatched) is expected to stay grey, and one that confirms is red.
EVIDENCE_COLOURS = {  # the keys are legend entries, translated where the figure is drawn
    N_("confirmed"): ROLE["hidden"],
    N_("not confirmed"): ROLE["wait"],
    N_("control, not confirmed (as it must be)"): ROLE["wait"],
    N_("control confirmed: instrument fault"): ROLE["exposed"],
}


def evidence_rows(result: dict) -> list[tuple[str, dict, str, bool]]:
    """(label, evidence, verdict category, is a control) for each calibrated case, then each
    control."""
    rows = [
        (
            tr("{mib} MiB calibrated", mib=format(c["payload_mib"], "g")),
            c["overlap_evidence"],
            "confirmed" if c["overlap_evidence"]["confirmed"] else "not confirmed",
            False,
        )
        for c in result["cases"]
        if c["window"] == "calibrated"
    ]
    rows += [
        (
            tr("control: {name}", name=c["name"]),
            c["overlap_evidence"],
            "control confirmed: instrument fault"
            if c["overlap_evidence"]["confirmed"]
            else "control, not confirmed (as it must be)",
            True,
        )
        for c in result.get("controls", [])
    ]
    return rows


def plot_controls(result: dict) -> None:
    """Each calibrated case and each negative control: how much work completed inside the other
    side's interval (median over repeats), against the bar a repeat must reach. The colour is the
    verdict: green confirmed, grey not confirmed, red a control that confirmed (hatched: a
    control)."""
    from matplotlib.patches import Patch

    from .evidence import MIN_COVERED

    rows = evidence_rows(result)
    if not rows:
        print(tr("No cases or controls to plot."))
        return
    fig, ax = new_figure(height=0.6 * len(rows) + 2.3)
    y = list(range(len(rows)))
    bars = ax.barh(
        y,
        [ev["covered_fraction_median"] for _, ev, _, _ in rows],
        color=[EVIDENCE_COLOURS[verdict] for _, _, verdict, _ in rows],
        edgecolor="black",
        linewidth=0.6,
    )
    for i, (bar, (_, ev, verdict, control)) in enumerate(zip(bars, rows)):
        if control:
            bar.set_hatch("//")
        if ev["covered_fraction_median"] < 0.02:  # an empty bar still shows its verdict's colour
            ax.plot(
                [0.004],
                [i],
                marker="s",
                markersize=9,
                color=EVIDENCE_COLOURS[verdict],
                markeredgecolor="black",
                clip_on=False,
                zorder=3,
            )
    # the label carries the colour too: a bar may be empty
    for i, (_, ev, verdict, _) in enumerate(rows):
        ax.text(
            1.03,
            i,
            evidence_label(ev),
            va="center",
            fontsize=8,
            transform=ax.get_yaxis_transform(),
            bbox={
                "boxstyle": "round,pad=0.3",
                "facecolor": "white",
                "edgecolor": EVIDENCE_COLOURS[verdict],
                "linewidth": 2,
            },
        )
    ax.axvline(MIN_COVERED, color="black", linestyle="--", linewidth=1)
    ax.set_yticks(y, [label for label, *_ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(
        tr("work completed inside the other side's interval\n(share of the shorter side, median)")
    )
    ax.set_title(
        tr(
            "Evidence: confirmed when most repeats cross the dashed bar\nand the copy stays "
            "within its limit; controls must not be"
        ),
        fontsize=10,
    )
    drawn = list(dict.fromkeys(verdict for _, _, verdict, _ in rows))
    handles = [
        Patch(
            facecolor=EVIDENCE_COLOURS[v],
            edgecolor="black",
            hatch="//" if v.startswith("control") else "",
            label=tr(v),
        )
        for v in drawn
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=2, frameon=False, fontsize=8)
    _show()


def sketch_serial_vs_overlapped(copy_ms: float = 10.0, compute_ms: float = 10.0) -> None:
    """The two timelines of this notebook before any measurement: copy then compute on one stream,
    and the two on two streams at once (ideal: the total is the longer of the two)."""
    lanes = [N_("copy engine"), N_("SMs (compute)")]
    fig, axes = new_figure(rows=2, cols=1, height=3.6, sharex=True)
    serial, overlapped = copy_ms + compute_ms, max(copy_ms, compute_ms)
    draw_lanes(
        axes[0],
        [
            {"lane": lanes[0], "start": 0.0, "end": copy_ms, "label": N_("copy"), "role": "copy"},
            {
                "lane": lanes[1],
                "start": copy_ms,
                "end": serial,
                "label": N_("compute"),
                "role": "compute",
            },
        ],
        lanes,
        title=tr(
            "Serial (one stream): compute waits for the copy, {ms} ms", ms=format(serial, "g")
        ),
        xlabel="",
    )
    draw_lanes(
        axes[1],
        [
            {"lane": lanes[0], "start": 0.0, "end": copy_ms, "label": N_("copy"), "role": "copy"},
            {
                "lane": lanes[1],
                "start": 0.0,
                "end": compute_ms,
                "label": N_("compute"),
                "role": "compute",
            },
        ],
        lanes,
        title=tr(
            "Overlapped (two streams): both at once, {ms} ms (latency ratio {ratio})",
            ms=format(overlapped, "g"),
            ratio=format(overlapped / serial, ".2f"),
        ),
    )
    axes[0].set_xlim(0, serial * 1.04)  # shared: the overlapped panel keeps the serial scale
    _show()


def evidence_label(ev: dict) -> str:
    """The verdict, then each of its two conditions with its limit, marked ✓ (met) or ✗ (missed),
    the missed ones first: e.g. 'not confirmed · ✗ copy x1.88 > 1.30 limit' and '✓ 20/20 repeats
    overlapped (> 10 needed)'. A case whose bar crosses the dashed line can still be unconfirmed:
    the label says which condition failed."""
    slowdown, limit = ev["copy_slowdown"], ev["max_copy_slowdown"]
    needed = ev["repeats"] / 2
    repeats = tr(
        "{overlapped}/{repeats} repeats overlapped (> {needed} needed)",
        overlapped=ev["overlapped_repeats"],
        repeats=ev["repeats"],
        needed=format(needed, "g"),
    )
    copy = tr(
        "copy x{slowdown} {sign} {limit} limit",
        slowdown=format(slowdown, ".2f"),
        sign=">" if slowdown > limit else "≤",
        limit=format(limit, ".2f"),
    )
    conditions = [(ev["overlapped_repeats"] > needed, repeats), (slowdown <= limit, copy)]
    ordered = [text for met, text in conditions if not met] + [
        text for met, text in conditions if met
    ]
    marks = {text: "✓" if met else "✗" for met, text in conditions}
    verdict = tr("confirmed") if ev["confirmed"] else tr("not confirmed")
    first, *rest = [f"{marks[text]} {text}" for text in ordered]
    return "\n".join([f"{verdict} · {first}", *rest])


def _warn(what: dict, fig) -> None:
    """Print a measurement's warnings before its figure, and mark the figure, so it is never read
    silently. A warning is a Message (made by ``sweep``), or a recorded file's English text
    (``localize``)."""
    from .sweep import machine_text

    for warning in what.get("warnings", []):
        print(
            tr(
                "WARNING: {warning}",
                warning=warning if isinstance(warning, Message) else localize(str(warning)),
            )
        )
    origin = what.get("replayed_from")
    if what.get("warnings"):
        fig.suptitle(
            tr(
                "Not trustworthy as measured: {count} warning(s) printed above",
                count=len(what["warnings"]),
            ),
            color=PALETTE["vermillion"],
            fontsize=10,
        )
    elif origin:  # a dry run's figure is a recording: it says so on the figure itself
        fig.suptitle(
            tr(
                "REPLAYED, not measured here: recorded on {machine} on {date}",
                machine=machine_text(origin["machine"]),
                date=origin["created_at"][:10],
            ),
            color=PALETTE["black"],
            fontsize=10,
            fontweight="bold",
        )


def plot_pipeline(sweep: dict) -> None:
    """Measured exposed time against chunks, with Step 2's layer-wise model."""
    fig, ax = new_figure(height=3.6)
    _warn(sweep, fig)
    n = sweep["chunks"]
    ax.plot(
        n,
        sweep["exposed_ms"],
        marker="o",
        color=ROLE["exposed"],
        label=tr("measured exposed (total - compute alone)"),
    )
    ax.plot(
        n,
        sweep["model_exposed_ms"],
        marker="s",
        linestyle="--",
        color=ROLE["copy"],
        label=tr("model: copy / n + n x {ms} ms", ms=format(sweep["per_chunk_cost_ms"], ".3f")),
    )
    ax.axhline(
        sweep["copy_alone_ms"],
        color=ROLE["wait"],
        linewidth=1,
        linestyle=":",
        label=tr("copy alone (nothing hidden)"),
    )
    ax.axvline(
        sweep["best_chunks"],
        color=ROLE["hidden"],
        linewidth=1,
        label=tr("best measured: {chunks} chunks", chunks=sweep["best_chunks"]),
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(n, [str(k) for k in n])
    ax.set_xlabel(tr("chunks (copy chunk i+1 while computing on chunk i)"))
    ax.set_ylabel(tr("exposed time (ms)"))
    ax.set_title(
        tr(
            "Pipeline sweep on {device}: {mib} MiB, compute alone {compute} ms, copy "
            "alone {copy} ms",
            device=device_name(sweep["device"]),
            mib=format(sweep["payload_mib"], "g"),
            compute=format(sweep["compute_alone_ms"], ".1f"),
            copy=format(sweep["copy_alone_ms"], ".1f"),
        )
    )
    # beside the axes, not in them: anywhere inside, some sweep puts a line or the best chunk under
    # it
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _show()


def plot_bandwidth(curve: dict) -> None:
    """Copy time and achieved bandwidth against size, with the fitted t0 + bytes / bandwidth."""
    colors = [PALETTE["blue"], PALETTE["orange"], PALETTE["green"], PALETTE["vermillion"]]
    fig, axes = new_figure(rows=1, cols=2, height=3.6)
    _warn(curve, fig)
    for color, (name, s) in zip(colors, curve["series"].items()):
        sizes = s["bytes"]
        fitted = [s["t0_ms"] + b / (s["gbytes_per_s"] * 1e6) for b in sizes]
        axes[0].loglog(
            sizes,
            s["ms"],
            "o",
            color=color,
            label=tr(
                "{name}: t0 {t0} µs, {bandwidth} GB/s",
                name=name,
                t0=format(s["t0_ms"] * 1e3, ".1f"),
                bandwidth=format(s["gbytes_per_s"], ".1f"),
            ),
        )
        axes[0].loglog(sizes, fitted, "-", color=color, linewidth=1)
        axes[1].semilogx(
            sizes, [b / (t * 1e6) for b, t in zip(sizes, s["ms"])], "o-", color=color, label=name
        )
    sizes = sorted({b for s in curve["series"].values() for b in s["bytes"]})
    for ax in axes:
        _copy_size_axis(ax, sizes)
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axes[0].yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes[0].yaxis.set_minor_formatter(NullFormatter())
    axes[0].set_ylabel(tr("copy time (ms)"))
    axes[0].set_title(tr("time = t0 + bytes / bandwidth (lines: fit)"))
    axes[0].legend(frameon=False, fontsize=7)
    axes[1].set_ylabel(tr("achieved bandwidth (GB/s)"))
    axes[1].set_title(tr("Small copies pay t0 ({device})", device=device_name(curve["device"])))
    _show()


def _copy_size_axis(ax, sizes: list[int]) -> None:
    """A log axis of copy sizes, ticked at the sizes measured and labelled in binary units
    (``4 KiB`` ... ``16 MiB``), every other one when more than eight would crowd it."""
    from matplotlib.ticker import NullLocator

    shown = sizes if len(sizes) <= 8 else sizes[::2]
    ax.set_xticks(shown, [binary_size(b) for b in shown], fontsize=8)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(tr("copy size (log scale)"))
