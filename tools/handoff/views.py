"""Notebook 06's figures and live panel, on the simulator in :mod:`tools.handoff.sim`.

Every function here takes results of :func:`tools.handoff.sim.simulate` (or the learner's step
functions, which it passes on) and draws or prints them; none holds an answer to an exercise.
The panel follows the explorer of notebook 02: live widgets where a frontend renders them
(:func:`tools.explorer.widget_frontend`), else one static figure for the default settings.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from .. import presets
from ..explorer import show_live_or_static, widget_box
from ..i18n import COMMA, N_, Message, display_width, error_text, joined, tr
from ..plotting import PALETTE, add_legend, draw_lanes, new_figure, readable
from . import sim as handoff_sim

# A small run: seconds on a laptop, enough requests for a P99 (the 99th percentile of 400 is the
# 4th-largest value, so it moves with one slow request: read it as a tail, not a benchmark).
SMALL_RUN = dict(
    n_requests=400, prompt_tokens=[512, 8192], output_tokens=[32, 256], prefill_workers=4, seed=3
)
# The panel opens where its lesson shows: a 70B model's KV over a 25G link at 4 req/s keeps the link
# busier than prefill (36% against 31% with the course's answers), so how the KV is sent
# decides the TTFT: sent whole, P50 about 505 ms; layerwise, about 390 ms. At 12 req/s and above the
# prefill pool is over 90% busy and queueing for prefill hides the difference (see notebook 06).
PANEL_DEFAULTS = dict(
    rate_per_s=4.0, link="Ethernet 25G", model="Llama-3-70B", streaming="whole", fault_rate=0.0
)
FIRST_TOKEN_COLOR = PALETTE["yellow"]


def run_setting(
    steps: dict,
    rate_per_s: float,
    link: str,
    model: str,
    streaming: str,
    fault_rate: float,
    n_requests: int | None = None,
    failure_policy: str = "recompute",
) -> dict:
    """One small simulation (``SMALL_RUN``, ``n_requests`` if given); ``fault_rate`` applies to
    every fault kind of the simulator."""
    faults = {name: fault_rate for name in handoff_sim.FAULTS} if fault_rate else {}
    size = {"n_requests": n_requests} if n_requests else {}
    return handoff_sim.simulate(
        steps=steps,
        **{**SMALL_RUN, **size},
        rate_per_s=rate_per_s,
        link=link,
        model=model,
        streaming=streaming,
        faults=faults,
        failure_policy=failure_policy,
    )


def served_from_transfer(result: dict) -> list[dict]:
    """The requests decode served from their transfer: outcome 'ok' with a transfer on record. The
    course's one "mean exposed" is over these (the table, the panel's readout and the histogram):
    a recomputed or failed request's transfer was cut short, and a rejected one never sent."""
    return [
        r
        for r in result.get("records", [])
        if r["outcome"] == "ok" and r["transfer_ms"] is not None
    ]


def mean_exposed_ms(result: dict) -> float | None:
    """The mean exposed transfer time (ms) of the requests served from their transfer, None when
    none was."""
    served = served_from_transfer(result)
    return sum(r["exposed_ms"] for r in served) / len(served) if served else None


# A run's label is a key of the dictionary of runs a notebook passes (how the KV is sent, the
# failure policy): its name in the learner's language is the catalog's
RUN_NAMES = (N_("whole"), N_("layerwise"), N_("recompute"), N_("fail"), N_("this setting"))
# an outcome as the summary and the lanes name it (the code stays what handoff_step returns)
OUTCOME_NAMES = {
    "ok": N_("ok"),
    "recomputed": N_("recomputed"),
    "failed": N_("failed"),
    "rejected": N_("rejected"),
}


def run_name(label: str) -> str:
    """A run's label in the learner's language (``RUN_NAMES``; another label as it is)."""
    return tr(label)


def counted(counts: dict, names: dict | None = None, zeros: bool = False):
    """``250 ok, 150 recomputed``: each count (not a zero one, unless ``zeros``) with its name
    (``names``, else the code as it is), joined in the learner's language (a Message)."""
    names = names or {}
    parts = [
        Message("{count} {name}", count=n, name=tr(names[k]) if k in names else k)
        for k, n in counts.items()
        if n or zeros
    ]
    return joined(parts, COMMA)


