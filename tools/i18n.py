"""The learner runtime's language: English or Chinese (中文), from one set of sources.

The notebooks' code is the same in both editions; what a learner reads is translated where it is
shown. The edition comes from the running notebook's metadata (``metadata.course.language``, which
the release writes), and ``COURSE_LANG=zh|en`` overrides it (the grader sets it to the edition a
submission was written in). Translations are in ``tools/locale/<lang>/runtime.po`` (gettext PO,
read with Babel): a string the catalog lacks, or whose translation is fuzzy, stays English; nothing
here ever raises because of a translation.

- ``tr("English {n} text", n=3)``: a string of this package, translated, then formatted.
- ``localize(text)``: any text already rendered (a public check's message, a figure title): the
  catalog's exact entry, or a template entry whose ``{0}``, ``{1}``... match the values in it.
- ``install()``: for a Chinese edition, registers the course's CJK font with matplotlib and
  translates every figure's text as it is drawn.
"""

from __future__ import annotations

import functools
import json
import os
import re
import string
from pathlib import Path

EDITIONS = ("en", "zh")
ENV = "COURSE_LANG"
FONT_FILE = Path(__file__).with_name("fonts") / "CourseSansCJK-Subset.otf"
FONT_FAMILY = "Course Sans CJK"


def runtime_catalog_path(language: str, tools_dir: Path | None = None) -> Path:
    return (tools_dir or Path(__file__).parent) / "locale" / language / "runtime.po"


def notebook_language(notebook: dict | None) -> str | None:
    """The edition a notebook's metadata records (None when it records none)."""
    if not isinstance(notebook, dict):
        return None
    course = notebook.get("metadata", {}).get("course", {})
    language = course.get("language") if isinstance(course, dict) else None
    return language if language in EDITIONS else None


_chosen: str | None = None


def set_language(language: str | None) -> None:
    """Choose the language for this process (None: back to the environment and the notebook)."""
    global _chosen
    if language is not None and language not in EDITIONS:
        raise ValueError(f"language must be one of {', '.join(EDITIONS)}, not {language!r}")
    _chosen = language
    language_from_notebook.cache_clear()


@functools.lru_cache(maxsize=1)
def language_from_notebook() -> str | None:
    from .notebook_runtime import running_notebook

    path = running_notebook()
    if path is None:
        return None
    try:
        return notebook_language(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def language() -> str:
    """``en`` or ``zh``: set_language's choice, else COURSE_LANG, else the notebook's metadata, else English."""
    if _chosen:
        return _chosen
    env = os.environ.get(ENV, "").strip().lower()
    if env.startswith("zh"):
        return "zh"
    if env.startswith("en"):
        return "en"
    return language_from_notebook() or "en"


@functools.lru_cache(maxsize=4)
def _catalog(language: str) -> tuple[dict[str, str], list[tuple[re.Pattern, str]]]:
    """(exact English -> translation, [(template pattern, translation)]) of one language."""
    path = runtime_catalog_path(language)
    exact: dict[str, str] = {}
    templates: list[tuple[re.Pattern, str]] = []
    if language == "en" or not path.is_file():
        return exact, templates
    try:
        from babel.messages.pofile import read_po

        with open(path, "rb") as handle:
            catalog = read_po(handle, locale=language)
    except Exception:  # a broken catalog on a learner's machine: English, never a crash
        return exact, templates
    for message in catalog:
        if message.id and message.string and not message.fuzzy and isinstance(message.id, str):
            exact[message.id] = message.string
            pattern = _template_pattern(message.id)
            if pattern is not None:
                templates.append((pattern, message.string))
    templates.sort(key=lambda item: -len(item[0].pattern))  # the most specific template first
    return exact, templates


def _template_pattern(msgid: str) -> re.Pattern | None:
    """A regex for a template with positional fields ``{0}``, ``{1}``...; None for plain text."""
    try:
        parsed = list(string.Formatter().parse(msgid))
    except ValueError:
        return None
    fields = [f for _, f, _, _ in parsed if f is not None]
    if not fields or not all(f.isdigit() for f in fields):
        return None
    parts = []
    for literal, field, _, _ in parsed:
        parts.append(re.escape(literal))
        if field is not None:
            parts.append(f"(?P<v{field}>.+?)")
    try:
        return re.compile("".join(parts) + r"\Z", re.S)
    except re.error:  # a field used twice
        return None


def N_(text: str) -> str:
    """Mark ``text`` for the catalog without translating it here: a label kept in a table (a
    figure's legend entry, a widget's title) that is translated where it is shown."""
    return text


def tr(text: str, **values) -> str:
    """This package's string ``text`` in the learner's language, formatted with ``values``."""
    translated = _catalog(language())[0].get(text, text) if language() != "en" else text
    if not values:
        return translated
    try:
        return translated.format(**values)
    except (KeyError, IndexError, ValueError):  # a translation that lost a field: the English
        return text.format(**values)


def localize(text: str) -> str:
    """Text already rendered, in the learner's language (unchanged when nothing matches)."""
    if not text or language() == "en":
        return text
    exact, templates = _catalog(language())
    if text in exact:
        return exact[text]
    stripped = text.strip()
    if stripped != text and stripped in exact:
        return text.replace(stripped, exact[stripped])
    for pattern, translated in templates:
        match = pattern.match(text)
        if match:
            values = [match.group(f"v{i}") for i in range(len(match.groupdict()))]
            try:
                return translated.format(*values)
            except (IndexError, KeyError, ValueError):
                return text
    return text


def localize_figure(fig) -> None:
    """Translate every text of a matplotlib figure in place (titles, labels, legends, annotations)."""
    from matplotlib.text import Text

    for artist in fig.findobj(Text):
        text = artist.get_text()
        if text:
            translated = "\n".join(localize(line) for line in text.split("\n")) if "\n" in text else localize(text)
            if translated == text and "\n" in text:
                translated = localize(text)
            if translated != text:
                artist.set_text(translated)


def use_course_font() -> bool:
    """Register the CJK font the course ships and make matplotlib fall back to it glyph by glyph."""
    if not FONT_FILE.is_file():
        return False
    from matplotlib import font_manager, rcParams

    if FONT_FAMILY not in {f.name for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(FONT_FILE))
    # a generic family ("sans-serif") resolves to one font only: name them, so that a character
    # DejaVu Sans lacks is drawn from the CJK font (glyph-by-glyph fallback, Matplotlib >= 3.6)
    chosen = [f for f in rcParams["font.family"] if f not in ("sans-serif", "serif", "monospace", FONT_FAMILY)]
    rcParams["font.family"] = [*(chosen or ["DejaVu Sans"]), FONT_FAMILY]
    return True


_installed = False


def install() -> str:
    """Set up figures for the learner's language; returns the language. Idempotent."""
    global _installed
    lang = language()
    if lang == "en" or _installed:
        return lang
    use_course_font()
    from matplotlib.backend_bases import FigureCanvasBase

    original = FigureCanvasBase.print_figure

    @functools.wraps(original)
    def print_figure(self, *args, **kwargs):
        localize_figure(self.figure)
        return original(self, *args, **kwargs)

    FigureCanvasBase.print_figure = print_figure
    _installed = True
    return lang
