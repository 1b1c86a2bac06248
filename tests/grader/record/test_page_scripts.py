"""No script runs in a page the grader writes: a notebook holding every script payload of
``page_attacks`` is executed, rendered the way nbgrader's feedback step renders it (this course's
preprocessors and exporter), copied as the grader copies it, and opened in Chromium; the same
notebook through plain nbconvert shows that the check does see script run. The class report
carries the same policy. Unit tests cover the output-metadata preprocessor and the policy's
placement."""

from __future__ import annotations

import base64
import copy
import os
import time
from pathlib import Path

import nbformat
import pytest
from nbconvert.exporters import HTMLExporter
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets.config import Config

from autograde.record.exporters import FEEDBACK_POLICY, add_csp
from autograde.record.pages import PageData, finish_page, render_page
from autograde.run.preprocessors import SafeOutputMetadata

from page_attacks import CHROMIUM, PAYLOAD_CELLS, PAYLOAD_MARKDOWN, PNG, mark, scripts_ran

ROOT = Path(__file__).resolve().parents[3]
browser = pytest.mark.browser


def needs_chromium():
    if not CHROMIUM:
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser tests: chromium is missing (.ci/run installs it)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")


# ---------------------------------------------------------------- the payload notebook and its
# pages

# what an honest notebook shows, and must still show: a figure, and an image at the size asked for
HONEST_CELL = """%matplotlib inline
import base64
import matplotlib.pyplot as plt
from IPython.display import Image, display
fig, ax = plt.subplots(figsize=(4, 2.5))
ax.plot([0, 1, 2, 3], [0, 1, 4, 9], marker="o")
ax.set_title("an honest figure")
plt.show()
display(Image(data=base64.b64decode(PNG), width=120))"""
# an attachment is shown as <img src="data:...">, and an image never runs script (an SVG source
# is not kept at all: the page shows the image's alt text)
_SVG = (
    "<svg xmlns='http://www.w3.org/2000/svg' "
    f'onload="{mark("attachment")}"><script>{mark("attachment-script")}</script></svg>'
)
ATTACHMENT = {"evil.svg": {"image/svg+xml": base64.b64encode(_SVG.encode()).decode()}}


@pytest.fixture(scope="module")
def payload_notebook() -> nbformat.NotebookNode:
    """PAYLOAD_MARKDOWN and PAYLOAD_CELLS, run in a python3 kernel (errors allowed, as in grading),
    after an honest figure and a markdown cell with an SVG attachment."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A notebook of script payloads\n\n$e^{i\\pi} + 1 = 0$"),
        nbformat.v4.new_code_cell(f"PNG = {PNG!r}\n" + HONEST_CELL),
        nbformat.v4.new_markdown_cell(
            "An attachment: ![attached](attachment:evil.svg)", attachments=ATTACHMENT
        ),
    ]
    nb.cells += [nbformat.v4.new_markdown_cell(source) for source in PAYLOAD_MARKDOWN]
    nb.cells += [nbformat.v4.new_code_cell(source) for source in PAYLOAD_CELLS]
    NotebookClient(nb, kernel_name="python3", timeout=120, allow_errors=True).execute()
    return nb


class _Scores(NbGraderPreprocessor):
    """Stands in for nbgrader's GetGrades, which reads the scores from a gradebook."""

    def preprocess(self, nb, resources):
        resources["nbgrader"].update(score=0.0, max_score=0.0, late_penalty=0)
        return nb, resources


def feedback_html(nb: nbformat.NotebookNode) -> str:
    """``nb``'s page as the grader writes it: its data as nbgrader's generate_feedback makes it with
    this course's nbgrader_config.py (the same exporter class and preprocessors, GetGrades aside),
    rendered and finished as pages.write_feedback does."""
    import json

    data = PageData.from_json(json.loads(feedback_data(nb)))
    return finish_page(render_page(data, {}, "en"), {})[0]


def feedback_data(nb: nbformat.NotebookNode) -> str:
    """``nb``'s page data as nbgrader's generate_feedback writes it with this course's
    nbgrader_config.py."""
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import GetGrades
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "autograde")).load_config()
    converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    # as BaseConverter.start
    exporter = converter.exporter_class(parent=converter, config=converter.config)
    for preprocessor in converter.preprocessors:
        exporter.register_preprocessor(_Scores if preprocessor is GetGrades else preprocessor)
    resources = {
        "nbgrader": {"notebook": "payloads", "student": "s", "assignment": "a", "db_url": ""}
    }
    return exporter.from_notebook_node(copy.deepcopy(nb), resources=resources)[0]


