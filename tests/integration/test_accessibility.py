"""Every kind of page the grader writes passes axe-core's WCAG 2 A and AA rules in Chromium: a
feedback page of each edition (every notebook, with a late line and answers that wait for a person),
the class report in English and in Chinese, and the similarity page. axe-core is the one
axe-playwright-python ships (4.12.1); a failure lists each violation's rule, element and message.

axe-core cannot see wrong text, so the same graded class's feedback pages are also read in Chromium
against the notebooks submitted (both editions): every markdown cell's text as an independent
reader (markdown-it) renders the notebook's own source, every code cell's source, no character
reference shown as text, every formula laid out by the browser as MathML with no request made,
and each test cell in the page's list named by its TODO."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from page_attacks import BROWSER_ARGS, CHROMIUM
from submissions import NOTEBOOKS, build, run_grade, troubles, write

pytestmark = [pytest.mark.browser, pytest.mark.slow]
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
LATE = "04_decode_start_gate"


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    """A graded class (an English and a Chinese submission of every notebook, a late one of each
    edition), its class report in both languages and its similarity page: (the submissions'
    folder, {name: page})."""
    subs = tmp_path_factory.mktemp("subs")
    out = tmp_path_factory.mktemp("out") / "out"
    for notebook in NOTEBOOKS:
        write(subs, "en", notebook, build(notebook))
        write(subs, "zh", notebook, build(notebook, edition="zh"))
    write(subs, "en_late", LATE, build(LATE))
    write(subs, "zh_late", LATE, build(LATE, edition="zh"))
    times = subs.parent / "times.csv"
    times.write_text(
        "student_id,submitted_at\nen,2026-12-01T10:00:00Z\nzh,2026-12-01T10:00:00Z\nen_late,2026-12-03T10:00:00Z\nzh_late,2026-12-03T10:00:00Z\n"
    )
    run_grade(
        subs,
        out,
        "--deadline",
        "2026-12-01T23:59:00Z",
        "--late-policy",
        "deduct:10%/day",
        "--timestamps",
        str(times),
    )
    found = {
        f"feedback {p.parent.name}/{p.stem}": p for p in sorted((out / "feedback").glob("*/*.html"))
    }
    assert len(found) == 2 * len(NOTEBOOKS) + 2, troubles(out)
    for language in ("en", "zh"):
        command = [sys.executable, "-m", "autograde", "report", str(out), "--language", language]
        made = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert made.returncode == 0, made.stdout + made.stderr
        found[f"report.html ({language})"] = shutil.copy(
            out / "report.html", out / f"report-{language}.html"
        )
    made = subprocess.run(
        [sys.executable, "-m", "autograde", "similarity", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    found["similarity.html"] = out / "similarity.html"
    return subs, {name: Path(path) for name, path in found.items()}


@pytest.fixture(scope="module")
def pages(graded_class) -> dict[str, Path]:
    return graded_class[1]


def _violations(page) -> list[dict]:
    from axe_playwright_python.sync_playwright import Axe

    options = {"runOnly": {"type": "tag", "values": WCAG_TAGS}, "resultTypes": ["violations"]}
    return Axe().run(page, options=options).response["violations"]


def _said(name: str, violations: list[dict]) -> list[str]:
    """Each violation as a line: the page, the rule, its impact, the element and axe's message."""
    lines = []
    for violation in violations:
        for node in violation["nodes"]:
            message = " ".join(node.get("failureSummary", "").split())
            lines.append(
                f"{name}: {violation['id']} ({violation['impact']}) at "
                f"{' '.join(map(str, node['target']))}: {message}"
            )
    return lines


def test_every_page_passes_axe_cores_wcag_2_a_and_aa_rules(pages):
    from playwright.sync_api import sync_playwright

    if not CHROMIUM:
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser tests: chromium is missing (.ci/run installs it)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    found, checked = [], {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        try:
            # the pages forbid every script: axe is put in by the browser's own protocol, past the
            # policy
            page = browser.new_context(bypass_csp=True).new_page()
            for name, path in pages.items():
                page.goto(path.resolve().as_uri())
                checked[name] = page.evaluate("() => document.documentElement.lang")
                found += _said(name, _violations(page))
        finally:
            browser.close()
    print("\n".join(found))
    assert not found, f"{len(found)} violation(s) of WCAG 2 A/AA:\n" + "\n".join(found[:60])
    assert {name: lang for name, lang in checked.items() if "zh" in name} == {
        **{name: "zh-CN" for name in pages if name.startswith("feedback zh")},
        "report.html (zh)": "zh-CN",
    }
    assert all(lang == "en" for name, lang in checked.items() if "zh" not in name), checked


# ---------------------------------------------------------------- the pages read as written

_ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")
# the notebooks' math, as MathJax reads it
_FORMULA = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.S)
FORMULA_SHOWN = "\u27e6formula\u27e7"  # a formula, in the text a test compares
_TODO = re.compile(r'^"""(TODO \d+ · \w+)')

