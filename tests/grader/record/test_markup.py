"""A feedback page shows the notebook's markdown as written (record/markup.py): nothing escaped
twice, math as MathML made at grading, a learner's markup shown as text and never run. Each
defence is shown beside its control: the same source through the old path (nbconvert's
SanitizeHTML on the source, then its renderer) or through nbconvert's renderer unsanitized."""

from __future__ import annotations

import copy
import html
import re
from html.parser import HTMLParser

import nbformat
import pytest
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.preprocessors.sanitize import SanitizeHTML

from autograde.record.markup import render_markdown, sanitize, tex_to_mathml
from autograde.run.preprocessors import SanitizeOutputs

from page_attacks import PAYLOAD_MARKDOWN, mark

# what the course's notebooks write, and a page showed escaped twice or as a literal mark
WRITTEN = (
    "> **Caveat.** This rule is deliberately strict.\n\n"
    "With layers = L > 1 the KV leaves in L chunks; A & B.\n\n"
    "Accept when `latency_ratio <= 0.75` and `overlap_p95_ms < serial_median_ms`.\n\n"
    "```python\ndecide_overlap([case], quiet)   # -> 'accept_physical_overlap'\n```\n"
)
SHOWN = (
    "Caveat. This rule is deliberately strict.",
    "With layers = L > 1 the KV leaves in L chunks; A & B.",
    "latency_ratio <= 0.75",
    "overlap_p95_ms < serial_median_ms",
    "# -> 'accept_physical_overlap'",
)


class _Text(HTMLParser):
    """What a browser shows of an HTML fragment: its text, each character reference decoded once."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.tags: list[tuple[str, dict]] = []

    def handle_data(self, data):
        self.parts.append(data)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag


def _read(fragment: str) -> _Text:
    reader = _Text()
    reader.feed(fragment)
    reader.close()
    return reader


def shown(fragment: str) -> str:
    return " ".join("".join(_read(fragment).parts).split())


def _old_path(source: str) -> str:
    """The page's markdown before: nbconvert's SanitizeHTML on the cell's source, then its
    renderer."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(source)])
    nb, _ = SanitizeHTML(enabled=True).preprocess(nb, {})
    return MarkdownWithMath(renderer=IPythonRenderer(escape=False)).render(nb.cells[0].source)


class _NaiveMath(IPythonRenderer):
    """nbconvert's renderer with latex2mathml's own output for the math, nothing sanitized."""

    def block_math(self, body):
        from latex2mathml.converter import convert

        return convert(body, display="block")

    def inline_math(self, body):
        from latex2mathml.converter import convert

        return convert(body)


def _unsanitized(source: str) -> str:
    return MarkdownWithMath(renderer=_NaiveMath(escape=False)).render(source)


def test_markdown_is_shown_as_written():
    page = render_markdown(WRITTEN)
    text = shown(page)
    for words in SHOWN:
        assert words in text, (words, text)
    assert "&amp;" not in text and "&lt;" not in text and "&gt;" not in text
    assert "<blockquote>" in page and not text.startswith(">")


def test_the_old_path_escaped_the_same_text_twice():
    """Control: sanitizing the source escaped it before the renderer escaped it again."""
    text = shown(_old_path(WRITTEN))
    assert "latency_ratio &lt;= 0.75" in text and "# -&gt; 'accept_physical_overlap'" in text
    assert text.startswith("> Caveat.")  # the blockquote's mark, escaped, no longer a blockquote


def test_the_worker_leaves_markdown_as_written_and_still_cleans_html_outputs():
    """The feedback step's preprocessor (nbgrader_config.py): a markdown cell and a markdown output
    are left for the page's renderer; an HTML output and a raw cell are cleaned as before."""
    script = f"<script>{mark('output')}</script><b>bold</b>"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(WRITTEN),
        nbformat.v4.new_raw_cell(script),
        nbformat.v4.new_code_cell(
            "show()",
            outputs=[
                nbformat.v4.new_output(
                    "display_data",
                    data={"text/html": script, "text/markdown": "`a < b`", "text/javascript": "x"},
                )
            ],
        ),
    ]
    done, _ = SanitizeOutputs(enabled=True).preprocess(copy.deepcopy(nb), {})
    assert done.cells[0].source == WRITTEN
    assert "<script>" not in done.cells[1].source and "&lt;script&gt;" in done.cells[1].source
    data = done.cells[2].outputs[0].data
    assert "<script>" not in data["text/html"] and "<b>bold</b>" in data["text/html"]
    assert data["text/markdown"] == "`a < b`" and "text/javascript" not in data