def plain_html(nb: nbformat.NotebookNode) -> str:
    """``nb`` through nbconvert's HTML exporter with its defaults: nothing sanitized, no policy."""
    config = Config()
    config.HTMLExporter.template_name = "classic"
    return HTMLExporter(config=config).from_notebook_node(copy.deepcopy(nb))[0]


@pytest.fixture(scope="module")
def pages(payload_notebook, tmp_path_factory) -> dict[str, Path]:
    """The payload notebook's feedback page as the grader writes it, and nbconvert's plain page."""
    folder = tmp_path_factory.mktemp("pages")
    graded = folder / "payloads.ipynb"
    nbformat.write(payload_notebook, graded)
    feedback = folder / "feedback" / "payloads.html"
    feedback.parent.mkdir()
    feedback.write_text(feedback_html(payload_notebook), encoding="utf-8")
    plain = folder / "plain.html"
    plain.write_text(plain_html(payload_notebook), encoding="utf-8")
    return {"feedback": feedback, "plain": plain}


def _timed(paths: list[Path]) -> dict[str, str]:
    begin = time.monotonic()
    found = scripts_ran(paths)
    print(f"scripts_ran on {len(paths)} page(s): {time.monotonic() - begin:.1f} s")
    return found


@browser
def test_no_payload_runs_in_a_feedback_page(pages):
    needs_chromium()
    assert _timed([pages["feedback"]]) == {}


@browser
def test_the_check_sees_script_run_in_a_page_that_is_not_made_safe(pages):
    """Control: nbconvert's page as it comes, without this course's preprocessors and policy."""
    needs_chromium()
    found = _timed([pages["plain"]])
    what = found.get(str(pages["plain"]), "")
    for payload in (
        "data-owned-png-width",
        "data-owned-html-script",
        "data-owned-html-img",
        "Content-Security-Policy",
    ):
        assert payload in what, what


@pytest.mark.slow
def test_the_feedback_page_keeps_the_learners_text_and_figures(pages):
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(pages["feedback"].read_text(encoding="utf-8"), "html.parser")
    figures = [
        img
        for img in soup.find_all("img")
        if img.get("src", "").startswith("data:image/png;base64,")
    ]
    assert len(figures) >= 4, "figures are still shown ..."
    assert [img.get("width") for img in figures].count("120") == 1, "... at the size asked for ..."
    assert all(set(img.attrs) <= {"src", "alt", "width"} for img in soup.find_all("img")), (
        "... with no other attribute"
    )
    text = soup.get_text()
    assert "My answer, with <script>" in text, "learner's markup is shown as text"
    assert all(
        words in text
        for words in ("bold text", "markdown output", "a widget", "ValueError: <script>")
    )


@browser
def test_a_screenshot_of_a_safe_feedback_page(pages, root):
    """Kept under artifacts/ for a person to look at: the page must read well without scripts."""
    from playwright.sync_api import sync_playwright

    from page_attacks import BROWSER_ARGS

    needs_chromium()
    (root / "artifacts").mkdir(exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        try:
            page = chromium.new_page(viewport={"width": 1200, "height": 900})
            page.goto(pages["feedback"].resolve().as_uri())
            page.screenshot(
                path=str(root / "artifacts" / "feedback_page_without_scripts.png"), full_page=True
            )
            assert page.locator("img").count() >= 2 and "My answer, with" in page.inner_text("body")
        finally:
            chromium.close()


@browser
def test_the_class_report_runs_no_script(tmp_path):
    from test_report import COURSE, EVIL, NB, graded, write_out

    from autograde.term.report import write_report

    needs_chromium()
    write_out(tmp_path, [graded("s1", nb) for nb in NB] + [graded(EVIL, nb) for nb in NB])
    page, _, _ = write_report(COURSE, tmp_path)
    assert _timed([page]) == {}


def test_the_class_report_states_its_policy_first(tmp_path):
    from test_report import COURSE, NB, graded, write_out

    from autograde.term.report import REPORT_POLICY, write_report

    write_out(tmp_path, [graded("s1", nb) for nb in NB])
    text = write_report(COURSE, tmp_path)[0].read_text(encoding="utf-8")
    head = text[: text.index("<title>")]
    assert f'<meta http-equiv="Content-Security-Policy" content="{REPORT_POLICY}">' in head
    assert text.count("Content-Security-Policy") == 1


# ---------------------------------------------------------------- the policy's placement

META = f'<meta http-equiv="Content-Security-Policy" content="{FEEDBACK_POLICY}">'


def test_the_policy_comes_right_after_head_before_anything_the_page_holds():
    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8" '
        "/>\n<title></title><script>x()</script>"
    )
    assert add_csp(page) == page.replace("<head>", "<head>" + META, 1)
    assert add_csp(add_csp(page)) == add_csp(page), "added once"


