"""The learner runtime in the Chinese edition: what it translates, where it falls back to English,
and the font it ships."""

from __future__ import annotations

import warnings

import pytest

from tools import i18n


@pytest.fixture
def zh():
    i18n.set_language("zh")
    yield
    i18n.set_language(None)


def test_english_is_the_default_and_unchanged(monkeypatch):
    monkeypatch.delenv(i18n.ENV, raising=False)
    i18n.set_language(None)
    assert i18n.language() == "en"
    assert i18n.tr("an assertion failed without a message") == (
        "an assertion failed without a message"
    )
    assert i18n.localize("two readers of 's' do not conflict") == (
        "two readers of 's' do not conflict"
    )


def test_the_edition_comes_from_the_notebook_metadata_and_the_environment_overrides_it(
    monkeypatch, tmp_path
):
    import json

    notebook = tmp_path / "04_decode_start_gate.ipynb"
    notebook.write_text(
        json.dumps(
            {
                "cells": [],
                "metadata": {"course": {"language": "zh"}},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )
    monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))
    monkeypatch.delenv(i18n.ENV, raising=False)
    i18n.set_language(None)
    assert i18n.language() == "zh"
    monkeypatch.setenv(i18n.ENV, "en")
    assert i18n.language() == "en"
    monkeypatch.setenv(i18n.ENV, "zh_CN")
    assert i18n.language() == "zh"
    assert i18n.notebook_language({"metadata": {"course": {"language": "fr"}}}) is None
    assert i18n.notebook_language({"metadata": {}}) is None
    with pytest.raises(ValueError, match="one of en, zh"):
        i18n.set_language("fr")


def test_messages_with_values_are_translated_with_their_values_kept(zh):
    rendered = i18n.localize(
        "different engines, no link, no shared state: expected can_overlap, got False"
    )
    assert "False" in rendered and "can_overlap" in rendered
    assert any("\u4e00" <= ch <= "\u9fff" for ch in rendered), rendered
    summary = i18n.tr(
        "{title}: public checks {passed}/{total} passed; hidden tests run at grading",
        title="TODO 1 · x",
        passed=3,
        total=4,
    )
    assert "TODO 1 · x" in summary and "3/4" in summary and "public checks" not in summary


def test_public_checks_print_in_the_learners_language(zh, capsys, monkeypatch):
    from tools.checks import PublicChecks

    monkeypatch.setenv("COURSE_CHECKS_STOP", "0")
    checks = PublicChecks("TODO 0 · check_overlap")

    @checks.case
    def readers():
        """two readers of 's' do not conflict"""
        raise AssertionError("two readers of 's' do not conflict")

    @checks.case
    def unfinished():
        """the writer may be the second item"""
        raise NotImplementedError

    with pytest.raises(AssertionError):
        checks.run()
    printed = capsys.readouterr().out
    assert "public checks" not in printed and "1/2" not in printed and "0/2" in printed
    assert "raise NotImplementedError()" in printed  # code stays code


def test_a_broken_or_missing_catalog_falls_back_to_english_and_never_raises(
    zh, monkeypatch, tmp_path
):
    broken = tmp_path / "runtime.po"
    broken.write_text('msgid "x\nmsgstr ', encoding="utf-8")
    monkeypatch.setattr(i18n, "runtime_catalog_path", lambda language, tools_dir=None: broken)
    i18n._catalog.cache_clear()
    try:
        assert i18n.localize("two readers of 's' do not conflict") == (
            "two readers of 's' do not conflict"
        )
        assert i18n.tr("{title}: x", title="T") == "T: x"
        monkeypatch.setattr(
            i18n, "runtime_catalog_path", lambda language, tools_dir=None: tmp_path / "absent.po"
        )
        i18n._catalog.cache_clear()
        assert i18n.tr("an assertion failed without a message") == (
            "an assertion failed without a message"
        )
    finally:
        i18n._catalog.cache_clear()


def test_a_translation_that_lost_a_field_falls_back_to_english(zh, monkeypatch):
    exact, _ = i18n._catalog("zh")
    monkeypatch.setitem(exact, "{title}: x", "{titel}：x")
    assert i18n.tr("{title}: x", title="T") == "T: x"


def test_figure_text_is_made_in_chinese_and_every_glyph_is_in_the_shipped_font(zh):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import font_manager

    # only matplotlib's own fonts and the course's: as on a fresh Colab kernel, whatever this
    # machine has
    font_manager.fontManager.ttflist = [
        f for f in font_manager.fontManager.ttflist if "matplotlib" in f.fname
    ]
    assert i18n.install() == "zh"
    fig, ax = plt.subplots()
    ax.set_title(i18n.tr("Model against measurement"))
    ax.set_xlabel(i18n.tr("copy size (log scale)"))
    ax.set_ylabel(i18n.tr("copy time (ms)"))
    ax.plot([0, 1], [0, 1], label=i18n.tr("measured = predicted"))
    ax.legend()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" would fail here
        fig.canvas.draw()
        fig.savefig(__import__("io").BytesIO(), format="png")
    assert ax.get_title() == "模型与实测对比" and ax.get_ylabel() == "拷贝时间（ms）"
    plt.close(fig)


