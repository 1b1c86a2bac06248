"""The exporter nbgrader's feedback step uses (``c.GenerateFeedback.exporter_class``)."""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from jinja2 import BytecodeCache, DictLoader, pass_context
from nbconvert.exporters import Exporter, HTMLExporter, NotebookExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from traitlets import default

from .markup import render_markdown


class _MemoryBytecodeCache(BytecodeCache):
    """Compiled Jinja templates kept in memory, keyed by template and source checksum (Jinja
    checks the checksum, so a changed template is compiled again)."""

    def __init__(self):
        self._store: dict[str, bytes] = {}

    def load_bytecode(self, bucket) -> None:
        code = self._store.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket) -> None:
        self._store[bucket.key] = bucket.bytecode_to_string()

    def clear(self) -> None:
        self._store.clear()


_TEMPLATES = _MemoryBytecodeCache()

FRAGMENTS_KEPT = 4096  # rendered sources a process keeps (one edition of the course has about 140)
FRAGMENT_MAX_SOURCE = 32_000  # characters: a longer source is rendered every time, never kept
FRAGMENTS_MAX_CHARS = 16_000_000  # characters of HTML kept in all


class _Fragments:
    """HTML rendered from a cell's source, keyed by everything that decides it (see the callers).

    The cells a learner did not change are the same on every student's page: the grader, which
    renders every page of a batch, renders the course's own once. Bounded: a source longer than
    ``FRAGMENT_MAX_SOURCE`` is never kept (a learner's huge output or cell), and past
    ``FRAGMENTS_KEPT`` entries or ``FRAGMENTS_MAX_CHARS`` characters of HTML it starts again,
    empty."""

    def __init__(self):
        self._store: dict[tuple, str] = {}
        self._chars = 0

    def get(self, key: tuple, source: str, make) -> str:
        if len(source) > FRAGMENT_MAX_SOURCE:
            return make()
        value = self._store.get(key)
        if value is None:
            value = make()
            if len(self._store) >= FRAGMENTS_KEPT or self._chars + len(value) > FRAGMENTS_MAX_CHARS:
                self.clear()
            self._store[key] = value
            self._chars += len(value)
        return value

    def __len__(self) -> int:
        return len(self._store)

    def clear(self) -> None:
        self._store.clear()
        self._chars = 0


_HIGHLIGHTED = _Fragments()
_MARKDOWN = _Fragments()


_ABSENT = object()  # a metadata key that is not there (not the same as one set to null)


def _options(options) -> str:
    return json.dumps(options, sort_keys=True, default=repr)


class KeptHighlight2HTML(Highlight2HTML):
    """nbconvert's code highlighter, each result kept by source, language, the cell's
    ``magics_language`` (the only metadata the highlighter reads) and the formatter's options."""

    def __call__(self, source, language=None, metadata=None):
        magics = metadata.get("magics_language", _ABSENT) if isinstance(metadata, dict) else _ABSENT
        # null or odd: nbconvert's own path
        if magics is not _ABSENT and not isinstance(magics, str):
            return super().__call__(source, language, metadata)
        key = (
            source,
            language or self.pygments_lexer,
            None if magics is _ABSENT else magics,
            _options(self.extra_formatter_options),
        )
        return _HIGHLIGHTED.get(
            key, source, lambda: Highlight2HTML.__call__(self, source, language, metadata)
        )


# No script may run in a page the grader writes: a learner's output or markdown that slipped
# past sanitizing stays inert. The page needs none (its math is MathML, made at grading: markup.py).
FEEDBACK_POLICY = (
    "script-src 'none'; object-src 'none'; frame-src 'none'; base-uri 'none'; form-action 'none'"
)
_SPACE = " \t\n\f\r"  # HTML's whitespace only: any other text there would open the body


def csp_meta(policy: str = FEEDBACK_POLICY) -> str:
    """The ``<meta>`` that gives a page ``policy`` (its quotes kept as they are)."""
    content = html.escape(policy, quote=False).replace('"', "&quot;")
    return f'<meta http-equiv="Content-Security-Policy" content="{content}">'


def _after(text: str, at: int, opening: str) -> int | None:
    """Where ``opening`` (matched without case) ends, HTML whitespace skipped before it; None when
    it is not there."""
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at + len(opening) if text[at : at + len(opening)].lower() == opening.lower() else None