def summary_text(result: dict) -> str:
    """The panel's readout: TTFT percentiles, outcomes, mean exposed transfer (of the requests
    served from their transfer, as in the table), and how busy the link and the prefill pool were
    (near 100% prefill, queueing for prefill decides the TTFT, not the link)."""
    s = result["summary"]
    ttft = " / ".join(
        "-" if s["ttft"][k] is None else readable(s["ttft"][k], 0, fixed=True)
        for k in ("p50_ms", "p95_ms", "p99_ms")
    )
    mean = mean_exposed_ms(result)
    return tr(
        "TTFT P50/P95/P99 {ttft} ms · {outcomes} · mean exposed transfer {exposed} ms · "
        "link busy {link} · prefill busy {prefill}",
        ttft=ttft,
        outcomes=counted(s["outcomes"], OUTCOME_NAMES),
        exposed="-" if mean is None else readable(mean, 2, fixed=True),
        link=format(s["link_utilization"], ".0%"),
        prefill=format(s["prefill_utilization"], ".0%"),
    )


def decision_counts(label: str, result: dict) -> str:
    """One line: how often the gate decided each way in a run (``recompute decisions: 1050 ready,
    645 wait, ...``); the decisions are the codes handoff_step returns, a rejected request named."""
    counts = counted(
        result["summary"]["decisions"], {"rejected": OUTCOME_NAMES["rejected"]}, zeros=True
    )
    return tr("{name:>9} decisions: {counts}", name=run_name(label), code=label, counts=counts)


# outcome counts (ok / recomputed / failed / rejected), TTFT percentiles, exposed and transfer time
SUMMARY_COLUMNS = (
    N_("ok/rec/fail/rej"),
    N_("TTFT P50/P95/P99 ms"),
    N_("exposed/transfer ms"),
    N_("link"),
    N_("prefill"),
)


def _right(text: str, width: int) -> str:
    """``text`` right-aligned in ``width`` columns of monospaced output (a Chinese character takes
    two)."""
    return " " * max(0, width - display_width(text)) + text


def summary_table(results: dict[str, dict]) -> str:
    """One short line per labelled run, under a header, so that nothing wraps in a notebook: outcome
    counts, TTFT percentiles, the mean exposed and transfer time of the requests served from their
    transfer ('ok': a recomputed request's transfer was cut short), link and prefill utilization."""
    names = {label: run_name(label) for label in results}
    header = [tr(h) for h in SUMMARY_COLUMNS]
    width = max([display_width(name) for name in names.values()] + [display_width(tr("run"))])
    widths = [max(w, display_width(h)) for w, h in zip((15, 19, 19, 4, 7), header)]
    lines = [
        _right(tr("run"), width) + "  " + "  ".join(_right(h, w) for h, w in zip(header, widths))
    ]
    for label, result in results.items():
        s = result["summary"]
        counts = "/".join(str(s["outcomes"][k]) for k in ("ok", "recomputed", "failed", "rejected"))
        ttft = "/".join(
            "-" if s["ttft"][k] is None else f"{s['ttft'][k]:.0f}"
            for k in ("p50_ms", "p95_ms", "p99_ms")
        )
        served = served_from_transfer(result)
        exposed = "-"
        if served:
            mean_exposed = sum(r["exposed_ms"] for r in served) / len(served)
            mean_transfer = sum(r["transfer_ms"] for r in served) / len(served)
            exposed = f"{mean_exposed:.2f}/{mean_transfer:.2f}"
        cells = (
            counts,
            ttft,
            exposed,
            f"{s['link_utilization']:.0%}",
            f"{s['prefill_utilization']:.0%}",
        )
        lines.append(
            _right(names[label], width)
            + "  "
            + "  ".join(f"{c:>{w}}" for c, w in zip(cells, widths))
        )
    lines.append(
        tr(
            "(ok/rec/fail/rej: requests per outcome, ok / recomputed / failed / rejected;\n"
            " exposed/transfer: means over the 'ok' requests; link, prefill: how busy each was)"
        )
    )
    return "\n".join(lines)


def draw_ttft_cdf(ax, results: dict[str, dict], title: str = "") -> None:
    """TTFT CDFs, one line per labelled result, as a fraction of *all* requests: a request that
    never produced a token never arrives, so a policy that fails requests tops out below 1."""
    colors = [PALETTE[c] for c in ("blue", "orange", "green", "purple")]
    handles = []
    for (label, result), color in zip(results.items(), colors):
        records = result["records"]
        values = sorted(r["ttft_ms"] for r in records if r["ttft_ms"] is not None)
        if not values:
            continue
        n = len(records)
        ax.step(
            values,
            [(i + 1) / n for i in range(len(values))],
            where="post",
            color=color,
            linewidth=1.8,
        )
        p99 = result["summary"]["ttft"]["p99_ms"]
        ax.axvline(p99, color=color, linestyle="--", linewidth=1)
        handles.append(
            Line2D(
                [],
                [],
                color=color,
                linewidth=1.8,
                label=tr(
                    "{label}: P99 {p99} ms, {share} served",
                    label=run_name(label),
                    p99=readable(p99, 0, fixed=True),
                    share=format(len(values) / n, ".0%"),
                ),
            )
        )
    handles.append(
        Line2D(
            [], [], color="black", linestyle="--", linewidth=1, label=tr("dashed: that run's P99")
        )
    )
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(tr("time to first token (ms)"))
    ax.set_ylabel(tr("fraction of requests"))
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    if title:
        ax.set_title(title)