def test_the_runtime_translates_nothing_after_the_fact(zh):
    """One mechanism: text is translated where it is made (tr). install() replaces no print and
    patches no matplotlib method, so English set on a figure or printed stays English (the
    control: the same words through tr are Chinese)."""
    import builtins

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backend_bases import FigureCanvasBase
    from matplotlib.text import Text

    before = (builtins.print, FigureCanvasBase.print_figure, Text.set_text, Text.draw)
    i18n.install()
    assert (builtins.print, FigureCanvasBase.print_figure, Text.set_text, Text.draw) == before
    fig, ax = plt.subplots()
    ax.set_title("Model against measurement")
    fig.savefig(__import__("io").BytesIO(), format="png")
    assert ax.get_title() == "Model against measurement"
    assert i18n.tr("Model against measurement") == "模型与实测对比"
    plt.close(fig)
    assert (
        not hasattr(i18n, "localize_lines")
        and not hasattr(i18n, "localize_figure")
        and not hasattr(i18n, "localize_label")
    )


def test_a_padded_value_is_padded_by_the_columns_it_takes(zh):
    """A template's {name:>9} pads a Chinese value by its display width, so a table's columns stay
    aligned; English is padded as str.format pads it."""
    assert (
        i18n.tr("{name:>9}|", name="整体") == "     整体|"
        and i18n.display_width("     整体|") == 10
    )
    assert i18n.tr("{name:<6}|{n:5.1f}", name="ab", n=2.25) == "ab    |  2.2"
    i18n.set_language("en")
    assert i18n.tr("{name:>9}|", name="whole") == f"{'whole':>9}|"


def test_a_message_is_recorded_in_english_and_shown_in_the_learners_language(zh):
    reason = i18n.joined(
        [
            i18n.Message("ratio {ratio} > {bar}", ratio="0.90", bar="0.75"),
            i18n.Message("overlap not confirmed"),
        ],
        i18n.COMMA,
    )
    assert reason.english() == "ratio 0.90 > 0.75, overlap not confirmed"
    assert str(reason) == "延迟比 0.90 > 0.75，重叠未确认" and f"{reason}" == str(reason)
    names = i18n.joined(["todo1_solution", "todo2_solution"], i18n.LIST)
    assert str(names) == "todo1_solution、todo2_solution" and names.english() == (
        "todo1_solution, todo2_solution"
    )
    assert i18n.joined([], i18n.COMMA) == "" and i18n.joined(["x"], i18n.COMMA) == "x"


def test_the_font_draws_every_character_of_the_runtime_catalog_and_carries_its_licence():
    from fontTools.ttLib import TTFont

    from autograde.publish import fonts

    exact, _ = i18n._catalog.__wrapped__("zh")
    assert len(exact) > 200
    assert fonts.missing_glyphs(exact.values()) == []
    names = TTFont(i18n.FONT_FILE, lazy=True)["name"]
    # renamed, as the OFL asks
    assert names.getDebugName(1) == i18n.FONT_FAMILY and "Noto" not in names.getDebugName(1)
    licence = i18n.FONT_FILE.with_name("OFL.txt").read_text(encoding="utf-8")
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence and "Reserved Font Name" in licence
    assert i18n.FONT_FILE.stat().st_size < 400 * 1024


@pytest.mark.timeout(20)
def test_template_matching_is_linear_and_exact():
    """A template's values are found left to right without a regular expression's backtracking: a
    long line holding every literal piece of a many-field template in the wrong order is matched
    (and left alone) at once, where a regex with many lazy groups would not finish. Named fields (a
    Message's template) are matched as positional ones are; a padded field cannot be read back."""
    layout = i18n._template_layout("{0} ms, deadline {1} ms: got {2}")
    assert layout == (0, " ms, deadline ", 1, " ms: got ", 2)
    assert i18n._match(layout, "8 ms, deadline 10 ms: got 'wait'") == {0: "8", 1: "10", 2: "'wait'"}
    assert i18n._match(layout, "8 ms, deadline 10 ms: got") is None
    # a value stays on its line
    assert i18n._match(layout, "8 ms, deadline 10 ms: got 'a'\nsecond line") is None
    assert i18n._template_layout("{0}{1} ms") is None and i18n._template_layout("{0}") is None
    assert i18n._template_layout("{name:>9} decisions") is None
    named = i18n._template_layout("decide_overlap raised {error}. The measurement is kept")
    assert i18n._match(named, "decide_overlap raised KeyError: 'x'. The measurement is kept") == {
        "error": "KeyError: 'x'"
    }
    many = i18n._template_layout(" / ".join(f"{{{i}}}" for i in range(11)) + "  the end")
    text = ("  the end x " + "a / " * 20) * 12
    assert i18n._match(many, text) is None  # returns: the test's timeout would catch a hang


