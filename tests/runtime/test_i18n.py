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
    assert i18n.tr("an assertion failed without a message") == "an assertion failed without a message"
    assert i18n.localize("two readers of 's' do not conflict") == "two readers of 's' do not conflict"


def test_the_edition_comes_from_the_notebook_metadata_and_the_environment_overrides_it(monkeypatch, tmp_path):
    import json

    notebook = tmp_path / "04_decode_start_gate.ipynb"
    notebook.write_text(json.dumps({"cells": [], "metadata": {"course": {"language": "zh"}}, "nbformat": 4, "nbformat_minor": 5}))
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
    rendered = i18n.localize("different engines, no link, no shared state: expected can_overlap, got False")
    assert "False" in rendered and "can_overlap" in rendered
    assert any("\u4e00" <= ch <= "\u9fff" for ch in rendered), rendered
    summary = i18n.tr("{title}: public checks {passed}/{total} passed; hidden tests run at grading", title="TODO 1 · x", passed=3, total=4)
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


def test_a_broken_or_missing_catalog_falls_back_to_english_and_never_raises(zh, monkeypatch, tmp_path):
    broken = tmp_path / "runtime.po"
    broken.write_text('msgid "x\nmsgstr ', encoding="utf-8")
    monkeypatch.setattr(i18n, "runtime_catalog_path", lambda language, tools_dir=None: broken)
    i18n._catalog.cache_clear()
    try:
        assert i18n.localize("two readers of 's' do not conflict") == "two readers of 's' do not conflict"
        assert i18n.tr("{title}: x", title="T") == "T: x"
        monkeypatch.setattr(i18n, "runtime_catalog_path", lambda language, tools_dir=None: tmp_path / "absent.po")
        i18n._catalog.cache_clear()
        assert i18n.tr("an assertion failed without a message") == "an assertion failed without a message"
    finally:
        i18n._catalog.cache_clear()


def test_a_translation_that_lost_a_field_falls_back_to_english(zh, monkeypatch):
    exact, _ = i18n._catalog("zh")
    monkeypatch.setitem(exact, "{title}: x", "{titel}：x")
    assert i18n.tr("{title}: x", title="T") == "T: x"


def test_figure_text_is_translated_as_drawn_and_every_glyph_is_in_the_shipped_font(zh):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import font_manager

    # only matplotlib's own fonts and the course's: as on a fresh Colab kernel, whatever this machine has
    font_manager.fontManager.ttflist = [f for f in font_manager.fontManager.ttflist if "matplotlib" in f.fname]
    assert i18n.install() == "zh"
    fig, ax = plt.subplots()
    ax.set_title("Model against measurement")
    ax.set_xlabel("bytes")
    ax.set_ylabel("copy time (ms)")
    ax.plot([0, 1], [0, 1], label="measured = predicted")
    ax.legend()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" would fail here
        fig.canvas.draw()
        fig.savefig(__import__("io").BytesIO(), format="png")
    assert ax.get_title() != "Model against measurement" and any("\u4e00" <= ch <= "\u9fff" for ch in ax.get_title())
    plt.close(fig)


def test_the_font_draws_every_character_of_the_runtime_catalog_and_carries_its_licence():
    from fontTools.ttLib import TTFont

    from autograde.publish import fonts

    exact, _ = i18n._catalog.__wrapped__("zh")
    assert len(exact) > 200
    assert fonts.missing_glyphs(exact.values()) == []
    names = TTFont(i18n.FONT_FILE, lazy=True)["name"]
    assert names.getDebugName(1) == i18n.FONT_FAMILY and "Noto" not in names.getDebugName(1)  # renamed, as the OFL asks
    licence = i18n.FONT_FILE.with_name("OFL.txt").read_text(encoding="utf-8")
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence and "Reserved Font Name" in licence
    assert i18n.FONT_FILE.stat().st_size < 400 * 1024


@pytest.mark.timeout(20)
def test_template_matching_is_linear_and_exact():
    """A template's values are found left to right without a regular expression's backtracking: a
    long line holding every literal piece of an eleven-field table header in the wrong order is
    matched (and left alone) at once, where a regex with eleven lazy groups would not finish."""
    layout = i18n._template_layout("{0} ms, deadline {1} ms: got {2}")
    assert layout == (0, " ms, deadline ", 1, " ms: got ", 2)
    assert i18n._match(layout, "8 ms, deadline 10 ms: got 'wait'") == {0: "8", 1: "10", 2: "'wait'"}
    assert i18n._match(layout, "8 ms, deadline 10 ms: got") is None
    assert i18n._match(layout, "8 ms, deadline 10 ms: got 'a'\nsecond line") is None  # a value stays on its line
    assert i18n._template_layout("{0}{1} ms") is None and i18n._template_layout("{0}") is None
    header = i18n._template_layout(" ".join(f"{{{i}}}" for i in range(11)) + "  correct/pre/overlap")
    text = ("  correct/pre/overlap x " + "a " * 20) * 12
    assert i18n._match(header, text) is None  # returns: the test's timeout would catch a hang


def test_the_scaffolds_errors_reach_the_learner_in_chinese(zh):
    """The exercise scaffolds raise their ValueError's message through localize: the Chinese edition
    shows it from the runtime catalog, the values kept (the English edition unchanged)."""
    item = {"name": "x"}
    assert i18n.localize(f"a work item needs a 'name' and an 'engine', got {item!r}") == "工作项必须有 'name' 和 'engine'，实际为 {'name': 'x'}"
    assert i18n.localize(f"the transfer ends before it starts: {(3.0, 1.0)}") == "传输的结束时间早于开始时间：(3.0, 1.0)"
    assert i18n.localize("no measured cases: run the experiment (real_cpu or real_gpu) first") == "没有实测用例：请先运行实验（real_cpu 或 real_gpu）"
    namespace: dict = {}
    from pathlib import Path

    import nbformat

    root = Path(__file__).resolve().parents[2]
    cell = next(c for c in nbformat.read(root / "notebooks" / "zh" / "01_what_can_overlap.ipynb", 4).cells if c.id == "01-08")
    exec(cell.source, namespace)
    with pytest.raises(ValueError, match="不能拿 'a' 与它自身比较"):
        namespace["check_overlap"]({"name": "a", "engine": "sm"}, {"name": "a", "engine": "sm"})