def test_a_page_of_unknown_shape_gets_the_policy_ahead_of_everything():
    # an <html> whose attribute hides a '>': the policy must not land inside the attribute
    odd = '<!doctype html><html lang="x>"><script>x()</script><head>'
    assert add_csp(odd) == "<!doctype html>" + META + odd[len("<!doctype html>") :]
    assert add_csp("<script>x()</script>") == META + "<script>x()</script>"
    assert add_csp('<html lang="en"><head><title>t</title>').startswith(
        '<html lang="en"><head>' + META
    )


@browser
def test_the_policy_holds_in_a_browser_wherever_it_was_put(tmp_path):
    """Chromium applies the policy ahead of a page of unknown shape too (there it comes before
    <html>)."""
    needs_chromium()
    page = (
        "<!DOCTYPE html><html "
        "lang='en'><head><script>document.title='owned:head-script'</script></head><body>text</body></html>"
    )
    assert add_csp(page).startswith("<!DOCTYPE html>" + META + "<html lang='en'>")
    (tmp_path / "as_is.html").write_text(page)
    (tmp_path / "with_policy.html").write_text(add_csp(page))
    found = _timed([tmp_path / "as_is.html", tmp_path / "with_policy.html"])
    assert (
        list(found) == [str(tmp_path / "as_is.html")]
        and "owned:head-script" in found[str(tmp_path / "as_is.html")]
    )


def test_every_feedback_page_written_carries_the_policy():
    from feedback_pages import page_data

    for language, lang in (("en", "en"), ("zh", "zh-CN")):
        page = render_page(page_data(), {}, language)
        assert page.startswith(f'<!DOCTYPE html>\n<html lang="{lang}">\n<head>' + META), page[:200]
        assert add_csp(page) == page, "the policy opens the head once"


# ---------------------------------------------------------------- output metadata


def _image_cell(metadata: dict) -> nbformat.NotebookNode:
    output = nbformat.v4.new_output("display_data", data={"image/png": "AAAA"}, metadata=metadata)
    return nbformat.v4.new_code_cell("show()", outputs=[output])


def _kept(metadata: dict) -> dict:
    cell, _ = SafeOutputMetadata().preprocess_cell(_image_cell(metadata), {}, 0)
    return cell.outputs[0].metadata


def test_numeric_width_and_height_are_kept_as_numbers():
    assert _kept({"image/png": {"width": 640, "height": 480.5}}) == {
        "image/png": {"width": 640, "height": 480.5}
    }
    assert _kept({"width": "320", "height": 200}) == {"width": 320, "height": 200}


def test_a_width_carrying_an_attribute_is_dropped():
    assert _kept({"image/png": {"width": "1 onerror=document.title='owned'", "height": 10}}) == {
        "image/png": {"height": 10}
    }
    assert _kept({"width": "100px", "height": "1e3"}) == {}
    assert _kept({"width": True, "height": float("nan")}) == {}
    assert _kept({"width": [1], "height": {"a": 1}}) == {}


def test_every_other_key_is_dropped():
    metadata = {
        "filenames": {"image/png": "javascript:x()"},
        "isolated": True,
        "needs_background": "light",
        "image/png": {"alt": '" onload="x()', "unconfined": True, "width": 10},
        "text/html": {"isolated": True},
        "image/jpeg": "not a dict",
    }
    assert _kept(metadata) == {"image/png": {"width": 10}}


def test_widget_state_and_every_cells_outputs_are_cleaned():
    nb = nbformat.v4.new_notebook(
        metadata={
            "widgets": {"application/vnd.jupyter.widget-state+json": {}},
            "language_info": {"name": "python"},
        }
    )
    nb.cells = [
        _image_cell({"width": "x y"}),
        nbformat.v4.new_markdown_cell("text"),
        _image_cell({"tags": ["a"]}),
    ]
    nb, _ = SafeOutputMetadata().preprocess(nb, {})
    assert [c.outputs[0].metadata for c in nb.cells if c.cell_type == "code"] == [{}, {}]
    assert "widgets" not in nb.metadata and nb.metadata.language_info.name == "python"


# ---------------------------------------------------------------- long lines wrap


