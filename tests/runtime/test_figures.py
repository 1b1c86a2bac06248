"""Every figure of every notebook keeps its text readable: each title, label, tick label,
legend entry and annotation that is drawn lies inside its figure, and no text that is
clipped to its axes is cut by them.

The answered notebooks run in one in-process IPython shell (no kernel start-up), cell by
cell; every figure that a cell creates is rendered and checked when the cell ends,
including figures a cell closes itself (the explorer's static view).
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import matplotlib
import matplotlib.pyplot as plt
import pytest

from figure_text import text_problems  # noqa: E402  (the checker, shared with the report's tests)
from submissions import NOTEBOOKS

# ----------------------------------------------------------------- the checker can fail


def test_checker_catches_text_outside_the_figure():
    fig, ax = plt.subplots(figsize=(4, 3))  # no layout engine: a long rotated label falls off
    ax.set_ylabel(
        "a y label far too long\nfor this small figure to hold\nin three lines", fontsize=14
    )
    fig.subplots_adjust(left=0.02)
    ax.set_title("a title", x=-0.3)
    ax.annotate(
        "off the right edge",
        (1.0, 0.5),
        xycoords="axes fraction",
        xytext=(40, 0),
        textcoords="offset points",
    )
    problems = text_problems(fig)
    plt.close(fig)
    assert any("a y label far too long" in p and "left" in p for p in problems), problems
    assert any("'a title'" in p for p in problems), problems
    assert any("off the right edge" in p and "right" in p for p in problems), problems


def test_checker_catches_a_label_cut_by_its_axes():
    fig, ax = plt.subplots(figsize=(4, 2), layout="constrained")
    ax.set_xlim(0, 100)
    ax.text(0.5, 0.5, "a label centred on the left edge", ha="center", clip_on=True)
    problems = text_problems(fig)
    plt.close(fig)
    assert problems == [p for p in problems if "cut by its axes" in p] and "left" in problems[0], (
        problems
    )


def test_checker_catches_texts_drawn_over_each_other():
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    ax.set_xlim(0, 10)
    ax.text(5, 0.5, "first note")
    ax.text(5.3, 0.5, "second note")
    problems = text_problems(fig)
    plt.close(fig)
    assert len(problems) == 1 and "'first note'" in problems[0] and "overlap" in problems[0], (
        problems
    )


def test_checker_passes_a_tidy_figure():
    from tools.plotting import new_figure

    fig, ax = new_figure()
    ax.plot([0, 1], [0, 1], label="a line")
    ax.set(title="A tidy figure", xlabel="time (ms)", ylabel="bytes (MiB)")
    ax.legend()
    assert text_problems(fig) == []
    plt.close(fig)


def test_bar_labels_fit_or_move_beside_their_bar():
    from tools.plotting import BarLabel, draw_lanes, new_figure

    fig, ax = new_figure(height=2.4)
    draw_lanes(
        ax,
        [
            {"lane": "a", "start": 0, "end": 100, "label": "a wide bar", "role": "compute"},
            {"lane": "b", "start": 0, "end": 1, "label": "a narrow bar", "role": "compute"},
            {"lane": "c", "start": 99, "end": 100, "label": "narrow, at the end", "role": "copy"},
        ],
        ["a", "b", "c"],
    )
    assert text_problems(fig) == []
    labels = {t.get_text(): t for t in ax.texts if isinstance(t, BarLabel)}
    assert (
        labels["a wide bar"].inside_box is not None and labels["a wide bar"].get_color() == "white"
    )
    narrow = labels["a narrow bar"]
    assert (
        narrow.inside_box is None
        and narrow.get_color() == "black"
        and narrow.get_horizontalalignment() == "left"
    )
    assert labels["narrow, at the end"].get_horizontalalignment() == "right", (
        "no room after the bar: the label goes before it"
    )
    plt.close(fig)


def test_lane_legend_says_what_each_drawn_colour_means():
    from matplotlib.lines import Line2D

    from tools.plotting import ROLE, ROLE_LABEL, draw_lanes, new_figure

    fig, ax = new_figure(height=2.4)
    marker = Line2D([], [], marker="v", linestyle="none", label="where it fails")
    draw_lanes(
        ax,
        [
            {"lane": "a", "start": 0, "end": 5, "role": "network"},
            {"lane": "b", "start": 0, "end": 3, "role": "cpu", "hatch": True},
            {"lane": "b", "start": 3, "end": 4, "color": "black"},
        ],
        ["a", "b"],
        legend=True,
        extra_handles=[marker],
    )
    entries = [t.get_text() for t in ax.get_legend().get_texts()]
    assert entries == [
        ROLE_LABEL["cpu"],
        ROLE_LABEL["network"],
        "waited (a conflict)",
        "where it fails",
    ], (
        "roles drawn, each once in ROLE's order (a bar with its own colour has no role), "
        "then the hatch and the caller's markers"
    )
    colors = [
        matplotlib.colors.to_hex(h.get_facecolor()) for h in ax.get_legend().legend_handles[:2]
    ]
    assert colors == [ROLE["cpu"].lower(), ROLE["network"].lower()]
    assert text_problems(fig) == []
    plt.close(fig)
    fig, ax = new_figure(height=2.4)
    draw_lanes(ax, [{"lane": "a", "start": 0, "end": 5, "role": "network"}], ["a"])
    assert ax.get_legend() is None, "no legend unless asked for (or a bar is hatched)"
    with pytest.raises(ValueError, match="unknown role"):
        draw_lanes(ax, [{"lane": "a", "start": 0, "end": 5, "role": "gpu"}], ["a"], legend=True)
    plt.close(fig)


def test_decision_map_legends_only_the_actions_it_draws():
    from tools.plotting import decision_map, new_figure

    colors = {"ready": "#009E73", "wait": "#56B4E9", "fallback": "#E69F00"}
    fig, ax = new_figure()
    drawn = decision_map(
        ax,
        lambda ready, deadline: "wait" if ready <= deadline else "fallback",
        [0, 1, 2],
        [0, 1, 2],
        colors,
    )
    assert drawn == ["wait", "fallback"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["wait", "fallback"], (
        "'ready' is never drawn: not in the legend"
    )
    assert text_problems(fig) == []
    plt.close(fig)
    fig, ax = new_figure()
    assert decision_map(
        ax, lambda ready, deadline: "ready", [0, 1], [0, 1], colors, legend=False
    ) == ["ready"]
    assert ax.get_legend() is None
    with pytest.raises(ValueError, match="expected one of"):
        decision_map(ax, lambda ready, deadline: "recompute", [0, 1], [0, 1], colors)
    plt.close(fig)


# ----------------------------------------------------------------- every notebook figure


@contextmanager
def _figures_recorded():
    """Yield a list that collects every figure pyplot creates (closed ones too)."""
    created = []
    original = plt.figure

    def recording(*args, **kwargs):
        fig = original(*args, **kwargs)
        if fig not in created:
            created.append(fig)
        return fig

    with mock.patch.object(plt, "figure", recording):  # plt.subplots goes through plt.figure
        yield created


def notebook_figure_problems(path: Path) -> tuple[int, list[str]]:
    """Run ``path`` cell by cell in an in-process IPython shell; return (figures checked,
    problems)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.reset(new_session=True)
    checked, problems = 0, []
    cells = [
        c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"
    ]
    with _figures_recorded() as created:
        for number, cell in enumerate(cells, 1):
            created.clear()
            result = shell.run_cell("".join(cell["source"]), store_history=False)
            if not result.success:
                raise AssertionError(
                    f"{path.name}, code cell {number} failed: "
                    f"{result.error_before_exec or result.error_in_exec!r}"
                )
            figures = list(created) + [
                plt.figure(n) for n in plt.get_fignums() if plt.figure(n) not in created
            ]
            for fig in figures:
                checked += 1
                problems += [f"{path.name}, code cell {number}: {p}" for p in text_problems(fig)]
            plt.close("all")
    shell.reset(new_session=True)
    return checked, problems