def test_math_is_mathml_with_its_tex_kept():
    page = render_markdown(
        "Each token: $$\\text{bytes per token} = 2 \\times \\text{kv\\_heads}$$ and $x_1 < y$."
    )
    reader = _read(page)
    maths = [attrs for tag, attrs in reader.tags if tag == "math"]
    assert [m.get("display") for m in maths] == ["block", "inline"]
    # no TeX delimiters left for a script to find
    assert "$" not in "".join(reader.parts).replace("\\", "")
    assert "<mtext>kv_heads</mtext>" in page  # a TeX escape in text mode is its character
    assert (
        '<annotation encoding="application/x-tex">\\text{bytes per token} = 2 \\times '
        "\\text{kv\\_heads}</annotation>"
    ) in page
    assert "<mo>&lt;</mo>" in page


def test_text_in_a_formula_is_escaped_once():
    """latex2mathml's own output leaves a ``<`` of ``\\text{}`` raw (it unescapes what it wrote):
    the page serializes its tree itself."""
    from latex2mathml.converter import convert

    assert "<mtext>a<b" in convert("\\text{a<b}")  # the converter's own output
    made = tex_to_mathml("\\text{a<b & c}", display=False)
    assert "<mtext>a&lt;b\u00a0&amp;\u00a0c</mtext>" in made and sanitize(made) == made


def test_tex_that_cannot_be_read_is_shown_as_tex():
    page = render_markdown("A broken formula: $$\\frac{1}{$$")
    assert '<code class="tex">$$\\frac{1}{$$</code>' in page and "<math" not in page
    # past the converter's recursion
    deep = render_markdown("$$" + "{" * 3000 + "x" + "}" * 3000 + "$$")
    assert deep.startswith('<p><code class="tex">$${{{') and "<math" not in deep


LEARNER_ATTACKS = [
    *PAYLOAD_MARKDOWN,
    f"[a link](javascript:{mark('md-js-link')})",
    f"$\\href{{javascript:{mark('tex-href')}}}{{x}}$ and $\\style{{background:url(x)}}{{y}}$",
    f'$$\\text{{<img/src=""/onerror={mark("tex-img")}>}}$$',
    f'<math><mtext><img src=x onerror="{mark("mathml-img")}"></mtext><maction '
    'actiontype="statusline" xlink:href="javascript:x">z</maction></math>',
    '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">data</a> '
    "![svg](data:image/svg+xml;base64,PHN2Zz4=)",
    '<form action="https://example.org"><input name="q"><button '
    'formaction="javascript:x">go</button></form>',
    '<a href="#" style="position:fixed;top:0">over the score</a> <div '
    'class="panel-heading" id="top">fake heading</div>',
]
LIVE = re.compile(r"^on|^style$|^formaction$|^action$")
TAGS_NEVER = {
    "script",
    "iframe",
    "object",
    "embed",
    "svg",
    "form",
    "button",
    "maction",
    "style",
    "link",
    "meta",
    "base",
}


def _live(fragment: str) -> list[str]:
    """What in a fragment could run or steer the page: event handlers, styles and actions on
    anything but a table cell's alignment, a script-capable tag, a URL of a scheme not allowed,
    an element of the page's own (``id`` outside a heading)."""
    found = []
    for tag, attrs in _read(fragment).tags:
        if tag in TAGS_NEVER:
            found.append(tag)
        for name, value in attrs.items():
            if LIVE.search(name) and not (name == "style" and tag in ("th", "td")):
                found.append(f"{tag}[{name}]")
            unsafe = re.match(
                r"\s*(javascript|vbscript|data:(?!image/(png|jpeg|gif);base64,))", value or "", re.I
            )
            if name in ("href", "src", "xlink:href") and unsafe:
                found.append(f"{tag}[{name}={value[:30]}]")
            if name == "id" and not re.fullmatch(r"h[1-6]", tag):
                found.append(f"{tag}[id]")
    return found


@pytest.mark.parametrize("source", LEARNER_ATTACKS, ids=range(len(LEARNER_ATTACKS)))
def test_a_learners_markup_is_shown_never_run(source):
    page = render_markdown(source)
    assert _live(page) == [], page
    assert "owned" not in "".join(
        value for _, attrs in _read(page).tags for value in attrs.values() if value
    ), page


def test_the_attacks_are_live_without_the_sanitizer():
    """Control: nbconvert's renderer, with latex2mathml's output as it comes, leaves every one of
    them live."""
    missed = [source for source in LEARNER_ATTACKS if not _live(_unsanitized(source))]
    assert not missed, missed


def test_a_learners_words_around_the_markup_are_kept():
    page = render_markdown(PAYLOAD_MARKDOWN[0])
    # shown as text, escaped once
    assert html.unescape(shown(page)).startswith("My answer, with <script>")