def _head_opening(text: str) -> int | None:
    """The end of the opening our pages' templates write (a doctype, ``<html>`` with an optional
    ``lang``, ``<head>``), or None for a page of another shape."""
    at = 1 if text.startswith("\ufeff") else 0
    at = _after(text, at, "<!DOCTYPE html>") or at
    at = _after(text, at, "<html")
    if at is None:
        return None
    if text[at : at + 7].lower() == ' lang="':
        end = text.find('"', at + 7)
        if end < 0 or not all(
            ch.isascii() and (ch.isalpha() or ch == "-") for ch in text[at + 7 : end]
        ):
            return None
        at = end + 1
    at = _after(text, at, ">")
    return None if at is None else _after(text, at, "<head>")


def _doctype_end(text: str) -> int | None:
    """The end of a leading doctype (at its first ``>``, quoted or not), or None."""
    at = 1 if text.startswith("\ufeff") else 0
    start = _after(text, at, "<!DOCTYPE")
    end = text.find(">", start) if start is not None else -1
    return end + 1 if end >= 0 else None


def add_csp(html_text: str, policy: str = FEEDBACK_POLICY) -> str:
    """``html_text`` with a Content-Security-Policy ``<meta>`` as the first element of its head.

    A policy given in a ``<meta>`` covers only what the browser parses after it, so it goes
    before the title (which can quote a notebook's name) and before every script. A page that
    does not open with the plain doctype, ``<html>`` and ``<head>`` of our templates gets it
    straight after its doctype, or at its very start: the browser puts a leading ``<meta>`` in
    the head it opens, and no attribute of the page can swallow it. Added once. (The feedback
    page's template writes it itself; the class report and the similarity page get it here.)"""
    meta = csp_meta(policy)
    at = _head_opening(html_text)
    at = at if at is not None else (_doctype_end(html_text) or 0)
    if html_text.startswith(meta, at):
        return html_text
    return html_text[:at] + meta + html_text[at:]


# Long lines wrap on a feedback page instead of making the reader scroll sideways: code, outputs
# and tracebacks keep their line breaks and break long lines anywhere they must.
WRAP_STYLE = (
    "<style>/* course: long lines wrap */ pre, .highlight pre, div.output_area pre "
    "{ white-space: pre-wrap; overflow-wrap: anywhere; } div.output_area, div.input_area "
    "{ overflow-x: visible; }</style>"
)


def contrast(foreground: str, background: str) -> float:
    """WCAG 2's contrast ratio of two colours (``#rrggbb`` or ``#rgb``)."""

    def luminance(colour: str) -> float:
        hexa = colour.lstrip("#")
        hexa = "".join(ch * 2 for ch in hexa) if len(hexa) == 3 else hexa
        linear = [
            (c / 12.92) if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
            for c in (int(hexa[i : i + 2], 16) / 255 for i in (0, 2, 4))
        ]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


CODE_BACKGROUND = "#f5f5f5"  # the darkest a page's code sits on (Bootstrap's <pre>)
MIN_CONTRAST = 4.5  # WCAG 2 AA, normal text


def _readable(colour: str, background: str = CODE_BACKGROUND) -> str:
    """``colour``, darkened in steps of its own hue until it reads on ``background`` (AA)."""
    hexa = colour.lstrip("#")
    hexa = "".join(ch * 2 for ch in hexa) if len(hexa) == 3 else hexa
    rgb = [int(hexa[i : i + 2], 16) for i in (0, 2, 4)]
    made = "#" + hexa.lower()
    while contrast(made, background) < MIN_CONTRAST + 0.1:
        rgb = [int(c * 0.93) for c in rgb]
        made = "#" + "".join(f"{c:02x}" for c in rgb)
    return made


def _readable_highlighting() -> str:
    """CSS that darkens each colour of the code highlighting (Pygments' default style, which
    nbconvert's page uses) that would read below 4.5:1 on the code's background."""
    from pygments.styles import get_style_by_name
    from pygments.token import STANDARD_TYPES

    style, rules = get_style_by_name("default"), []
    for token, css_class in sorted(STANDARD_TYPES.items(), key=lambda item: item[1]):
        colour = style.style_for_token(token).get("color")
        if css_class and colour and contrast(colour, CODE_BACKGROUND) < MIN_CONTRAST:
            rules.append(f".highlight .{css_class} {{ color: {_readable(colour)}; }}")
    return " ".join(rules)