@pytest.mark.slow
def test_no_notebook_figure_clips_its_text(root, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "agg")
    # the explorer's static figure is the one to check
    monkeypatch.setenv("COURSE_WIDGETS", "static")
    # notebook 04 reads the answered 02 and 03 from its own folder
    monkeypatch.chdir(root / "solutions")
    matplotlib.use("agg")
    total, problems = 0, []
    for name in NOTEBOOKS:
        checked, found = notebook_figure_problems(root / "solutions" / f"{name}.ipynb")
        assert checked, f"{name} drew no figure: the check would pass vacuously"
        total += checked
        problems += found
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_explorer_figures_keep_their_text(root, monkeypatch):
    """The live explorer's figure, at its default and at each preset (many thin layer segments)."""
    from tools import explorer, notebook_runtime

    funcs = notebook_runtime.load_learner_functions(
        "02_total_vs_exposed_time", ["estimate_handoff"], search=[root / "solutions"]
    )
    with _figures_recorded() as created:
        widget = explorer.handoff_explorer(funcs["estimate_handoff"], mode="live")
        controls = explorer.controls_of(widget)
        for model in explorer.MODEL_PRESETS:
            controls["model preset"].value = model
        for link in explorer.LINK_PRESETS:
            controls["link preset"].value = link
        controls["other requests' work (ms)"].value = 400
    assert len(created) >= 1 + len(explorer.MODEL_PRESETS) + len(explorer.LINK_PRESETS) - 1
    problems = [p for fig in created for p in text_problems(fig)]
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------- what the learner reads matches
# what is drawn

