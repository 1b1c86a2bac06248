"""The runtime's text in the Chinese edition, piece by piece: each text is made in the learner's
language where the runtime makes it (tr), so lane names and tick labels are drawn in Chinese with no
pass over the figure afterwards, values put into a sentence are in Chinese too, printed tables keep
their columns, widget options show Chinese while keeping their values, and bold Chinese is drawn
in the shipped bold weight."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from english import english_words

from tools import i18n

from figure_text import _drawn_texts

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def zh():
    i18n.set_language("zh")
    i18n.install()
    yield
    i18n.set_language(None)


def _drawn(fig) -> list[str]:
    return [text.get_text() for text, _ in _drawn_texts(fig)]


def test_lane_names_and_tick_labels_are_drawn_in_chinese(zh):
    """draw_lanes sets its lanes with set_yticks(..., labels), which the axis applies again on every
    draw: the labels are made in Chinese, so what is drawn is Chinese."""
    from tools.plotting import draw_lanes, draw_transfer_timeline, new_figure
    from tools.timeline import ENGINE_LANES

    fig, (top, bottom) = new_figure(rows=2)
    lanes = [ENGINE_LANES["sm"], ENGINE_LANES["copy_h2d"], ENGINE_LANES["nic"]]
    draw_lanes(
        top,
        [{"lane": lane, "start": 0, "end": 5, "role": "compute"} for lane in lanes],
        lanes,
        legend=True,
    )
    draw_transfer_timeline(bottom, 0.0, 10.0, [(0.0, 6.0)], 6.0, 4.0)
    drawn = _drawn(fig)
    plt.close(fig)
    for english in (
        "GPU SMs",
        "copy engine H2D",
        "NIC / network",
        "transfer",
        "independent\ncompute",
        "time (ms)",
    ):
        assert english not in drawn, f"{english!r} is drawn in English: {drawn}"
    assert {"拷贝引擎 H2D", "传输", "时间（ms）", "隐藏 6 ms"} <= set(drawn), drawn
    assert [t for t in drawn if english_words(t)] == [], drawn


def test_english_figures_are_left_as_they_are():
    from tools.plotting import draw_lanes, new_figure

    i18n.set_language("en")
    try:
        fig, ax = new_figure()
        draw_lanes(
            ax,
            [{"lane": "copy engine H2D", "start": 0, "end": 5, "role": "copy"}],
            ["copy engine H2D"],
        )
        assert "copy engine H2D" in _drawn(fig) and "time (ms)" in _drawn(fig)
        plt.close(fig)
    finally:
        i18n.set_language(None)


def _summary(outcomes=None):
    return {
        "summary": {
            "outcomes": outcomes or {"ok": 9, "recomputed": 1, "failed": 0, "rejected": 0},
            "decisions": {"ready": 5, "wait": 3, "fallback": 1, "recompute": 1, "rejected": 0},
            "ttft": {"p50_ms": 100.0, "p95_ms": 200.0, "p99_ms": 300.0},
            "link_utilization": 0.4,
            "prefill_utilization": 0.6,
        },
        "records": [{"outcome": "ok", "exposed_ms": 1.0, "transfer_ms": 2.0}],
    }


def test_a_printed_table_keeps_its_columns_and_names_its_runs_in_chinese(zh):
    from tools.handoff.views import summary_table

    lines = summary_table({"whole": _summary(), "layerwise": _summary()}).splitlines()
    assert (
        "链路" in lines[0]
        and "成功/重算/失败/拒绝" in lines[0]
        and lines[1].lstrip().startswith("整体发送")
    ), lines
    assert len({i18n.display_width(line) for line in lines[:3]}) == 1, "\n".join(lines)
    assert [line for line in lines if english_words(line)] == [], lines


def test_counts_and_decisions_are_said_in_chinese_with_their_codes_kept(zh):
    from tools.handoff.views import decision_counts, summary_text

    text = summary_text(_summary({"ok": 250, "recomputed": 150, "failed": 0, "rejected": 0}))
    assert (
        "成功 250 个，重算 150 个" in text
        and "TTFT P50/P95/P99" in text
        and not english_words(text)
    ), text
    assert (
        decision_counts("recompute", _summary()) == "重算策略（recompute）下的决策：ready 5 "
        "个，wait 3 个，fallback 1 个，recompute 1 "
        "个，被拒绝 0 个"
    )
    i18n.set_language("en")
    assert decision_counts("fail", _summary()) == (
        "     fail decisions: 5 ready, 3 wait, 1 fallback, 1 recompute, 0 rejected"
    )
    assert "250 ok, 150 recomputed" in summary_text(
        _summary({"ok": 250, "recomputed": 150, "failed": 0, "rejected": 0})
    )


def test_a_reason_is_recorded_in_english_and_shown_in_chinese(zh):
    """A busy real_cpu run's reason: the result file keeps the English; 5.3 shows it rebuilt in
    Chinese, each label, joiner and punctuation from the catalog (no 'calibrated', no ASCII ; or .
    after a Chinese character)."""
    import copy
    import json
    import re
    from pathlib import Path

    from tools.overlap import results

    root = Path(__file__).resolve().parents[2]
    reference = json.loads(
        (root / "benchmarks" / "reference" / "inf_serving_overlap_cpu_reference.json").read_text(
            encoding="utf-8"
        )
    )
    result = copy.deepcopy(reference)
    result["hardware"].update(load_average_1m=5.53, other_cpu_cores=1.59)
    for case in result["cases"]:
        if case["window"] == "calibrated":
            # both calibrated cases fire the spread condition
            case["serial_p95_ms"] = 1.6 * case["serial_median_ms"]
    results.finalize(result, lambda cases, controls: "rerun_on_quiet_machine")
    assert (
        "64 MiB calibrated: serial P95" in result["decision_reason"]
        and "Busy machine" in result["decision_reason"]
    )
    shown = results.explain(result)
    assert (
        "64 MiB 校准用例：串行 P95" in shown
        and ("机器负载高：运行期间其他程序平均占用约 1.59 个 CPU（共 2 个；运行前平均负载 5.53）")
        in shown
    ), shown
    assert english_words(shown) == [], shown
    assert not re.search(r"[\u4e00-\u9fff）][;.]", shown), shown


def test_busy_machine_warnings_are_chinese(zh):
    from tools.overlap import sweep

    (warning,) = sweep.load_warnings(None, 2, other_cores=1.0)
    assert str(warning).startswith(
        "机器负载高：运行期间其他程序平均占用约 1 个 CPU（共 2 个）。其他程序正在运行"
    ) and not english_words(str(warning))
    assert warning.english().startswith(
        "busy machine: other programs kept 1 of 2 CPUs busy during the run. Other programs"
    )
    assert sweep.machine_text("x86_64, 2 logical CPUs") == "x86_64（2 个逻辑 CPU）"


def test_the_explorer_shows_custom_in_chinese_and_keeps_its_value(zh):
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
    buttons = [child for child in box.children if isinstance(child, w.ToggleButtons)]
    model = next(b for b in buttons if b.value == "custom")
    assert "自定义" in model._options_labels and "custom" not in model._options_labels
    assert all(
        "choose a model preset" not in (child.tooltip or "")
        for child in box.children
        if hasattr(child, "tooltip")
    )


def test_bold_chinese_is_drawn_in_the_shipped_bold_weight(zh):
    from fontTools.ttLib import TTFont
    from matplotlib.font_manager import FontProperties, findfont

    assert i18n.use_course_font()
    bold = findfont(
        FontProperties(family=i18n.FONT_FAMILY, weight="bold"), fallback_to_default=False
    )
    regular = findfont(FontProperties(family=i18n.FONT_FAMILY), fallback_to_default=False)
    assert (bold, regular) == (str(i18n.BOLD_FONT_FILE), str(i18n.FONT_FILE))
    fonts = [TTFont(path, lazy=True) for path in (i18n.FONT_FILE, i18n.BOLD_FONT_FILE)]
    assert [f["OS/2"].usWeightClass for f in fonts] == [400, 700]
    assert [f["name"].getDebugName(1) for f in fonts] == [i18n.FONT_FAMILY] * 2, (
        "both renamed, as the OFL asks"
    )
    assert set(fonts[0].getBestCmap()) == set(fonts[1].getBestCmap()), (
        "both weights draw the same characters"
    )
    assert "CourseSansCJK-Bold-Subset.otf" in i18n.FONT_FILE.with_name("OFL.txt").read_text(
        encoding="utf-8"
    )
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
        images.append(
            matplotlib.colors.rgb_to_hsv(np.asarray(fig.canvas.buffer_rgba())[..., :3] / 255.0)[
                ..., 2
            ].mean()
        )
        plt.close(fig)
    regular_ink, bold_ink = 1 - images[0], 1 - images[1]
    assert bold_ink > 1.2 * regular_ink, (
        f"bold ink {bold_ink:.4f} against regular {regular_ink:.4f}"
    )


def test_the_messages_about_an_earlier_notebook_and_the_check_before_submitting_are_chinese(
    zh, tmp_path, monkeypatch
):
    """The messages a Chinese learner meets when an earlier notebook is missing or broken, and the
    submit check's warnings: made in Chinese where they are raised (no English word, the file names
    and the command kept)."""
    import json

    from tools import notebook_runtime as nr

    monkeypatch.setattr(nr, "notebook_folders", lambda: [tmp_path])
    with pytest.raises(nr.LearnerFunctionMissing) as missing:
        nr.load_learner_functions("02_total_vs_exposed_time", ["estimate_handoff"], [tmp_path])
    said = str(missing.value)
    assert said.startswith(
        "在本 notebook 旁边找不到你的 notebook 02_total_vs_exposed_time.ipynb"
    ) and not english_words(said)
    cell = {
        "cell_type": "code",
        "source": "def f(:\n",
        "metadata": {"nbgrader": {"solution": True, "grade_id": "x"}},
    }
    (tmp_path / "02_total_vs_exposed_time.ipynb").write_text(
        json.dumps({"cells": [cell]}), encoding="utf-8"
    )
    with pytest.raises(nr.LearnerFunctionMissing) as broken:
        nr.load_learner_functions("02_total_vs_exposed_time", ["estimate_handoff"], [tmp_path])
    assert str(broken.value) == "02_total_vs_exposed_time.ipynb 第 1 行有语法错误：请先修正。"
    (tmp_path / "Copy of 02_total_vs_exposed_time.ipynb").write_text("{}", encoding="utf-8")
    monkeypatch.setattr(nr, "running_notebook_name", lambda: None)
    (warning,) = nr._checked_file_warnings(
        "02_total_vs_exposed_time", tmp_path / "02_total_vs_exposed_time.ipynb"
    )
    assert (
        "中有 2 份这个 notebook 的副本" in warning
        and ('python -m tools.notebook_runtime "YOUR FILE.ipynb"') in warning
    )
    names_and_command = (
        "Copy of 02_total_vs_exposed_time.ipynb",
        'python -m tools.notebook_runtime "YOUR FILE.ipynb"',
    )
    assert (
        english_words(warning.replace(names_and_command[0], "").replace(names_and_command[1], ""))
        == []
    ), warning


def test_every_runtime_translation_reads_as_chinese_once_its_values_are_filled():
    """Each Chinese message of the runtime catalog, its placeholders filled with a number, has no
    English word a Chinese learner would read (the strict finder of the zh notebook runs, applied to
    the catalog itself: a new public check's translation that leaves `after` or `outcome` bare is
    caught here, before any notebook runs)."""
    import re

    from babel.messages.pofile import read_po

    with open(i18n.runtime_catalog_path("zh"), "rb") as handle:
        catalog = read_po(handle, locale="zh")
    placeholder = re.compile(r"\{[^{}]*\}")
    found = {}
    for message in catalog:
        if message.id and message.string and not message.fuzzy:
            text = message.string
            while placeholder.search(text):  # inner fields first: {problem:<{width}}
                text = placeholder.sub("7", text)
            words = english_words(text)
            if words:
                found[message.id[:80]] = words
    assert not found, found


def _column_ends(line: str) -> list[int]:
    """The display column where each space-separated field of a printed table row ends."""
    ends, column, inside = [], 0, False
    for ch in line + " ":
        if ch == " " and inside:
            ends.append(column)
        inside = ch != " "
        column += i18n.display_width(ch)
    return ends


def test_the_case_table_of_notebook_05_keeps_each_chinese_header_over_its_values(zh, capsys):
    """05's case table (the released Chinese cell's own show_cases): each header ends in the column
    where its values end, a four-character Chinese header included (矩阵乘次数 once pushed every
    header after it 3 columns right)."""
    import ast
    import json

    nb = json.loads(
        (ROOT / "notebooks" / "zh" / "05_cuda_stream_overlap.ipynb").read_text(encoding="utf-8")
    )
    source = next(
        "".join(c["source"]) for c in nb["cells"] if "def show_cases" in "".join(c["source"])
    )
    tree = ast.parse(source)
    namespace = {"tr": i18n.tr, "say": i18n.say, "display_width": i18n.display_width}
    exec(
        compile(
            ast.Module([n for n in tree.body if getattr(n, "name", "") == "show_cases"], []),
            "05",
            "exec",
        ),
        namespace,
    )
    case = {
        "payload_mib": 64,
        "window": "calibrated",
        "matmul_count": 12,
        "compute_copy_balance": 1.1,
        "copy_alone_ms": 9.5,
        "compute_alone_ms": 10.4,
        "serial_median_ms": 20.1,
        "overlap_median_ms": 12.3,
        "latency_ratio": 0.61,
        "copy_correct": True,
        "compute_correct": True,
        "preconditions_met": True,
        "overlap_confirmed": True,
        "overlap_evidence": {"covered_fraction_median": 0.8, "copy_slowdown": 1.2},
    }
    namespace["show_cases"]([case], [])
    head, _rule, row = capsys.readouterr().out.splitlines()[:3]
    assert "矩阵乘次数" in head, head
    assert _column_ends(head)[:11] == _column_ends(row)[:11], f"\n{head}\n{row}"
