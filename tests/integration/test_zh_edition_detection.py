"""The Chinese edition speaks Chinese however its notebook is run: under plain nbclient (as CI,
graders, papermill and many platforms run notebooks), and on Colab or Kaggle, nothing names the
notebook's file to the kernel and COURSE_LANG is unset. The edition's set-up cell says it instead
(``course_setup(language='zh')``, written by the edition builder), as it says in Chinese that the
course runtime is missing (the runtime cannot), and the release check refuses a Chinese set-up cell
that differs from the English one by anything else."""

from __future__ import annotations

import re

import nbformat
import pytest

from autograde.publish.catalogs import Translations
from tools import i18n, notebook_runtime

from submissions import NOTEBOOKS, RELEASE, build, write

SESSION_VARIABLES = ("COURSE_LANG", "JPY_SESSION_NAME", "JPY_PARENT_PID")
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def no_language_hint(monkeypatch):
    for name in SESSION_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    i18n.set_language(None)
    i18n.set_edition(None)
    yield
    i18n.set_edition(None)


def test_the_setup_cells_edition_decides_and_course_lang_overrides_it(
    no_language_hint, monkeypatch
):
    assert i18n.language() == "en"
    notebook_runtime.course_setup(quiet=True, language="zh")
    assert i18n.language() == "zh"
    monkeypatch.setenv(i18n.ENV, "en")
    assert i18n.language() == "en", "COURSE_LANG overrides the edition the set-up cell names"
    monkeypatch.delenv(i18n.ENV)
    i18n.set_language("en")
    assert i18n.language() == "en", "set_language overrides both"
    i18n.set_language(None)
    with pytest.raises(ValueError, match="one of en, zh"):
        i18n.set_edition("fr")


def _messages(root):
    from autograde.course import Course
    from autograde.publish import editions

    return editions.setup_messages(Course.load(root), "zh")


def test_only_the_setup_line_and_message_differ_between_the_editions(root):
    from autograde.judging.ideas import code_only
    from autograde.publish import editions

    messages = _messages(root)
    for name in NOTEBOOKS:
        english = nbformat.read(RELEASE / f"{name}.ipynb", 4).cells
        chinese = nbformat.read(RELEASE / "zh" / f"{name}.ipynb", 4).cells
        setups = [
            (a.source, b.source) for a, b in zip(english, chinese) if editions.is_setup_cell(a)
        ]
        assert len(setups) == 1, name
        en, zh = setups[0]
        assert editions.SETUP_CALL in en.splitlines()
        assert code_only(zh) == code_only(editions.edition_setup(en, "zh", messages)), name
        assert "# 环境准备" in zh and "RUNTIME = course_setup(language='zh')" in zh.splitlines(), (
            name
        )
        assert "课程运行时尚未安装" in zh and "The course runtime is not installed" not in zh, name
        assert (
            editions.code_differences(
                RELEASE / f"{name}.ipynb", RELEASE / "zh" / f"{name}.ipynb", "zh", messages
            )
            == []
        )


def test_the_chinese_setup_cell_says_in_chinese_that_the_runtime_is_missing(root, monkeypatch):
    """The runtime cannot translate the message raised when it is missing: the release writes it in
    Chinese into the edition's set-up cell, the wheel's name and the commands still filled in."""
    import sys

    from autograde.publish import editions

    nb = nbformat.read(RELEASE / "zh" / f"{NOTEBOOKS[0]}.ipynb", 4)
    source = next(c for c in nb.cells if editions.is_setup_cell(c)).source
    code = re.sub(r"^(\s*)%pip .*$", r"\1pass", source, flags=re.M)
    # as if the runtime were not installed
    monkeypatch.setitem(sys.modules, "tools.notebook_runtime", None)
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(ModuleNotFoundError) as raised:
        exec(compile(code, "setup", "exec"), {})
    message = str(raised.value)
    assert message.startswith(
        "课程运行时尚未安装。请把 serving_overlap_course-1.0.0-py3-none-any.whl（在课程 zip 包中）"
    ), message
    assert "%pip install /content/serving_overlap_course-1.0.0-py3-none-any.whl" in message
    assert len(message.splitlines()) == 4 and "{" not in message


def test_the_setup_message_keeps_its_values_and_their_conversions():
    from autograde.publish import editions

    source = (
        "NAME = 'w.whl'\ntry:\n    import a_module_that_is_not_there\nexcept ModuleNotFoundError:\n"
        "    raise ModuleNotFoundError(\n        f'Put {NAME!r} here,\\n'\n        f'then "
        "run {NAME}.') from None\nRUNTIME = course_setup()"
    )
    out = editions.edition_setup(
        source,
        "zh",
        Translations({None: {"Put {0} here,\nthen run {1}.": "把 {0} 放在这里，\n然后运行 {1}。"}}),
    )
    assert "        f'把 {NAME!r} 放在这里，\\n'\n        f'然后运行 {NAME}。') from None" in out, (
        out
    )
    with pytest.raises(ModuleNotFoundError) as raised:
        exec(compile(out, "setup", "exec"), {})
    assert str(raised.value) == "把 'w.whl' 放在这里，\n然后运行 w.whl。"
    untranslated = editions.edition_setup(
        source, "zh", Translations({None: {"another text": "别的"}})
    )
    assert untranslated == source.replace(
        editions.SETUP_CALL, "RUNTIME = course_setup(language='zh')"
    )