def request_bars(records: list[dict], first: int, count: int) -> tuple[list[dict], list[str]]:
    """Lane bars for requests ``first`` .. ``first + count - 1``: prefill, waiting for blocks or
    the link, the hidden and the exposed part of the transfer, decode start to first token."""
    bars, lanes = [], []
    for r in records[first : first + count]:
        outcome = OUTCOME_NAMES.get(r["outcome"], r["outcome"])
        lane = tr(
            "r{id} · {tokens}k · {outcome}",
            id=r["id"],
            tokens=format(r["prompt_tokens"] / 1000, ".1f"),
            outcome=tr(outcome),
        )
        lanes.append(lane)
        pf_start, pf_end = r["prefill_start_ms"], r["prefill_end_ms"]
        bars.append({"lane": lane, "start": pf_start, "end": pf_end, "role": "compute"})
        ready = r["handoff_ready_ms"]
        if r["transfer_start_ms"] is not None:
            start, end = r["transfer_start_ms"], r["transfer_end_ms"]
            if start - ready > 0.5:  # waited for decode blocks or the link
                bars.append({"lane": lane, "start": ready, "end": start, "role": "wait"})
            if min(end, pf_end) > start:
                bars.append(
                    {"lane": lane, "start": start, "end": min(end, pf_end), "role": "hidden"}
                )
            if end > max(start, pf_end):
                bars.append(
                    {"lane": lane, "start": max(start, pf_end), "end": end, "role": "exposed"}
                )
        if r["first_token_ms"] is not None:
            bars.append(
                {
                    "lane": lane,
                    "start": r["decode_start_ms"],
                    "end": r["first_token_ms"],
                    "color": FIRST_TOKEN_COLOR,
                }
            )
    return bars, lanes


def draw_request_lanes(ax, result: dict, first: int = 0, count: int = 12, title: str = "") -> None:
    """Per-request lanes for a window of consecutive requests (the x axis starts at the first
    arrival)."""
    records = result["records"]
    if not 0 <= first < len(records):
        raise ValueError(
            tr("first must lie in [0, {last}], got {first}", last=len(records) - 1, first=first)
        )
    bars, lanes = request_bars(records, first, count)
    origin = min(b["start"] for b in bars)
    shifted = [{**b, "start": b["start"] - origin, "end": b["end"] - origin} for b in bars]
    extra = [
        Patch(
            facecolor=FIRST_TOKEN_COLOR,
            edgecolor="black",
            linewidth=0.6,
            label=tr("decode start to first token"),
        )
    ]
    xlabel = tr("time (ms) from {origin} ms", origin=readable(origin, 0, fixed=True))
    draw_lanes(ax, shifted, lanes, title=title, xlabel=xlabel, legend=True, extra_handles=extra)