# Every page reads under WCAG 2 AA (tests/integration/test_accessibility.py runs axe-core on them):
# code, links and labels at 4.5:1 or more, links underlined (told apart by more than colour).
READABLE_STYLE = (
    "<style>/* course: readable (WCAG 2 AA) */ a { color: #23527c; text-decoration: underline; } "
    "div.nbgrader_cell .panel-heading a { color: #fff; } li.late-penalty { color: "
    "#b52b27; } " + _readable_highlighting() + "</style>"
)
# the feedback page's styles after nbconvert's and nbgrader's own (so they win): long lines wrap,
# and it reads
PAGE_STYLES = WRAP_STYLE + "\n" + READABLE_STYLE


def has_images(nb) -> bool:
    """Whether a notebook's page may hold an ``<img>``: an image output, HTML that has one, a
    Markdown image, or an attachment."""
    for cell in nb.cells:
        if "<img" in cell.source.lower() or "![" in cell.source or cell.get("attachments"):
            return True
        for out in cell.get("outputs", []):
            for key, value in out.get("data", {}).items():
                if key.startswith("image/") or "<img" in str(value).lower():
                    return True
    return False


HTML_LANG = {"en": "en", "zh": "zh-CN"}  # an edition's language as a page's lang attribute


def html_lang(language: str) -> str:
    """The ``lang`` attribute of a page in ``language`` (an edition: ``en`` or ``zh``)."""
    return HTML_LANG.get(language, "en")


# a test cell's TODO, as its opening docstring names it (the same words in every edition): letters,
# digits, the middle dot and an identifier only, so it goes into the page as it is
TODO_TITLE = re.compile(r'\A\s*(?:"""|\'\'\')\s*(TODO [0-9]{1,3} · [A-Za-z_][A-Za-z0-9_]{0,60})\b')

# in the heading's score, when answers are pending
WAITING = "{points} point(s) wait for a person's grading"
# a pending answer's own heading
PENDING_HEADING = "Pending: a person grades it ({points} point(s))"


def number_shown(value) -> str:
    """A score as nbgrader's template writes it (``value | float | round(2)``: 1.0, 0.75)."""
    return str(round(float(value or 0), 2))