# Hue ranges (degrees) of the colour names the notebooks' prose uses for a figure's colours.
HUES = {"red": (-15, 15), "orange": (20, 45), "green": (90, 170), "blue": (190, 250)}


def _hue(color) -> float:
    """The colour's hue in degrees, in (-180, 180] (so reds sit around 0)."""
    import colorsys

    hue = colorsys.rgb_to_hsv(*matplotlib.colors.to_rgb(color))[0] * 360
    return hue - 360 if hue > 180 else hue


def test_the_transfer_figure_draws_the_colours_its_prose_names(root):
    """Notebook 02 says which colour is hidden and which exposed: the figure draws exactly those."""
    import re

    from tools.plotting import COLOUR_NAME, ROLE, draw_transfer_timeline, new_figure

    cells = json.loads(
        (root / "solutions" / "02_total_vs_exposed_time.ipynb").read_text(encoding="utf-8")
    )["cells"]
    prose = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    said = dict(
        (role, colour)
        for colour, role in re.findall(
            r"the (\w+) part(?: of the " r"transfer)? is (hidden|exposed)", prose
        )
    )
    assert set(said) == {"hidden", "exposed"}, (
        f"the prose names no colour for {sorted({'hidden', 'exposed'} - set(said))}"
    )
    for role, colour in said.items():
        assert colour == COLOUR_NAME[role], (
            f"the prose calls {role} {colour!r}, the figures' name for it is {COLOUR_NAME[role]!r}"
        )
        low, high = HUES[colour]
        assert low <= _hue(ROLE[role]) <= high, (
            f"{role} is drawn {ROLE[role]} (hue {_hue(ROLE[role]):.0f}°), not {colour}"
        )
    fig, ax = new_figure(height=2.8)
    draw_transfer_timeline(ax, 0.0, 10.0, [(0.0, 6.0)], 6.0, 4.0)
    legend = {
        t.get_text().split()[0]: matplotlib.colors.to_hex(h.get_facecolor())
        for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)
    }
    plt.close(fig)
    assert legend["exposed"] == matplotlib.colors.to_hex(ROLE["exposed"]), (
        "the figure draws the role's colour"
    )


