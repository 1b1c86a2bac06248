"""The Chinese edition (中文版): generated from the same sources, the same code, mostly Chinese
text, the glossary's terms, and each notebook, answered, running headless with every figure glyph
drawn from the font the course ships."""

from __future__ import annotations

import re

import nbformat
import pytest

from submissions import NOTEBOOKS, RELEASE, build, write

CJK = re.compile(r"[\u4e00-\u9fff]")
LATIN_WORD = re.compile(r"[A-Za-z]+")
FENCE = re.compile(r"```.*?```", re.S)
SPAN = re.compile(r"`[^`]*`")
LINK_URL = re.compile(r"\]\([^)]*\)")


# The series' chapter titles, which both editions cite in English
CHAPTER_TITLE = re.compile(
    r"\*(?:Prefill / Decode Scheduling|Heterogeneous PD and Serving "
    r"Tiers|Serving Scheduler Benchmark)\*"
)


def _prose(markdown: str) -> str:
    """Explanatory text: without code blocks, inline code, link targets and the chapters' titles."""
    return CHAPTER_TITLE.sub("", LINK_URL.sub("]", SPAN.sub("", FENCE.sub("", markdown))))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_more_than_half_of_each_chinese_notebooks_text_is_chinese(name):
    nb = nbformat.read(RELEASE / "zh" / f"{name}.ipynb", 4)
    assert nb.metadata["course"]["language"] == "zh"
    text = "".join(_prose(c.source) for c in nb.cells if c.cell_type == "markdown")
    chinese = len(CJK.findall(text))
    # letters of Latin words (English, names, units)
    latin = sum(len(w) for w in LATIN_WORD.findall(text))
    assert chinese > latin, f"{name}: {chinese} Chinese characters against {latin} Latin letters"


def _glossary() -> list[tuple[str, str]]:
    """(English, Chinese) rows of docs/glossary.md (read as `check` reads it); a Chinese cell may
    give a term and its gloss."""
    from autograde.publish.catalogs import read_glossary

    return [
        (term.english, " / ".join(term.chosen))
        for term in read_glossary(RELEASE.parent / "docs" / "glossary.md")
    ]


# Terms whose English also appears in senses the glossary does not mean (a "stream" of requests or
# tokens, a package's "version", a "memory-bound" copy or a formula's lower "bound"): not checked.
PHRASE_ONLY = {"stream", "version", "bound"}
# Cells where the English term is a code value the Chinese keeps as code (the action 'fallback')
EXCEPTIONS = {
    ("06_handoff_simulator", "06-03", "fallback"),
    ("06_handoff_simulator", "06-03", "recompute"),
}


def test_the_chinese_edition_uses_the_glossarys_terms():
    """Wherever an English markdown cell uses a glossary term (whole phrase), the same cell of the
    Chinese edition uses the glossary's Chinese (or one of its variants, split at '/' or '(').
    Exceptions: the terms in PHRASE_ONLY (their English has other senses), and acronyms, which may
    stay as they are."""
    missing = []
    for name in NOTEBOOKS:
        english = nbformat.read(RELEASE / f"{name}.ipynb", 4).cells
        chinese = nbformat.read(RELEASE / "zh" / f"{name}.ipynb", 4).cells
        for en, zh in zip(english, chinese):
            if en.cell_type != "markdown":
                continue
            for term, translation in _glossary():
                # each variant the Chinese column gives (a term kept in English, like payload,
                # counts too)
                variants = [v.strip() for v in re.split(r"[/(（)）]", translation) if v.strip()]
                if term in PHRASE_ONLY or not CJK.search(translation):
                    continue
                for english_term in (t.strip() for t in term.split("/")):
                    # an acronym (TTFT, TPOT) may stay an acronym, as Chinese engineering text
                    # writes it
                    accepted = [*variants, english_term] if english_term.isupper() else variants
                    if (name, en.id, english_term) in EXCEPTIONS:
                        continue
                    if re.search(
                        rf"\b{re.escape(english_term)}\b", _prose(en.source), re.I
                    ) and not any(v in zh.source for v in accepted):
                        missing.append(
                            f"{name} cell {en.id}: '{english_term}' without '{translation}'"
                        )
    assert not missing, "\n".join(missing)


@pytest.mark.slow
def test_each_chinese_notebook_answered_runs_headless_without_a_missing_glyph(
    tmp_path, monkeypatch
):
    """The six Chinese notebooks, answered, run top to bottom in a kernel whose matplotlib knows
    only its own fonts and the course's (as a fresh Colab kernel), with a missing glyph an error;
    the kernel knows the edition from its set-up cell (and from the metadata of the notebook that
    JPY_SESSION_NAME names, as Jupyter sets it; test_zh_edition_detection runs them without it)."""
    from nbclient import NotebookClient

    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-only-shipped-fonts.py").write_text(
        "import warnings\n"
        "warnings.filterwarnings('error', message='Glyph .* missing')\n"
        "from matplotlib import font_manager as _fm\n"
        "_fm.fontManager.ttflist = [f for f in _fm.fontManager.ttflist if 'matplotlib' in "
        "f.fname]\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.delenv("COURSE_LANG", raising=False)
    folder = tmp_path / "learner"
    for name in NOTEBOOKS:
        write(folder.parent, folder.name, name, build(name, edition="zh"))
    for name in NOTEBOOKS:
        path = folder / f"{name}.ipynb"
        monkeypatch.setenv("JPY_SESSION_NAME", str(path))
        nb = nbformat.read(path, 4)
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
        checks = stream.count("隐藏测试")
        graded = sum(
            1
            for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
        )
        assert checks == graded and "hidden tests run at grading" not in stream, (
            f"{name}: the check lines are not in Chinese:\n{stream[-2000:]}"
        )