@browser
def test_a_feedback_page_wraps_long_lines_instead_of_scrolling_sideways(tmp_path):
    """A long code line, a long printed line and a long traceback line fit the window of the page
    the grader writes; the same page as nbgrader renders it scrolls sideways (so the check can
    fail)."""
    from playwright.sync_api import sync_playwright

    from page_attacks import BROWSER_ARGS

    needs_chromium()
    long = "x" * 400
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                f"value = '{long}'  # a long line of code",
                outputs=[
                    nbformat.v4.new_output(
                        "stream", text=f"printed: {' '.join(['word'] * 80)} {long}\n"
                    ),
                    nbformat.v4.new_output(
                        "error", ename="ValueError", evalue=long, traceback=[f"ValueError: {long}"]
                    ),
                ],
            ),
        ]
    )
    import json

    from autograde.record.exporters import PAGE_STYLES

    written = feedback_html(nb)
    (tmp_path / "written.html").write_text(written, encoding="utf-8")
    raw = render_page(PageData.from_json(json.loads(feedback_data(nb))), {}, "en")
    (tmp_path / "raw.html").write_text(raw.replace(PAGE_STYLES, ""), encoding="utf-8")
    widths = {}
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        try:
            page = chromium.new_page(viewport={"width": 1000, "height": 800})
            for name in ("raw", "written"):
                page.goto((tmp_path / f"{name}.html").resolve().as_uri())
                widths[name] = page.evaluate(
                    "() => [document.documentElement.scrollWidth, "
                    "document.documentElement.clientWidth,"
                    " Math.max(...[...document.querySelectorAll('pre')].map(e => "
                    "e.scrollWidth - e.clientWidth))]"
                )
        finally:
            chromium.close()
    page_width, window, pre_overflow = widths["written"]
    assert page_width <= window and pre_overflow <= 1, widths
    assert widths["raw"][0] > widths["raw"][1] or widths["raw"][2] > 1, (
        f"the control page did not overflow: {widths}"
    )


# ---------------------------------------------------------------- the link check


def test_links_of_unsafe_schemes_point_nowhere_and_the_rest_of_the_page_is_kept():
    """The last check of a page (pages.safe_links, tags read by Python's HTML parser): every link or
    source of a scheme not allowed points at '#', however the scheme is written; safe links, base64
    PNG images and the page's text stay as they are."""
    from autograde.record.pages import safe_links

    unsafe = [
        '<a href="javascript:alert(1)">x</a>',
        "<a href='JAVASCRIPT:alert(1)'>x</a>",
        "<a href=javascript:alert(1)>x</a>",
        '<a/href="javascript:alert(1)">x</a>',
        '<a\nhref="java&#x09;script:alert(1)">x</a>',
        '<a href="&#106;avascript:x">x</a>',
        '<a title="t" href=" vbscript:x">x</a>',
        '<img src="data:image/svg+xml;base64,AAA">',
        '<form action="javascript:x"><button formaction="javascript:y">b</button></form>',
        '<video poster="javascript:x"></video>',
        '<svg><a xlink:href="javascript:x">x</a></svg>',
        '<a href="javascript:x" href="https://example.org">twice</a>',
    ]
    for page in unsafe:
        fixed = safe_links(page)
        assert (
            "script:" not in fixed.lower() and "data:image/svg" not in fixed and '="#"' in fixed
        ), (page, fixed)
    kept = (
        '<p>Text that says href="javascript:x" stays text.</p>\n<a '
        'href="https://example.org/a?b=1&amp;c=2">ok</a> '
        '<a href="#top">(Top)</a> <a href="rel/path.html">r</a> <a '
        'href="mailto:a@b.c">m</a>\n<img src="data:image/png;base64,AAAA" alt="a">'
    )
    assert safe_links(kept) == kept


def test_a_page_left_unparsed_holds_no_link_the_parser_would_change():
    """The link check parses only a page that may hold an unsafe link (pages._may_hold_unsafe): on
    pages made of pieces of tags, attributes, values, entities and characters that lower to another
    ('K', the Kelvin sign, and 'İ'), every page the parser would change is one it is asked to
    read."""
    import random

    from autograde.record.pages import _may_hold_unsafe, _UnsafeLinks

    pieces = [
        "<a ", "<img ", "<svg><use ", " href", " HREF", " xlink:href", " src", " SrC", "formaction",
        " action", "poster", "bac\u212aground", "h\u0130ref", "=", "==", " = ", '"', "'",
        "javascript:", "java&#x09;script:", "javascript&colon;", "&#106;avascript:",
        "data:image/png;base64,AA", "data:text/html,x", "https://x", "#a", " ", "\t", "\n", ">",
        "/>", "/", ":", "<!--", "-->", "<script>", "</script>", 'a"', "b'", "\u03a3",
    ]  # fmt: skip
    rng = random.Random(5)
    for _ in range(20_000):
        page = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 14)))
        if _UnsafeLinks(page).found:
            assert _may_hold_unsafe(page), page