# each cell of a page as the browser shows it: the text of its rendered markdown or its code (the
# formulas replaced by FORMULA_SHOWN), and each formula's TeX (its annotation) and laid-out size
_PAGE_CELLS = """(shown) => [...document.querySelectorAll('#notebook-container > \
div.cell')].map(cell => {
    const body = cell.querySelector('.text_cell_render') || cell.querySelector('.input_area');
    const formulas = [...body.querySelectorAll('math')].map(m => {
        const box = m.getBoundingClientRect(), tex = m.querySelector('annotation');
        return {tex: tex ? tex.textContent : null, width: box.width, height: box.height};
    });
    body.querySelectorAll('math').forEach(m => m.replaceWith(document.createTextNode(shown)));
    return {markdown: cell.classList.contains('text_cell'), text: body.innerText, formulas};
})"""


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data):
        self.parts.append(data)


def _plain(text: str) -> str:
    return " ".join(text.replace("\u00a0", " ").split())


def written(source: str) -> tuple[str, list[str]]:
    """A markdown cell's text as markdown-it (not the page's renderer) makes it, each formula
    replaced by FORMULA_SHOWN, and the formulas' TeX."""
    from markdown_it import MarkdownIt

    formulas = [display or inline for display, inline in _FORMULA.findall(source)]
    reader = _Text()
    reader.feed(
        MarkdownIt("commonmark")
        .enable(["table", "strikethrough"])
        .render(_FORMULA.sub(FORMULA_SHOWN, source))
    )
    reader.close()
    return _plain("".join(reader.parts)), formulas


def misread(page, submitted: nbformat.NotebookNode, hidden_note: str) -> list[str]:
    """Where ``page`` (open in the browser) does not show ``submitted`` as written."""
    found = []
    text = page.inner_text("body")
    found += [
        f"a character reference shown as text: {m!r}" for m in sorted(set(_ENTITY.findall(text)))
    ]
    cells = page.evaluate(_PAGE_CELLS, FORMULA_SHOWN)
    if len(cells) != len(submitted.cells):
        return found + [f"{len(cells)} cells on the page, {len(submitted.cells)} in the notebook"]
    for i, (cell, shown) in enumerate(zip(submitted.cells, cells)):
        if cell.cell_type == "markdown":
            want, formulas = written(cell.source)
            got = _plain(shown["text"].replace("\u00b6", ""))  # a heading's anchor mark
            if got != want:
                at = next(
                    (k for k, (a, b) in enumerate(zip(got, want)) if a != b),
                    min(len(got), len(want)),
                )
                near = slice(max(0, at - 60), at + 60)
                found.append(
                    f"cell {i}: the page shows {got[near]!r} where the notebook says {want[near]!r}"
                )
            if [f["tex"] for f in shown["formulas"]] != formulas:
                found.append(
                    f"cell {i}: formulas {[f['tex'] for f in shown['formulas']]} on the "
                    f"page, {formulas} in the notebook"
                )
            found += [
                f"cell {i}: the formula {f['tex']!r} is not laid out"
                for f in shown["formulas"]
                if not (f["width"] > 0 and f["height"] > 0)
            ]
        elif _plain(shown["text"]) not in (
            _plain(cell.source),
            _plain(cell.source + "\n# " + hidden_note),
        ):
            found.append(
                f"cell {i}: the code shown is not the notebook's: {_plain(shown['text'])[:120]!r}"
            )
    return found


def test_every_feedback_page_shows_its_notebook_as_written(graded_class, root):
    from playwright.sync_api import sync_playwright

    from autograde.course import Course
    from autograde.model import HIDDEN_NOTE_TEXT
    from autograde.publish.editions import feedback_translations

    if not CHROMIUM:
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser tests: chromium is missing (.ci/run installs it)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    subs, pages = graded_class
    words = feedback_translations(Course.load(root))
    found, requests, read, formulas, written_formulas = {}, [], 0, 0, 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        try:
            page = browser.new_page()
            page.on(
                "request",
                lambda request: (
                    requests.append(request.url) if not request.url.startswith("file:") else None
                ),
            )
            for name, path in pages.items():
                if not name.startswith("feedback "):
                    continue
                student, notebook = path.parent.name, path.stem
                submitted = nbformat.read(subs / student / f"{notebook}.ipynb", 4)
                edition = "zh" if student.startswith("zh") else "en"
                page.goto(path.resolve().as_uri())
                formulas += page.locator("math").count()
                problems = misread(
                    page, submitted, words.of(edition).get(HIDDEN_NOTE_TEXT, HIDDEN_NOTE_TEXT)
                )
                label = "测试单元格：{}" if edition == "zh" else "Test cell: {}"
                for cell in submitted.cells:
                    meta = cell.metadata.get("nbgrader", {})
                    if (
                        meta.get("grade")
                        and not meta.get("solution")
                        and (todo := _TODO.match(cell.source))
                    ):
                        entry = page.inner_text(f"#toc a[href='#{meta['grade_id']}']")
                        if entry != label.format(todo.group(1)):
                            problems.append(
                                f"the list names the test cell {meta['grade_id']} {entry!r}"
                            )
                written_formulas += sum(
                    len(_FORMULA.findall(c.source))
                    for c in submitted.cells
                    if c.cell_type == "markdown"
                )
                if problems:
                    found[name] = problems
                read += 1
        finally:
            browser.close()
    assert read == 2 * len(NOTEBOOKS) + 2
    assert not found, "\n".join(
        f"{name}:\n  " + "\n  ".join(problems[:12]) for name, problems in found.items()
    )
    # 02's two formulas and 06's one, in each edition
    assert formulas == written_formulas >= 6, (formulas, written_formulas)
    assert not requests, requests  # nothing loaded from the network: the math is the page's own