@dataclass
class PageView:
    """What a feedback page says besides its notebook, given to the template as ``resources.page``:
    its language (``lang``; ``words``: the edition's feedback translations, empty for English), the
    answers that wait for a person (``pending``: grade ids; ``waiting``: their points), the late
    line, its policy and styles. The template calls its methods for every label it writes."""

    lang: str = "en"
    words: dict[str, str] = field(default_factory=dict)
    pending: frozenset[str] = frozenset()
    waiting: float = 0.0
    late_line: str = ""
    csp_meta: str = field(default_factory=csp_meta)
    styles: str = PAGE_STYLES

    def say(self, key: str, **values) -> str:
        """``key`` (an English template) in the page's language, HTML-escaped, with ``values`` put
        in as they are."""
        try:
            return html.escape(self.words.get(key, key), quote=False).format(**values)
        except (KeyError, IndexError, ValueError):  # a translation that names other fields
            return html.escape(key, quote=False).format(**values)

    def test_cell(self, cell) -> str:
        """A test cell's entry in the page's list, named by the TODO it tests: the cell's opening
        docstring names it (``TODO 5 · decide_overlap: ...``); without one, ``Test cell``."""
        from ..publish.editions import TEST_CELL

        named = TODO_TITLE.match(cell.source)
        return self.say(TEST_CELL, todo=named.group(1)) if named else self.word("Test cell")

    def word(self, text: str) -> str:
        """A heading of nbgrader's template (``Test cell``, ``Student's answer``) in the page's
        language."""
        return html.escape(self.words.get(text, text), quote=False)

    def comment(self, text: str) -> str:
        """A cell's comment as the page shows it (markdown, rendered by the template): nbgrader's
        own comment on an answer left as released in the page's language; a person's as they wrote
        it."""
        from ..publish.editions import NO_RESPONSE

        return self.words.get(NO_RESPONSE, NO_RESPONSE) if text == NO_RESPONSE else text

    @staticmethod
    def _after_space(said: str) -> str:
        # no space before a full-width parenthesis
        return " " + said if said.startswith("(") else said

    def heading_score(self, score, max_score) -> str:
        """The notebook heading's score, with the points that wait for a person."""
        from ..publish.editions import SCORE_IN_PARENS, SCORE_WITH_PENDING

        scored = f"{score} / {max_score}"
        if self.waiting:
            pending = self.say(WAITING, points=f"{self.waiting:g}")
            return self._after_space(self.say(SCORE_WITH_PENDING, score=scored, pending=pending))
        return self._after_space(self.say(SCORE_IN_PARENS, score=scored))

    def list_score(self, cell) -> str:
        """A graded cell's score in the page's list (pending when it waits for a person)."""
        from ..publish.editions import PENDING_IN_PARENS, SCORE_IN_PARENS

        meta = cell.metadata.nbgrader
        if meta.get("grade_id") in self.pending:
            return self.say(PENDING_IN_PARENS, points=number_shown(meta.get("points")))
        return self._after_space(
            self.say(
                SCORE_IN_PARENS,
                score=f"{number_shown(meta.get('score'))} / {number_shown(meta.get('points'))}",
            )
        )

    def cell_score(self, cell) -> str:
        """A graded cell's score in its own heading (pending when it waits for a person)."""
        from ..publish.editions import SCORE

        meta = cell.metadata.nbgrader
        if meta.get("grade_id") in self.pending:
            return self.say(PENDING_HEADING, points=number_shown(meta.get("points")))
        return self.say(
            SCORE, score=f"{number_shown(meta.get('score'))} / {number_shown(meta.get('points'))}"
        )