def _text_width_px(text: str, size_px: float = 13.0) -> float:
    """About how wide ``text`` renders in a widget's font (DejaVu Sans is wider than most UI
    fonts)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath

    return (
        TextPath((0, 0), text, size=size_px, prop=FontProperties(family="DejaVu Sans"))
        .get_extents()
        .width
    )


def test_every_explorer_preset_button_shows_its_whole_label():
    """A toggle button is 148 px wide unless told otherwise: a longer label ends in '…'."""
    import ipywidgets as w

    from tools import explorer

    box = explorer._build_widgets(
        lambda payload, gbps, latency, ready, windows: {
            "transfer_ms": 1.0,
            "exposed_ms": 0.0,
            "start_ms": ready,
            "end_ms": ready + 1.0,
        }
    )
    groups = [child for child in box.children if isinstance(child, w.ToggleButtons)]
    assert {g.description for g in groups} == {"link preset", "model preset"}
    for group in groups:
        width = group.style.button_width or "148px"  # the frontend's default when none is set
        if width in ("auto", "max-content", "fit-content"):
            continue  # sized to its label
        assert width.endswith("px"), f"{group.description}: button width {width!r}"
        padding = 2 * 12  # the frontend's button padding
        # what the buttons show (an option may be a (label, value) pair)
        for label in group._options_labels:
            assert _text_width_px(label) + padding <= float(width[:-2]), (
                f"{group.description}: {label!r} needs about "
                f"{_text_width_px(label) + padding:.0f} px, the button is {width}"
            )


def _shown(slider, value: float) -> str:
    """What a log slider's readout shows once the frontend snaps ``value`` to the slider's steps."""
    import math

    steps = round((math.log(value, slider.base) - slider.min) / slider.step)
    return format(slider.base ** (slider.min + steps * slider.step), slider.readout_format)


def test_the_explorer_sliders_show_the_values_the_questions_use():
    """The reflection sets Llama-3-70B at 2,048 tokens: 640 MiB, as the question says; and every
    link preset reads as its own speed."""
    from tools import explorer

    box = explorer._build_widgets(
        lambda payload, gbps, latency, ready, windows: {
            "transfer_ms": 1.0,
            "exposed_ms": 0.0,
            "start_ms": ready,
            "end_ms": ready + 1.0,
        }
    )
    controls = explorer.controls_of(box)
    payload, gbps = controls["payload (MiB)"], controls["link (Gbit/s)"]
    kv_per_token, _ = explorer.MODEL_PRESETS["Llama-3-70B"]
    assert 2048 * kv_per_token / explorer.MiB == 640
    for mib in (
        640,
        1024,
        *(
            tokens * kv / explorer.MiB
            for tokens in (512, 2048, 8192, 131072)
            for kv, _ in explorer.MODEL_PRESETS.values()
        ),
    ):
        assert _shown(payload, mib) == format(mib, payload.readout_format), (
            f"{mib} MiB reads {_shown(payload, mib)}"
        )
    for speed in explorer.LINK_PRESETS.values():
        assert _shown(gbps, speed) == format(speed, gbps.readout_format), (
            f"{speed} Gbit/s reads {_shown(gbps, speed)}"
        )


def _covers(box, line, pad_px: float) -> bool:
    """Whether ``box`` (display pixels) covers any part of ``line`` as drawn (segments and
    markers)."""
    import numpy as np

    points = line.get_transform().transform(line.get_xydata())
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        t = np.linspace(0.0, 1.0, 200)[:, None]
        along = np.hstack([x0 + t * (x1 - x0), y0 + t * (y1 - y0)])
        if any(
            box.x0 - pad_px <= x <= box.x1 + pad_px and box.y0 - pad_px <= y <= box.y1 + pad_px
            for x, y in along
        ):
            return True
    return False


@pytest.mark.parametrize(
    "totals_ms, copy_ms, compute_ms",
    [
        # measured on a busy two-core machine: best at 16
        ([1.899, 1.624, 3.637, 1.610, 1.596, 1.636, 1.817], 0.570, 0.676),
        ([10.1, 8.3, 7.4, 7.0, 7.2, 7.9, 9.5], 4.0, 6.0),  # a quiet machine: best at 8
    ],
)
def test_the_pipeline_sweep_legend_covers_no_line(monkeypatch, totals_ms, copy_ms, compute_ms):
    """Notebook 05's sweep: the legend hides neither the best-chunk line nor any measured point."""
    from tools.overlap import plots as overlap_plots
    from tools.overlap import sweep as overlap_sweep

    monkeypatch.setattr(plt, "show", lambda: None)
    sweep = overlap_sweep.summarize_sweep([1, 2, 4, 8, 16, 32, 64], totals_ms, copy_ms, compute_ms)
    sweep.update(device="cpu", payload_mib=8, warnings=overlap_sweep.sweep_warnings(sweep))
    overlap_plots.plot_pipeline(sweep)
    fig = plt.gcf()
    ax = fig.axes[0]
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    best = [line for line in ax.lines if line.get_label().startswith("best measured")]
    assert best, "the best-chunk line is drawn"
    covered = [
        line.get_label()
        for line in ax.lines
        if _covers(legend, line, pad_px=line.get_markersize() / 2)
    ]
    assert not covered, f"the legend covers {covered}"
    assert text_problems(fig) == []
    fig.savefig(os.environ.get("SWEEP_PNG", os.devnull), format="png")
    plt.close(fig)


# ----------------------------------------------------------------- notebooks 05 and 06: verdicts,
# tails, readouts


def _reference_result() -> dict:
    import copy

    path = (
        Path(__file__).resolve().parents[2]
        / "benchmarks"
        / "reference"
        / "inf_serving_overlap_cpu_reference.json"
    )
    return copy.deepcopy(json.loads(path.read_text(encoding="utf-8")))


