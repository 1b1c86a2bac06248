"""The learner runtime's language: English or Chinese (中文), from one set of sources.

The notebooks' code is the same in both editions but for one line: a translated edition's set-up
cell calls ``course_setup(language='zh')`` (the release writes it), so the kernel knows the edition
however the notebook was started (Jupyter, VS Code, nbclient, papermill, Colab, Kaggle); what a
learner reads is translated where it is shown. ``COURSE_LANG=zh|en`` overrides the edition (the
grader sets it to the edition a submission was written in); a notebook whose set-up cell has not
run yet falls back to its metadata (``metadata.course.language``) when the frontend names the file.
Translations are in ``tools/locale/<lang>/runtime.po`` (gettext PO, read with Babel): a string the
catalog lacks, or whose translation is fuzzy, stays English; nothing here ever raises because of a
translation.

- ``tr("English {n} text", n=3)``: a string of this package, translated, then formatted.
- ``localize(text)``: any text already rendered (a public check's message, a figure title): the
  catalog's exact entry, or a template entry whose ``{0}``, ``{1}``... match the values in it.
- ``install()``: for a Chinese edition, registers the course's CJK font with matplotlib and
  translates every figure's text as it is drawn.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
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
_edition: str | None = None


def _checked(language: str | None) -> str | None:
    if language is not None and language not in EDITIONS:
        raise ValueError(f"language must be one of {', '.join(EDITIONS)}, not {language!r}")
    return language


def set_language(language: str | None) -> None:
    """Choose the language for this process (None: back to the environment and the notebook)."""
    global _chosen
    _chosen = _checked(language)
    language_from_notebook.cache_clear()


def set_edition(language: str | None) -> None:
    """Record the edition the running notebook belongs to (its set-up cell says it): below
    set_language and COURSE_LANG, above the notebook's metadata. None forgets it."""
    global _edition
    _edition = _checked(language)


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
    """``en`` or ``zh``: set_language's choice, else COURSE_LANG, else the edition the set-up cell
    recorded (set_edition), else the notebook's metadata, else English."""
    if _chosen:
        return _chosen
    env = os.environ.get(ENV, "").strip().lower()
    if env.startswith("zh"):
        return "zh"
    if env.startswith("en"):
        return "en"
    return _edition or language_from_notebook() or "en"


@functools.lru_cache(maxsize=4)
def _catalog(language: str) -> tuple[dict[str, str], list[tuple[tuple, str]]]:
    """(exact English -> translation, [(template layout, translation)]) of one language."""
    path = runtime_catalog_path(language)
    exact: dict[str, str] = {}
    templates: list[tuple[tuple, str]] = []
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
            layout = _template_layout(message.id)
            if layout is not None:
                templates.append((layout, message.string))
    # the most specific template first: the most literal text
    templates.sort(key=lambda item: -sum(len(part) for part in item[0] if isinstance(part, str)))
    return exact, templates


def _template_layout(msgid: str) -> tuple | None:
    """A template with positional fields ``{0}``, ``{1}``... as a tuple of literal strings and field
    numbers (ints), two fields never adjacent; None for plain text or a template that is all fields."""
    try:
        parsed = list(string.Formatter().parse(msgid))
    except ValueError:
        return None
    layout: list = []
    for literal, field, _, _ in parsed:
        if literal:
            layout.append(literal)
        if field is not None:
            if not field.isdigit() or (layout and isinstance(layout[-1], int)):
                return None  # a named field (tr's own), or two values with nothing between them
            layout.append(int(field))
    if not any(isinstance(part, int) for part in layout) or not any(isinstance(part, str) and part.strip() for part in layout):
        return None
    return tuple(layout)


def _match(layout: tuple, text: str) -> dict[int, str] | None:
    """The values of ``text`` for a template layout, or None. Left to right, each value ends at the
    first place its following literal text occurs (the last literal must end the text): linear in
    the text's length, whatever the template, unlike a regular expression with several lazy groups.
    A value never spans a line break unless the template's text does."""
    multiline = any(isinstance(part, str) and "\n" in part for part in layout)
    values: dict[int, str] = {}
    pos, pending = 0, None
    for index, part in enumerate(layout):
        if isinstance(part, int):
            pending = part
            continue
        if pending is None:
            if not text.startswith(part, pos):
                return None
            found = pos
        elif index == len(layout) - 1:
            found = len(text) - len(part)
            if found <= pos or not text.endswith(part):
                return None
        else:
            found = text.find(part, pos + 1)
            if found < 0:
                return None
        if pending is not None:
            values[pending] = text[pos:found]
            if not multiline and "\n" in values[pending]:
                return None
            pending = None
        pos = found + len(part)
    if pending is not None:
        if pos >= len(text) or (not multiline and "\n" in text[pos:]):
            return None
        values[pending] = text[pos:]
    elif pos != len(text):
        return None
    return values


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
    for layout, translated in templates:
        values = _match(layout, text)
        if values is not None:
            try:
                return translated.format(*(values.get(i, "") for i in range(max(values) + 1)))
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
        # the course ships the regular weight only: bold Chinese (a bold title) is drawn in it, without
        # matplotlib's "Failed to find font weight bold" warning on every figure
        regular = next(f for f in font_manager.fontManager.ttflist if f.name == FONT_FAMILY)
        font_manager.fontManager.ttflist.append(dataclasses.replace(regular, weight=700))
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
    if not getattr(original, "_course_localized", False):  # once per process, whatever re-imports this module

        @functools.wraps(original)
        def print_figure(self, *args, **kwargs):
            localize_figure(self.figure)
            return original(self, *args, **kwargs)

        print_figure._course_localized = True
        FigureCanvasBase.print_figure = print_figure
    _localize_notebook_prints()
    _installed = True
    return lang


def _localize_notebook_prints() -> None:
    """The notebook's own ``print("...")`` lines (the same code in both editions) in the learner's
    language: the kernel's namespace gets a ``print`` that passes one string argument through
    :func:`localize` (text the catalog does not know is printed as it is)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    import builtins

    def print_localized(*args, **kwargs):
        if len(args) == 1 and isinstance(args[0], str):
            args = (localize(args[0]),)
        return builtins.print(*args, **kwargs)

    shell.user_ns["print"] = print_localized
