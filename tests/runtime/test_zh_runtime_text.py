"""The runtime's text in the Chinese edition, piece by piece: tick labels that the axis sets again
at draw time stay translated, values put into translated templates are translated too, printed
tables keep their columns, widget options show Chinese while keeping their values, and bold Chinese
is drawn in the shipped bold weight."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest

from tools import i18n

from figure_text import _drawn_texts


@pytest.fixture
def zh():
    i18n.set_language("zh")
    i18n.install()
    yield
    i18n.set_language(None)


def _drawn(fig) -> list[str]:
    return [text.get_text() for text, _ in _drawn_texts(fig)]


def test_tick_labels_the_axis_sets_at_draw_time_are_drawn_translated(zh):
    """draw_lanes sets its lanes with set_yticks(..., labels): the axis re-applies those labels on
    every draw, after any earlier pass over the figure's text; they are drawn in Chinese."""
    from tools.plotting import draw_lanes, draw_transfer_timeline, new_figure
    from tools.timeline import ENGINE_LANES

    fig, (top, bottom) = new_figure(rows=2)
    lanes = [ENGINE_LANES["sm"], ENGINE_LANES["copy_h2d"], ENGINE_LANES["nic"]]
    draw_lanes(top, [{"lane": lane, "start": 0, "end": 5, "role": "compute"} for lane in lanes], lanes)
    draw_transfer_timeline(bottom, 0.0, 10.0, [(0.0, 6.0)], 6.0, 4.0)
    i18n.localize_figure(fig)
    drawn = _drawn(fig)
    plt.close(fig)
    for english in ("GPU SMs", "copy engine H2D", "NIC / network", "transfer", "independent\ncompute"):
        assert english not in drawn, f"{english!r} is drawn in English: {drawn}"
    assert {"拷贝引擎 H2D", "传输"} <= set(drawn), drawn


def test_without_translating_as_set_the_axis_draws_its_tick_labels_in_english(zh, monkeypatch):
    """The control: with matplotlib's own set_text, translating the figure's text before the draw
    (what the figure's printing did) is undone by the axis, which sets its tick labels again."""
    from matplotlib.text import Text

    from tools.plotting import draw_lanes, new_figure
    from tools.timeline import ENGINE_LANES

    monkeypatch.setattr(Text, "set_text", Text.set_text.__wrapped__)
    fig, ax = new_figure()
    draw_lanes(ax, [{"lane": ENGINE_LANES["copy_h2d"], "start": 0, "end": 5, "role": "copy"}], [ENGINE_LANES["copy_h2d"]])
    i18n.localize_figure(fig)
    assert "copy engine H2D" in _drawn(fig)
    plt.close(fig)


def test_english_figures_are_left_as_they_are():
    from tools.plotting import draw_lanes, new_figure

    i18n.set_language("en")
    try:
        fig, ax = new_figure()
        draw_lanes(ax, [{"lane": "copy engine H2D", "start": 0, "end": 5, "role": "copy"}], ["copy engine H2D"])
        assert "copy engine H2D" in _drawn(fig)
        plt.close(fig)
    finally:
        i18n.set_language(None)


def test_values_put_into_a_translated_template_are_translated(zh):
    line = (
        "Nothing measured in this run; showing the reference measurement shipped with the course (x86_64, "
        "2026-11-30T16:06:00Z, load average 0.25 before the run, other programs on 0.04 cores during it, decision accept).\n"
    )
    shown = i18n.localize_lines(line)
    assert "随课程提供的参考测量" in shown and "运行前平均负载为 0.25" in shown and "0.04" in shown, shown
    assert "reference measurement" not in shown and "load average" not in shown and "accept" in shown, shown
    assert i18n.localize_label("real_cpu on cpu · reference measurement shipped with the course") != (
        "real_cpu on cpu · reference measurement shipped with the course"
    )