def test_the_evidence_chart_colours_the_verdict_not_the_kind_of_row(monkeypatch):
    """Green means confirmed, and only that: a case that is not confirmed is grey, a control that
    confirmed is red, and every control is hatched; the legend names only the verdicts drawn."""
    from tools.overlap import plots as overlap_plots
    from tools.plotting import ROLE

    result = _reference_result()
    calibrated = [c for c in result["cases"] if c["window"] == "calibrated"]
    calibrated[0]["overlap_evidence"]["confirmed"] = False
    result["controls"][0]["overlap_evidence"]["confirmed"] = True
    with _figures_recorded() as created:
        monkeypatch.setattr(plt, "show", lambda: None)
        overlap_plots.plot_controls(result)
    fig = created[-1]
    bars = [patch for patch in fig.axes[0].patches]
    colours = [matplotlib.colors.to_hex(bar.get_facecolor()) for bar in bars]
    role = {k: matplotlib.colors.to_hex(v) for k, v in ROLE.items()}
    assert colours[0] == role["wait"] and colours[1] == role["hidden"], (
        "not confirmed grey, confirmed green"
    )
    controls = bars[len(calibrated) :]
    assert colours[len(calibrated)] == role["exposed"], "a confirmed control is red"
    assert colours[len(calibrated) + 1] == role["wait"], (
        "a control that is not confirmed is grey, never green"
    )
    assert all(bar.get_hatch() == "//" for bar in controls) and not any(
        bar.get_hatch() for bar in bars[: len(calibrated)]
    )
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert legend == {
        "confirmed",
        "not confirmed",
        "control confirmed: instrument fault",
        "control, not confirmed (as it must be)",
    }
    assert not text_problems(fig)


def test_the_timeline_sketch_keeps_the_serial_scale(monkeypatch):
    from tools.overlap import plots as overlap_plots

    with _figures_recorded() as created:
        monkeypatch.setattr(plt, "show", lambda: None)
        overlap_plots.sketch_serial_vs_overlapped(copy_ms=10.0, compute_ms=6.0)
    fig = created[-1]
    assert [round(ax.get_xlim()[1], 2) for ax in fig.axes] == [16.64, 16.64]
    assert "16 ms" in fig.axes[0].get_title() and "10 ms" in fig.axes[1].get_title()
    assert not text_problems(fig)


@pytest.fixture(scope="module")
def course_steps():
    """The course's answers to TODO 3, 4 and 6-8 as the simulator's steps."""
    from autograde.judging.ideas import course_tests

    found = course_tests(
        sorted((Path(__file__).resolve().parents[2] / "solutions").glob("*.ipynb"))
    )
    namespace: dict = {}
    for sid, source in found.solutions.items():
        if sid in (
            "todo3_solution",
            "todo4_solution",
            "todo6_solution",
            "todo7_solution",
            "todo8_solution",
        ):
            exec(source, namespace)  # noqa: S102 - the course's own answers
    return {k: namespace[k] for k in ("stream_layers", "handoff_step", "ttft_percentiles")}


@pytest.mark.parametrize(
    "link,streaming",
    [("RoCE 200G", "whole"), ("Ethernet 25G", "layerwise"), ("NVLink 4", "layerwise")],
)
def test_the_panel_histogram_ticks_do_not_overlap(course_steps, link, streaming, monkeypatch):
    """70B over RoCE sent whole exposes 2-30 ms: less than two decades, where matplotlib used to
    label the minor ticks too and the labels ran into each other."""
    from tools.handoff import views as handoff_views

    result = handoff_views.run_setting(course_steps, 4.0, link, "Llama-3-70B", streaming, 0.0)
    with _figures_recorded() as created:
        monkeypatch.setattr("IPython.display.display", lambda *a, **k: None)
        handoff_views._draw_panel(
            result,
            handoff_views._title(
                dict(handoff_views.PANEL_DEFAULTS, link=link, streaming=streaming)
            ),
        )
    problems = [p for fig in created for p in text_problems(fig)]
    assert created and not problems, "\n".join(problems)