def test_the_scaffolds_errors_reach_the_learner_in_chinese(zh):
    """The exercise scaffolds raise their ValueError's message through localize: the Chinese edition
    shows it from the runtime catalog, the values kept (the English edition unchanged)."""
    item = {"name": "x"}
    assert i18n.localize(f"a work item needs a 'name' and an 'engine', got {item!r}") == (
        "工作项必须有 'name' 和 'engine'，实际为 {'name': 'x'}"
    )
    assert (
        i18n.localize(f"the transfer ends before it starts: {(3.0, 1.0)}")
        == "传输的结束时间早于开始时间：(3.0, 1.0)"
    )
    assert i18n.localize("no measured cases: run the experiment (real_cpu or real_gpu) first") == (
        "没有实测用例：请先运行实验（real_cpu 或 real_gpu）"
    )
    namespace: dict = {}
    from pathlib import Path

    import nbformat

    root = Path(__file__).resolve().parents[2]
    cell = next(
        c
        for c in nbformat.read(root / "notebooks" / "zh" / "01_what_can_overlap.ipynb", 4).cells
        if c.id == "01-08"
    )
    exec(cell.source, namespace)
    with pytest.raises(ValueError, match="不能拿 'a' 与它自身比较"):
        namespace["check_overlap"]({"name": "a", "engine": "sm"}, {"name": "a", "engine": "sm"})


DRAWING_CALLS = {
    "set_title",
    "set_xlabel",
    "set_ylabel",
    "suptitle",
    "annotate",
    "text",
    "print",
    "set_text",
}
TEXT_KEYWORDS = {"title", "label", "xlabel", "description", "tooltip"}


def _english_literals(source: str) -> list[str]:
    """The string literals with words (f-strings too) that ``source`` prints or draws without the
    catalog: a printing or drawing call's argument, or a text keyword's value, not inside tr/N_."""
    import ast
    import re

    tree = ast.parse(re.sub(r"^\s*[%!].*$", "", source, flags=re.M))
    through = {
        id(n)
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        and getattr(call.func, "id", "") in ("tr", "say", "N_", "Message", "localize")
        for n in ast.walk(call)
    }

    def words(node) -> str | None:
        pieces = (
            [node.value]
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            else [v.value for v in getattr(node, "values", []) if isinstance(v, ast.Constant)]
            if isinstance(node, ast.JoinedStr)
            else []
        )
        text = "".join(pieces)
        # an acronym (TTFT) is no word
        return text if re.search(r"[a-z]{2,}", text) and id(node) not in through else None

    found = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        name = (
            call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        )
        candidates = list(call.args) if name in DRAWING_CALLS else []
        candidates += [k.value for k in call.keywords if k.arg in TEXT_KEYWORDS]
        found += [f"line {node.lineno}: {text!r}" for node in candidates if (text := words(node))]
    return found


def test_the_runtime_and_the_notebooks_print_and_draw_only_through_the_catalog():
    """No text is printed or drawn that the catalog was not asked for where it was made: every
    printing or drawing call of the runtime and of the notebooks' own code cells takes its words
    from tr (or a label marked N_); a public check's cell (graded, judged in English) is the
    exception, its messages matched by localize. The control: the finder finds such a call."""
    from pathlib import Path

    import nbformat

    root = Path(__file__).resolve().parents[2]
    assert _english_literals(
        "ax.set_title('Serial vs overlapped')\nprint(f'wrote {p}')\nsay('x', label=tr('ok'))"
    ) == [
        "line 1: 'Serial vs overlapped'",
        "line 2: 'wrote '",
    ]
    found = []
    for path in sorted((root / "tools").rglob("*.py")):
        if path.name != "i18n.py":
            found += [
                f"{path.relative_to(root)} {where}"
                for where in _english_literals(path.read_text(encoding="utf-8"))
            ]
    for path in sorted((root / "solutions").glob("*.ipynb")):
        for cell in nbformat.read(path, 4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if (
                cell.cell_type == "code"
                and not meta.get("grade")
                and not meta.get("solution")
                and "imports" not in cell.metadata.get("tags", [])
            ):
                found += [
                    f"{path.name}:{cell.id} {where}" for where in _english_literals(cell.source)
                ]
    assert found == []
