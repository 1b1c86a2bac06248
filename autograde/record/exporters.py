"""The exporter nbgrader's feedback step uses (``c.GenerateFeedback.exporter_class``)."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

from jinja2 import BytecodeCache, DictLoader, pass_context
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from traitlets import default


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

    The cells a learner did not change are the same on every student's page: the worker server
    renders the course's own once (``warm_feedback``), and every worker forked from it finds them
    made. Bounded: a source longer than ``FRAGMENT_MAX_SOURCE`` is never kept (a learner's huge
    output or cell), and past ``FRAGMENTS_KEPT`` entries or ``FRAGMENTS_MAX_CHARS`` characters of
    HTML it starts again, empty."""

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
        if magics is not _ABSENT and not isinstance(magics, str):  # null or odd: nbconvert's own path
            return super().__call__(source, language, metadata)
        key = (source, language or self.pygments_lexer, None if magics is _ABSENT else magics, _options(self.extra_formatter_options))
        return _HIGHLIGHTED.get(key, source, lambda: Highlight2HTML.__call__(self, source, language, metadata))


# No script may run in a page the grader writes: a learner's output or markdown that slipped
# past sanitizing stays inert. The page needs none (without MathJax, math shows as TeX source).
FEEDBACK_POLICY = "script-src 'none'; object-src 'none'; frame-src 'none'; base-uri 'none'; form-action 'none'"
_SPACE = r"[ \t\n\f\r]*"  # HTML's whitespace only: any other text there would open the body
# the opening our pages' templates write; the attribute pattern cannot hide a '>'
_OPENING = re.compile(rf'\A\ufeff?{_SPACE}(?:<!DOCTYPE html>{_SPACE})?<html(?: lang="[A-Za-z-]*")?>{_SPACE}<head>', re.I)
_DOCTYPE = re.compile(rf"\A\ufeff?{_SPACE}<!DOCTYPE[^>]*>", re.I)  # a doctype ends at its first '>', quoted or not


def add_csp(html_text: str, policy: str = FEEDBACK_POLICY) -> str:
    """``html_text`` with a Content-Security-Policy ``<meta>`` as the first element of its head.

    A policy given in a ``<meta>`` covers only what the browser parses after it, so it goes
    before the title (which can quote a notebook's name) and before every script. A page that
    does not open with the plain doctype, ``<html>`` and ``<head>`` of our templates gets it
    straight after its doctype, or at its very start: the browser puts a leading ``<meta>`` in
    the head it opens, and no attribute of the page can swallow it. Added once."""
    content = html.escape(policy, quote=False).replace('"', "&quot;")  # its quotes stay as they are
    meta = f'<meta http-equiv="Content-Security-Policy" content="{content}">'
    opening = _OPENING.match(html_text) or _DOCTYPE.match(html_text)
    at = opening.end() if opening else 0
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


def add_wrapping(html_text: str) -> str:
    """``html_text`` with :data:`WRAP_STYLE` last in its head (after nbconvert's own styles, so it
    wins), or unchanged when it has no ``</head>`` or has the style already."""
    if WRAP_STYLE in html_text:
        return html_text
    at = html_text.lower().find("</head>")
    return html_text if at < 0 else html_text[:at] + WRAP_STYLE + html_text[at:]


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