def test_check_refuses_a_chinese_setup_message_that_is_not_the_catalogs(root, tmp_path):
    from autograde.publish import editions

    name = NOTEBOOKS[0]
    messages = _messages(root)
    nb = nbformat.read(RELEASE / "zh" / f"{name}.ipynb", 4)
    cell = next(c for c in nb.cells if editions.is_setup_cell(c))
    assert "课程运行时尚未安装" in cell.source
    cell.source = cell.source.replace("课程运行时尚未安装", "运行时缺失")
    changed = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, changed)
    found = editions.code_differences(RELEASE / f"{name}.ipynb", changed, "zh", messages)
    assert len(found) == 1 and "set-up cell" in found[0], found
    english = next(
        c for c in nbformat.read(RELEASE / f"{name}.ipynb", 4).cells if editions.is_setup_cell(c)
    ).source
    assert editions.edition_setup(english, "zh", Translations()) == english.replace(
        editions.SETUP_CALL, "RUNTIME = course_setup(language='zh')"
    )


def test_check_refuses_a_chinese_setup_cell_that_differs_otherwise(root, tmp_path):
    from autograde.publish import editions

    name = NOTEBOOKS[0]
    english = RELEASE / f"{name}.ipynb"
    for change in (
        # edition lost
        lambda s: s.replace("RUNTIME = course_setup(language='zh')", "RUNTIME = course_setup()"),
        lambda s: s + "\nimport os",  # another line added
    ):
        nb = nbformat.read(RELEASE / "zh" / f"{name}.ipynb", 4)
        cell = next(c for c in nb.cells if editions.is_setup_cell(c))
        cell.source = change(cell.source)
        changed = tmp_path / f"{name}.ipynb"
        nbformat.write(nb, changed)
        found = editions.code_differences(english, changed, "zh", _messages(root))
        assert len(found) == 1 and "set-up cell" in found[0], found
    with pytest.raises(editions.EditionError, match="exactly once"):
        editions.edition_setup("import os\nRUNTIME = course_setup(quiet=True)", "zh")


def test_the_editions_code_cells_differ_in_comments_only_and_check_refuses_a_code_change(
    root, tmp_path
):
    """The Chinese edition words the TODO hints in Chinese (comment lines from its catalog); the
    code without its comment lines is the English edition's, and a changed line of code is
    refused."""
    from autograde.judging.ideas import code_only
    from autograde.publish import editions

    name = "06_handoff_simulator"
    english = nbformat.read(RELEASE / f"{name}.ipynb", 4)
    chinese = nbformat.read(RELEASE / "zh" / f"{name}.ipynb", 4)
    todo = [
        (a, b)
        for a, b in zip(english.cells, chinese.cells)
        if a.cell_type == "code" and "# TODO 6" in a.source
    ]
    assert (
        len(todo) == 1
        and "# TODO 6：" in todo[0][1].source
        and todo[0][0].source != todo[0][1].source
    )
    assert code_only(todo[0][0].source) == code_only(todo[0][1].source)
    cell = next(c for c in chinese.cells if c.get("id") == todo[0][1].get("id"))
    cell.source = cell.source.replace("raise NotImplementedError()", "return None")
    changed = tmp_path / f"{name}.ipynb"
    nbformat.write(chinese, changed)
    found = editions.code_differences(RELEASE / f"{name}.ipynb", changed, "zh", _messages(root))
    assert len(found) == 1 and "differs from the English edition" in found[0], found


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_each_chinese_notebook_prints_chinese_under_plain_nbclient(
    name, tmp_path, no_language_hint
):
    """Each Chinese notebook, answered, run by plain nbclient with no COURSE_LANG and no variable
    naming the notebook: the set-up line, every public check's summary and the notebook's own
    printed lines are Chinese."""
    from nbclient import NotebookClient

    folder = tmp_path / "learner"
    # 04 and 06 load the functions of earlier ones
    for other in NOTEBOOKS[: NOTEBOOKS.index(name) + 1]:
        write(tmp_path, "learner", other, build(other, edition="zh"))
    nb = nbformat.read(folder / f"{name}.ipynb", 4)
    NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    ).execute()
    stream = "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "stream"
    )
    graded = sum(
        1 for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
    )
    assert stream.count("隐藏测试") == graded, (
        f"{name}: the public checks did not print in Chinese:\n{stream[-2000:]}"
    )
    assert (
        "hidden tests run at grading" not in stream
        and "CPU only: every exercise works" not in stream
    ), stream[-2000:]
    setup = next(c for c in nb.cells if c.cell_type == "code")
    assert CJK.search("".join(o.get("text", "") for o in setup.outputs)), (
        f"{name}: the set-up line is not Chinese"
    )