# the feedback page's template: nbgrader's (its ``index.html.j2``), its labels, scores, language,
# late line, policy and styles from ``resources.page``
PAGE_TEMPLATE = "course_feedback.html.j2"
_PAGE_TEMPLATE_SOURCE = (Path(__file__).with_name("feedback.html.j2")).read_text(encoding="utf-8")


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter, less three costs that buy nothing on a feedback page:

    - templates compiled once per process (``_TEMPLATES``), whatever exporter renders a page
      (compiling the page's nine templates costs 0.2-0.4 s);
    - no second pass over a page without images: after rendering, nbconvert parses the whole
      page with BeautifulSoup to give images alt text and JupyterLab-template cells a tabindex,
      and writes it out again (0.2-0.5 s a page here). nbgrader's feedback template is the
      classic one (no JupyterLab cells), and a page without ``<img`` has nothing to change, so
      such a page is the rendered one as is; a page with an image takes nbconvert's whole path;
    - code highlighted and markdown rendered again for every student: a cell's HTML is kept by its
      source (``_Fragments``): the course's own cells are made for the first page of a batch
      only; about 0.2 s of CPU a student here.

    Its template is the course's (``feedback.html.j2``): what the page says besides its notebook
    comes in as ``resources.page`` (a :class:`PageView`); without one, an English page in the
    language of ``COURSE_LANG``'s edition for its ``lang``.
    """

    @default("template_file")
    def _template_file_default(self):
        return PAGE_TEMPLATE

    @default("extra_loaders")
    def _extra_loaders_default(self):
        return [DictLoader({PAGE_TEMPLATE: _PAGE_TEMPLATE_SOURCE})]

    def _init_resources(self, resources):
        from tools.i18n import language

        resources = super()._init_resources(resources)
        if not isinstance(resources.get("page"), PageView):
            resources["page"] = PageView(lang=html_lang(language()))
        return resources

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = _TEMPLATES
        return environment

    @pass_context
    def markdown2html(self, context, source):
        """nbconvert's markdown filter as the notebook has it written: math as MathML, the HTML
        sanitized after it is rendered (``markup.render_markdown``). Each result is kept by source
        and the exporter's options; a cell with attachments, or with images to embed, is rendered
        afresh."""
        cell = context.get("cell", {})
        options = {
            "attachments": cell.get("attachments", {}),
            "embed_images": self.embed_images,
            "path": context.get("resources", {}).get("metadata", {}).get("path", ""),
            "anchor_link_text": self.anchor_link_text,
            "exclude_anchor_links": self.exclude_anchor_links,
            **self.lexer_options,
        }
        if cell.get("attachments") or self.embed_images:
            return render_markdown(source, **options)
        key = (
            source,
            self.anchor_link_text,
            self.exclude_anchor_links,
            _options(self.lexer_options),
        )
        return _MARKDOWN.get(key, source, lambda: render_markdown(source, **options))

    def from_notebook_node(self, nb, resources=None, **kw):
        if has_images(nb):
            return super().from_notebook_node(nb, resources, **kw)
        # HTMLExporter.from_notebook_node's set-up (nbconvert 7), then the rendering alone
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        highlight_code = self.filters.get(
            "highlight_code", KeptHighlight2HTML(pygments_lexer=lexer, parent=self)
        )
        resources = self._init_resources(resources)
        filter_data_type = WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources
        )
        self.register_filter("highlight_code", highlight_code)
        self.register_filter("filter_data_type", filter_data_type)
        return TemplateExporter.from_notebook_node(self, nb, resources, **kw)


def _feedback_exporter() -> FeedbackExporter:
    """The exporter nbgrader's feedback step makes (its template and the paths it adds)."""
    from nbgrader.converters import generate_feedback

    templates = (
        Path(generate_feedback.__file__).resolve().parent.parent
        / "server_extensions"
        / "formgrader"
    )
    return FeedbackExporter(
        template_name="feedback",
        extra_template_basedirs=[str(templates / "templates")],
        extra_template_paths=[
            str(templates / "static" / "node_modules" / "bootstrap" / "dist" / "css")
        ],
    )


_PARENT_EXPORTER: list[FeedbackExporter] = []


def feedback_exporter() -> FeedbackExporter:
    """The exporter that renders feedback pages in this process (made once)."""
    if not _PARENT_EXPORTER:
        _PARENT_EXPORTER.append(_feedback_exporter())
    return _PARENT_EXPORTER[0]


_CSS: list[str] = []


def page_css() -> list[str]:
    """The styles nbconvert's CSSHTMLHeaderPreprocessor puts in a page (the code highlighting's),
    made once."""
    if not _CSS:
        from jupyter_core.paths import jupyter_config_dir
        from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor

        made = {"inlining": {}, "config_dir": jupyter_config_dir()}
        CSSHTMLHeaderPreprocessor(enabled=True).preprocess(None, made)
        _CSS.extend(made["inlining"].get("css", []))
    return list(_CSS)


# of nbgrader's resources, kept with a page's data
PAGE_DATA_KEYS = ("notebook", "score", "max_score", "late_penalty")


class PageDataExporter(NotebookExporter):
    """The exporter of the worker's feedback step (``c.GenerateFeedback.exporter_class``): no page,
    but the page's data, as JSON: the notebook as nbgrader's feedback preprocessors leave it (its
    scores from the gradebook, hidden tests cleared, errors shortened, outputs capped and
    sanitized) and nbgrader's scores of it. The grader renders the page from it once it knows the
    rest (``pages.write_feedback``)."""

    file_extension = ".json"

    def from_notebook_node(self, nb, resources=None, **kw):
        import nbformat

        # preprocessing only
        nb_copy, resources = Exporter.from_notebook_node(self, nb, resources, **kw)
        info = resources.get("nbgrader", {})
        data = {
            "notebook": nbformat.from_dict(nb_copy),
            "nbgrader": {key: info.get(key, 0) for key in PAGE_DATA_KEYS},
        }
        resources["output_extension"] = self.file_extension
        return json.dumps(data, ensure_ascii=False), resources


def base_style(width: str) -> str:
    """The instructor pages' shared styles (the class report, the similarity page): body, tables,
    numbers."""
    return (
        f"body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: "
        f"{width}; padding: 0 1em; color: #222; }}\n"
        "table { border-collapse: collapse; margin: 0.5em 0 1.5em; } td, th { border: 1px "
        "solid #ccc; padding: 0.2em 0.5em; }\n"
        "th { background: #f2f2f2; text-align: left; } td.n { text-align: right; "
        "font-variant-numeric: tabular-nums; }"
    )