# nbgrader's feedback page (its template's ``index.html.j2``), whose ``<html>`` carries no language,
# with the language of the submission's edition (``resources.html_lang``, FeedbackExporter's)
PAGE_TEMPLATE = "course_feedback.html.j2"
_PAGE_TEMPLATE_SOURCE = (
    "{%- extends 'index.html.j2' -%}\n"
    "{%- block header -%}{{ super() | replace('<html>', '<html lang=\"' ~ resources.html_lang ~ '\">', 1) }}{%- endblock header -%}\n"
)


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter, less three costs that buy nothing on a feedback page:

    - templates compiled once per process: nbgrader makes a new exporter for every page, and
      each compiled the page's nine templates again (0.2-0.4 s a notebook);
    - no second pass over a page without images: after rendering, nbconvert parses the whole
      page with BeautifulSoup to give images alt text and JupyterLab-template cells a tabindex,
      and writes it out again (0.2-0.5 s a page here). nbgrader's feedback template is the
      classic one (no JupyterLab cells), and a page without ``<img`` has nothing to change, so
      such a page is the rendered one as is; a page with an image takes nbconvert's whole path;
    - code highlighted and markdown rendered again for every student: a cell's HTML is kept by its
      source (``_Fragments``), and the course's own cells are made before any worker starts
      (``warm_feedback``); about 0.2 s of CPU a student here.

    Its page says its language: ``<html lang="zh-CN">`` for a Chinese submission (the worker sets
    ``COURSE_LANG`` to the submission's edition), ``lang="en"`` for an English one.
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
        resources["html_lang"] = html_lang(language())
        return resources

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = _TEMPLATES
        return environment

    @pass_context
    def markdown2html(self, context, source):
        """nbconvert's markdown filter, each result kept by source and the exporter's options; a
        cell with attachments, or with images to embed, is rendered afresh."""
        if context.get("cell", {}).get("attachments") or self.embed_images:
            return super().markdown2html(context, source)
        key = (source, self.anchor_link_text, self.exclude_anchor_links, _options(self.lexer_options))
        return _MARKDOWN.get(key, source, lambda: HTMLExporter.markdown2html(self, context, source))

    def from_notebook_node(self, nb, resources=None, **kw):
        if has_images(nb):
            return super().from_notebook_node(nb, resources, **kw)
        # HTMLExporter.from_notebook_node's set-up (nbconvert 7), then the rendering alone
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        highlight_code = self.filters.get("highlight_code", KeptHighlight2HTML(pygments_lexer=lexer, parent=self))
        resources = self._init_resources(resources)
        filter_data_type = WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self, resources=resources)
        self.register_filter("highlight_code", highlight_code)
        self.register_filter("filter_data_type", filter_data_type)
        return TemplateExporter.from_notebook_node(self, nb, resources, **kw)


def _feedback_exporter() -> FeedbackExporter:
    """The exporter nbgrader's feedback step makes (its template and the paths it adds)."""
    from nbgrader.converters import generate_feedback

    templates = Path(generate_feedback.__file__).resolve().parent.parent / "server_extensions" / "formgrader"
    return FeedbackExporter(
        template_name="feedback",
        extra_template_basedirs=[str(templates / "templates")],
        extra_template_paths=[str(templates / "static" / "node_modules" / "bootstrap" / "dist" / "css")],
    )


def warm_feedback(notebooks=()) -> None:
    """Make, in this process, what a worker's feedback pages would otherwise make again for every
    student: the page's compiled templates (kept in ``_TEMPLATES``), the notebook schema's
    validator, the code highlighter and the markdown renderer (rendering a two-cell notebook makes
    them), and the rendered code and markdown of ``notebooks`` (paths: the course's release) as a
    page shows them, visible checks with their hidden-tests line and markdown sanitized as the
    feedback step sanitizes it. The worker server calls it once per grading run
    (``autograde.record.warm``), so every worker forked from it starts with them. Nothing here may
    fail the server: any error only means a worker makes them itself."""
    try:
        import nbformat
        from nbconvert.preprocessors.sanitize import SanitizeHTML

        from ..model import with_hidden_note

        exporter = _feedback_exporter()
        nb = nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_markdown_cell("# A heading\n\nSome *text*."), nbformat.v4.new_code_cell("x = 1  # code\nprint(x)")],
            metadata={"language_info": {"name": "python", "pygments_lexer": "ipython3"}},
        )
        nbformat.validate(nb)
        exporter.from_notebook_node(nb, {"nbgrader": {"notebook": "warm", "score": 0, "max_score": 0, "late_penalty": 0}})
        sanitize = SanitizeHTML(enabled=True)
        # a graded notebook's language is the grading kernel's (IPython's), whatever the file said
        highlight = KeptHighlight2HTML(pygments_lexer="ipython3", parent=exporter)
        for path in notebooks:
            nb = nbformat.read(path, 4)
            for index, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    highlight(with_hidden_note(cell), None, cell.metadata)
                elif cell.cell_type == "markdown":
                    cell, _ = sanitize.preprocess_cell(cell, {}, index)
                    exporter.markdown2html({"cell": cell}, cell.source)
    except Exception:
        pass