def test_the_panel_opens_where_the_link_decides(course_steps):
    """The panel's opening setting keeps prefill under half busy and the link at least as busy, and
    sending layerwise beats sending whole there by a clear margin: its suggestion shows its
    lesson."""
    from tools.handoff import views as handoff_views

    runs = {
        mode: handoff_views.run_setting(
            course_steps, **dict(handoff_views.PANEL_DEFAULTS, streaming=mode)
        )["summary"]
        for mode in ("whole", "layerwise")
    }
    whole, layerwise = runs["whole"], runs["layerwise"]
    assert (
        whole["prefill_utilization"] < 0.5 <= 1
        and whole["link_utilization"] >= whole["prefill_utilization"]
    )
    assert layerwise["ttft"]["p50_ms"] < 0.85 * whole["ttft"]["p50_ms"]
    readout = handoff_views.summary_text(
        handoff_views.run_setting(course_steps, **handoff_views.PANEL_DEFAULTS)
    )
    assert "prefill busy" in readout and "link busy" in readout


def test_the_summary_table_fits_a_notebook_line(course_steps):
    from tools.handoff import views as handoff_views

    runs = {
        label: handoff_views.run_setting(
            course_steps, 4.0, "Ethernet 25G", "Llama-3-70B", mode, 0.0
        )
        for label, mode in (("whole", "whole"), ("layerwise", "layerwise"))
    }
    lines = handoff_views.summary_table(runs).splitlines()
    assert len(lines) == 5 and max(map(len, lines)) <= 90, lines
    assert "prefill" in lines[0] and lines[1].split()[0] == "whole"


def test_a_dry_run_replays_the_recorded_curves_and_says_so(monkeypatch):
    """Notebook 05's dry run measures nothing: 5.5 and 5.6 show the shipped recordings, and both the
    printed line and the figure say they are replayed, when and where they were recorded."""
    from tools.overlap import plots as overlap_plots
    from tools.overlap import sweep as overlap_sweep

    for kind, plot in (
        ("pipeline_sweep", overlap_plots.plot_pipeline),
        ("bandwidth_curve", overlap_plots.plot_bandwidth),
    ):
        result = overlap_sweep.replay(kind)
        assert result and result["replayed_from"]["command"].startswith(
            "python benchmarks/record_cpu_curves.py"
        )
        note = overlap_sweep.replay_note(result)
        assert (
            note.startswith("Replayed, not measured")
            and result["replayed_from"]["created_at"][:10] in note
        )
        with _figures_recorded() as created:
            monkeypatch.setattr(plt, "show", lambda: None)
            plot(result)
        assert created[-1].get_suptitle().startswith("REPLAYED, not measured here")
        assert not text_problems(created[-1])
    with pytest.raises(ValueError, match="kind must be one of"):
        overlap_sweep.replay("sweep")


def test_binary_size_labels_copy_sizes():
    from tools.plotting import binary_size

    assert [binary_size(n) for n in (0, 512, 1024, 4096, 1536 * 1024, 16 * 2**20, 1.5 * 2**30)] == [
        "0 B",
        "512 B",
        "1 KiB",
        "4 KiB",
        "1.5 MiB",
        "16 MiB",
        "1.5 GiB",
    ]


def test_the_bandwidth_figure_ticks_the_sizes_it_measured(monkeypatch):
    """Notebook 05's bandwidth figure: x ticks at exactly the copy sizes measured, in binary units,
    no minor-tick labels; more than eight sizes get every other label."""
    from tools.overlap import plots as overlap_plots
    from tools.overlap import sweep as overlap_sweep

    curve = overlap_sweep.replay("bandwidth_curve")
    sizes = curve["series"]["memcpy"]["bytes"]
    long = dict(
        curve,
        series={
            "memcpy": dict(
                curve["series"]["memcpy"],
                bytes=[4096 * 4**i for i in range(10)],
                ms=[0.001 * 4**i for i in range(10)],
            )
        },
    )
    monkeypatch.setattr(plt, "show", lambda: None)
    for data, expected in ((curve, sizes), (long, [4096 * 4**i for i in range(0, 10, 2)])):
        with _figures_recorded() as created:
            overlap_plots.plot_bandwidth(data)
        fig = created[-1]
        fig.canvas.draw()
        for ax in fig.axes:
            assert list(ax.get_xticks()) == expected
            assert [t.get_text() for t in ax.get_xticklabels()][0] == "4 KiB"
            assert not [t for t in ax.get_xticklabels(minor=True) if t.get_text()]
        assert not text_problems(fig)
        plt.close(fig)