def test_a_printed_table_keeps_its_columns(zh):
    from tools.handoff.views import summary_table

    result = {
        "summary": {
            "outcomes": {"ok": 9, "recomputed": 1, "failed": 0, "rejected": 0},
            "ttft": {"p50_ms": 100.0, "p95_ms": 200.0, "p99_ms": 300.0},
            "link_utilization": 0.4,
            "prefill_utilization": 0.6,
        },
        "records": [{"outcome": "ok", "exposed_ms": 1.0, "transfer_ms": 2.0}],
    }
    lines = summary_table({"whole": result, "layerwise": result}).splitlines()[:3]
    assert "链路" in lines[0] and "link" not in lines[0], lines[0]
    assert len({i18n.display_width(line) for line in lines}) == 1, "\n".join(lines)
    header = " payload     window matmuls balance    copy  compute   serial  overlap  ratio covered copy x  correct/pre/overlap"
    shown = i18n.localize_lines(header)
    assert i18n.display_width(shown) == i18n.display_width(header) and "window" not in shown and "延迟比" in shown, shown
    assert i18n.localize_lines("     fail decisions: 3 ready, 1 wait") == "     fail 的决策：3 ready, 1 wait"


def test_the_explorer_shows_custom_in_chinese_and_keeps_its_value(zh):
    import ipywidgets as w

    from tools import explorer

    box = explorer._build_widgets(
        lambda payload, gbps, latency, ready, windows: {"transfer_ms": 1.0, "exposed_ms": 0.0, "start_ms": ready, "end_ms": ready + 1.0}
    )
    buttons = [child for child in box.children if isinstance(child, w.ToggleButtons)]
    model = next(b for b in buttons if b.value == "custom")
    assert "自定义" in model._options_labels and "custom" not in model._options_labels
    assert all("choose a model preset" not in (child.tooltip or "") for child in box.children if hasattr(child, "tooltip"))


def test_bold_chinese_is_drawn_in_the_shipped_bold_weight(zh):
    from fontTools.ttLib import TTFont
    from matplotlib.font_manager import FontProperties, findfont

    assert i18n.use_course_font()
    bold = findfont(FontProperties(family=i18n.FONT_FAMILY, weight="bold"), fallback_to_default=False)
    regular = findfont(FontProperties(family=i18n.FONT_FAMILY), fallback_to_default=False)
    assert (bold, regular) == (str(i18n.BOLD_FONT_FILE), str(i18n.FONT_FILE))
    fonts = [TTFont(path, lazy=True) for path in (i18n.FONT_FILE, i18n.BOLD_FONT_FILE)]
    assert [f["OS/2"].usWeightClass for f in fonts] == [400, 700]
    assert [f["name"].getDebugName(1) for f in fonts] == [i18n.FONT_FAMILY] * 2, "both renamed, as the OFL asks"
    assert set(fonts[0].getBestCmap()) == set(fonts[1].getBestCmap()), "both weights draw the same characters"
    assert "CourseSansCJK-Bold-Subset.otf" in i18n.FONT_FILE.with_name("OFL.txt").read_text(encoding="utf-8")
    assert i18n.BOLD_FONT_FILE.stat().st_size < 400 * 1024


def test_a_bold_chinese_title_is_not_drawn_in_the_regular_weight(zh):
    """The glyph outlines of a bold title differ from the regular ones: the bold file is used."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    images = []
    for weight in ("normal", "bold"):
        fig = plt.figure(figsize=(2, 0.6))
        FigureCanvasAgg(fig)
        fig.text(0.05, 0.3, "回放数据", fontsize=14, fontweight=weight)
        fig.canvas.draw()
        images.append(matplotlib.colors.rgb_to_hsv(np.asarray(fig.canvas.buffer_rgba())[..., :3] / 255.0)[..., 2].mean())
        plt.close(fig)
    regular_ink, bold_ink = 1 - images[0], 1 - images[1]
    assert bold_ink > 1.2 * regular_ink, f"bold ink {bold_ink:.4f} against regular {regular_ink:.4f}"