WAITING = "{points} point(s) wait for a person's grading"  # grading.mark_pending's note in a heading
_NUMBER = r"-?[0-9]+(?:\.[0-9]+)?"
_SCORE = rf"{_NUMBER}(?: / {_NUMBER})?"


def localize_labels(text: str, words: dict[str, str]) -> str:
    """A feedback page's score lines, grade-cell labels, pending answers, "(Top)" links (``editions.LABELS``) and the
    hidden-tests note of its visible checks (``model.HIDDEN_NOTE``) in the language of ``words`` (its
    edition's feedback translations); a label whose key ``words`` lacks stays as it is."""
    from ..model import HIDDEN_NOTE_TEXT
    from ..publish.editions import GRADE_CELL, LATE_PENALTY, PENDING_IN_PARENS, SCORE, SCORE_IN_PARENS, SCORE_WITH_PENDING, TOP

    def fill(key: str, **values: str) -> str | None:
        if key not in words:
            return None
        try:
            return html.escape(words[key], quote=False).format(**values)
        except (KeyError, IndexError, ValueError):
            return None

    def in_parens(m: re.Match) -> str:
        pending = fill(WAITING, points=m.group(3)) if m.group(3) else None
        said = fill(SCORE_WITH_PENDING, score=m.group(2), pending=pending) if pending else fill(SCORE_IN_PARENS, score=m.group(2))
        if said is None:
            return m.group(0)
        return (m.group(1) if said.startswith("(") else "") + said  # no space before a full-width parenthesis

    # nbgrader's late line in the page's list (before the score lines: it holds one)
    text = re.sub(
        rf'(<li class="late-penalty">)Late submission penalty \(Score: -({_NUMBER})\)(</li>)',
        lambda m: m.group(1) + (fill(LATE_PENALTY, points=m.group(2)) or m.group(0)[len(m.group(1)) : -len(m.group(3))]) + m.group(3),
        text,
    )
    if HIDDEN_NOTE_TEXT in words:
        text = text.replace(html.escape(HIDDEN_NOTE_TEXT, quote=False), html.escape(words[HIDDEN_NOTE_TEXT], quote=False))
    text = re.sub(rf"( ?)\(Score: ({_SCORE})(?:; ({_NUMBER}) point\(s\) wait for a person's grading)?\)", in_parens, text)
    text = re.sub(rf"Score: ({_SCORE})", lambda m: fill(SCORE, score=m.group(1)) or m.group(0), text)
    text = re.sub(
        r'(<span class="nbgrader-label">)Grade cell: (<code>[^<]{0,200}</code>)(</span>)',
        lambda m: m.group(1) + (fill(GRADE_CELL, grade_id=m.group(2)) or m.group(0)[len(m.group(1)) : -len(m.group(3))]) + m.group(3),
        text,
    )
    # a pending answer in the page's list, its parentheses those of the language (Chinese: full-width, no space before)
    pending = re.escape(PENDING_IN_PARENS).replace(re.escape("{points}"), f"({_NUMBER})")

    def in_list(m: re.Match) -> str:
        said = fill(PENDING_IN_PARENS, points=m.group(2))
        return m.group(0) if said is None else m.group(1) + said + m.group(3)

    text = re.sub(rf"(</a>){pending}(</li>)", in_list, text)
    top = fill(TOP)
    return text.replace('<a href="#top">(Top)</a>', f'<a href="#top">{top}</a>') if top else text


def base_style(width: str) -> str:
    """The instructor pages' shared styles (the class report, the similarity page): body, tables, numbers."""
    return (
        f"body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: {width}; padding: 0 1em; color: #222; }}\n"
        "table { border-collapse: collapse; margin: 0.5em 0 1.5em; } td, th { border: 1px solid #ccc; padding: 0.2em 0.5em; }\n"
        "th { background: #f2f2f2; text-align: left; } td.n { text-align: right; font-variant-numeric: tabular-nums; }"
    )


def write_page_and_numbers(out: Path, name: str, page: str, data: dict) -> tuple[Path, Path]:
    """OUT/<name>.html and OUT/<name>.json, each written whole or not at all. Returns their paths."""
    from tools.project_runtime import write_json_atomic

    target = out / f"{name}.html"
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, target)
    return target, Path(write_json_atomic(out / f"{name}.json", data))