def draw_exposed_histogram(ax, results: dict[str, dict], title: str = "") -> None:
    """Histograms of the exposed transfer time per request, on a log axis, one per labelled result,
    of the requests served from their transfer: the same requests, and so the same mean, as the
    summary table's. A request that exposed nothing counts in the mean but has no place on a log
    axis: the legend says how many were left off."""
    colors = [PALETTE[c] for c in ("blue", "orange", "green", "purple")]
    served = {
        label: [r["exposed_ms"] for r in served_from_transfer(res)]
        for label, res in results.items()
    }
    series = {label: [v for v in vs if v > 1e-6] for label, vs in served.items()}
    values = [v for vs in series.values() for v in vs]
    if not values:
        ax.text(
            0.5,
            0.5,
            tr("no request exposed any transfer time"),
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        return
    low, high = math.log10(min(values)), math.log10(max(values))
    if high - low < 0.5:
        low, high = low - 0.25, high + 0.25
    bins = [10 ** (low + (high - low) * i / 40) for i in range(41)]
    for (label, vs), color in zip(series.items(), colors):
        if vs:
            everyone = served[label]
            mean = readable(sum(everyone) / len(everyone), 2, fixed=True)
            label = tr(
                "{label}: mean {mean} ms over {count} requests",
                label=run_name(label),
                mean=mean,
                count=len(everyone),
            )
            if len(everyone) > len(vs):
                label += " " + tr("({zero} at 0 ms, not drawn)", zero=len(everyone) - len(vs))
            ax.hist(
                vs, bins=bins, color=color, alpha=0.6, edgecolor="black", linewidth=0.4, label=label
            )
    ax.set_xscale("log")
    # plain numbers at 1, 2 and 5 of each decade, and no minor labels: with less than a decade of
    # data matplotlib labels the minor ticks too ("2x10^0 3x10^0 ..."), and they overlap
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(tr("exposed transfer time per request (ms, log scale)"))
    ax.set_ylabel(tr("requests"))
    add_legend(ax, ax.get_legend_handles_labels()[0])
    if title:
        ax.set_title(title)


def _draw_panel(result: dict, title: str) -> None:
    from IPython.display import display

    fig, (left, right) = new_figure(cols=2, height=3.6)
    draw_ttft_cdf(left, {N_("this setting"): result}, title="TTFT")
    draw_exposed_histogram(right, {N_("this setting"): result}, title=tr("exposed transfer"))
    right.get_legend().remove()
    fig.suptitle(title, fontsize=11)
    display(fig)  # explicit, so it shows inside an Output widget whatever the backend
    plt.close(fig)


def _title(values: dict) -> str:
    faults = (
        tr("every fault at {rate}", rate=format(values["fault_rate"], ".0%"))
        if values["fault_rate"]
        else tr("no faults")
    )
    rate = readable(values["rate_per_s"], 3)
    return tr(
        "{model}, {link}, {streaming}, {rate} req/s, {faults}",
        model=values["model"],
        link=values["link"],
        streaming=run_name(values["streaming"]),
        rate=rate,
        faults=faults,
    )


def simulator_panel(steps: dict, mode: str | None = None):
    """The live panel: rate, link, model, streaming and fault rate rerun a small simulation on
    ``steps`` (the learner's stream_layers, handoff_step and ttft_percentiles). Where no widget
    frontend renders (``mode='static'``, nbclient, nbgrader), one static figure for the defaults.
    Returns the widget, or None."""
    return show_live_or_static(
        mode,
        lambda: run_setting(steps, **PANEL_DEFAULTS),
        unfinished=N_(
            "Finish TODO 6-8 above (and TODO 3 and 4 in notebooks 03 and 04): the panel "
            "runs on your functions."
        ),
        failed=N_(
            "The simulation on your functions raised {error}. Fix it, then run this cell again."
        ),
        static=N_(
            "Static view (the controls need a live notebook: JupyterLab, Notebook 7, VS "
            "Code or Colab): {readout}"
        ),
        describe=summary_text,
        draw_static=lambda first: _draw_panel(first, _title(PANEL_DEFAULTS)),
        build_live=lambda first: _build_widgets(steps, first),
    )


def _build_widgets(steps: dict, first: dict):
    import ipywidgets as w

    style = {"description_width": "130px"}
    layout = w.Layout(width="520px")
    rate = w.FloatSlider(
        value=PANEL_DEFAULTS["rate_per_s"],
        min=1,
        max=40,
        step=1,
        description=tr("arrivals (req/s)"),
        style=style,
        layout=layout,
        continuous_update=False,
    )
    link = w.Dropdown(
        options=list(presets.LINK_PRESETS),
        value=PANEL_DEFAULTS["link"],
        description=tr("link"),
        style=style,
    )
    model = w.Dropdown(
        options=list(presets.MODEL_PRESETS),
        value=PANEL_DEFAULTS["model"],
        description=tr("model"),
        style=style,
    )
    streaming = w.ToggleButtons(
        options=[(run_name(code), code) for code in ("whole", "layerwise")],
        value=PANEL_DEFAULTS["streaming"],
        description=tr("KV sent"),
    )
    fault = w.FloatSlider(
        value=PANEL_DEFAULTS["fault_rate"],
        min=0,
        max=0.2,
        step=0.01,
        description=tr("each fault's rate"),
        readout_format=".0%",
        style=style,
        layout=layout,
        continuous_update=False,
    )
    readout = w.HTML()
    readout.add_class("sim-readout")
    out = w.Output()

    def values() -> dict:
        return {
            "rate_per_s": rate.value,
            "link": link.value,
            "model": model.value,
            "streaming": streaming.value,
            "fault_rate": fault.value,
        }

    def show(result):
        readout.value = "<b>" + summary_text(result) + "</b>"
        with out:
            out.clear_output(wait=True)
            _draw_panel(result, _title(values()))

    def rerun(*_):
        try:
            result = run_setting(steps, **values())
        except Exception as exc:
            readout.value = tr("<b>error</b> from your functions: {error}", error=error_text(exc))
            return
        show(result)

    for control in (rate, link, model, streaming, fault):
        control.observe(rerun, names="value")
    show(first)

    return widget_box(
        w, tr("Simulator panel"), [rate, link, model, streaming, fault, readout, out], readout
    )


def controls_of(panel) -> dict:
    """The panel's controls by description: for tests and for scripting it."""
    return {
        child.description: child for child in panel.children if getattr(child, "description", "")
    }
