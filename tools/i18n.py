"""The learner runtime's language: English or Chinese (中文), from one set of sources.

The notebooks' code is the same in both editions but for one line: a translated edition's set-up
cell calls ``course_setup(language='zh')`` (the release writes it), so the kernel knows the edition
however the notebook was started (Jupyter, VS Code, nbclient, papermill, Colab, Kaggle).
``COURSE_LANG=zh|en`` overrides the edition (the grader sets it to the edition a submission was
written in); a notebook whose set-up cell has not run yet falls back to its metadata
(``metadata.course.language``) when the frontend names the file. Translations are in
``tools/locale/<lang>/runtime.po`` (gettext PO, read with Babel): a string the catalog lacks, or
whose translation is fuzzy, stays English; nothing here ever raises because of a translation.

One mechanism: every text the runtime or a notebook's code prints or draws is a catalog template
looked up where the text is made, with its values:

- ``tr("English {n} text", n=3)``: the template in the learner's language, formatted (a string
  value padded to a width, ``{name:>16}``, is padded by the columns it takes: a Chinese character
  takes two, so a table's columns stay aligned in either language);
- ``say(...)``: ``print(tr(...))``, what the notebooks' code cells print with;
- ``Message("...", n=3)``: a template and its values kept for later (a result's reason, a
  measurement's warning), rendered in the learner's language where it is shown (``str``), in
  English where it is recorded (``english``); ``joined`` puts several together with a catalog
  joiner (``{first}; {second}``), so a Chinese sentence gets Chinese punctuation;
- ``N_("label")``: a label marked for the catalog where it is written (a dictionary of lane names,
  a legend's entries), translated with ``tr`` where it is drawn.

``localize(text)`` is only for text the runtime did not make: a public check's assertion message
(the graded cell's own f-string, which the judge reads in English), a scaffold's error raised from
the learner's answer cell, an exception caught from the learner's code or from a library. It
finds the catalog's exact entry, or a template entry whose ``{0}``, ``{1}``... match the values in
it; anything else is shown as it is.

``install()``: for a Chinese edition, registers the course's CJK font with matplotlib.
"""

from __future__ import annotations

import functools
import json
import string
import unicodedata
from pathlib import Path

from . import settings
from .frontend import running_notebook

EDITIONS = ("en", "zh")
# "context\x04text": a template that shares its English with another but not its translation (a
# list's comma and a sentence's); gettext's own separator (its msgctxt, then the msgid)
CONTEXT = "\x04"
ENV = settings.LANGUAGE
FONT_FILE = Path(__file__).with_name("fonts") / "CourseSansCJK-Subset.otf"
BOLD_FONT_FILE = FONT_FILE.with_name("CourseSansCJK-Bold-Subset.otf")
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
    env = settings.language()
    if env.startswith("zh"):
        return "zh"
    if env.startswith("en"):
        return "en"
    return _edition or language_from_notebook() or "en"


@functools.lru_cache(maxsize=4)
def _catalog(language: str) -> tuple[dict[str, str], list[tuple[tuple, str]]]:
    """(exact English -> translation, [(template layout, translation)]) of one language: the
    layouts are the positional templates (``{0}``...) that ``localize`` matches."""
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
            # a template whose English another one shares: keyed as gettext keys it
            if message.context:
                exact[message.context + CONTEXT + message.id] = message.string
                continue
            exact[message.id] = message.string
            msgid, translated = _merge_adjacent_fields(message.id, message.string)
            layout = _template_layout(msgid)
            if layout is not None:
                templates.append((layout, translated))
    # the most specific template first: the most literal text
    templates.sort(key=lambda item: -sum(len(part) for part in item[0] if isinstance(part, str)))
    return exact, templates


# ---------------------------------------------------------------- text the runtime makes: tr, say,
# Message


def N_(text: str) -> str:
    """Mark ``text`` for the catalog without translating it here: a label kept in a table (a
    figure's legend entry, a lane's name) that is translated with ``tr`` where it is shown."""
    return text


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospaced output: a Chinese (wide) character takes two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


class _Formatter(string.Formatter):
    """``str.format`` for one language: a ``Message`` value rendered in that language, and a string
    value padded by the columns it takes (``{name:>16}``) rather than by its characters."""

    def __init__(self, language: str):
        self.language = language

    def format_field(self, value, format_spec: str):
        if isinstance(value, Message):
            value = value.render(self.language)
        if isinstance(value, str) and format_spec:
            return _pad(value, format_spec)
        return format(value, format_spec)


def _pad(text: str, spec: str) -> str:
    """``format(text, spec)`` for a fill, an alignment and a width, the width counted in columns."""
    import re

    found = re.fullmatch(r"(?:(.)?([<>^]))?(\d+)", spec)
    if not found:
        return format(text, spec)
    fill, align, width = found.group(1) or " ", found.group(2) or "<", int(found.group(3))
    missing = width - display_width(text)
    if missing <= 0:
        return text
    if align == "<":
        return text + fill * missing
    if align == ">":
        return fill * missing + text
    return fill * (missing // 2) + text + fill * (missing - missing // 2)


def _render(text: str, language: str, values: dict) -> str:
    english = text.split(CONTEXT, 1)[-1]
    translated = _catalog(language)[0].get(text, english) if language != "en" else english
    if not values:
        return translated
    try:
        return _Formatter(language).format(translated, **values)
    # a translation that lost a field: the English
    except (KeyError, IndexError, ValueError, AttributeError):
        return _Formatter(language).format(english, **values)


def tr(text: str, /, **values) -> str:
    """This package's string ``text`` in the learner's language, formatted with ``values``."""
    return _render(text, language(), values)


def say(text: str, /, **values) -> None:
    """Print ``tr(text, **values)``: how the notebooks' code cells print a line."""
    print(_render(text, language(), values))


class Message:
    """A catalog template and its values, rendered where it is shown: ``str(message)`` in the
    learner's language, ``message.english()`` in English (what a result file records). A value may
    be a Message itself (rendered in the same language)."""

    __slots__ = ("template", "values")

    def __init__(self, template: str, /, **values):
        self.template, self.values = template, values

    def render(self, language: str) -> str:
        return _render(self.template, language, self.values)

    def english(self) -> str:
        return self.render("en")

    def __str__(self) -> str:
        return self.render(language())

    def __repr__(self) -> str:
        return f"Message({self.template!r}, {self.values!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Message) and (self.template, self.values) == (
            other.template,
            other.values,
        )

    def __hash__(self) -> int:
        return hash(self.template)


# joiners, as catalog templates: each language joins a sentence's parts with its own punctuation
AND = N_("{first} and {second}")
COMMA = N_("{first}, {second}")
SEMICOLON = N_("{first}; {second}")
SENTENCES = N_("{first}. {second}")
LIST = N_("list\x04{first}, {second}")  # an enumeration of names (Chinese: 、)


def joined(parts, joiner: str = COMMA):
    """``parts`` (strings or Messages) joined pairwise with ``joiner`` (a catalog template with
    ``{first}`` and ``{second}``): a Message, or the one part, or "" when there is none."""
    parts = list(parts)
    if not parts:
        return ""
    result = parts[0]
    for part in parts[1:]:
        result = Message(joiner, first=result, second=part)
    return result


def english(value) -> str:
    """A Message's English (what a record keeps); anything else as a string."""
    return value.english() if isinstance(value, Message) else str(value)


# ---------------------------------------------------------------- text from outside the runtime:
# localize


def _merge_adjacent_fields(msgid: str, translated: str) -> tuple[str, str]:
    """A template with values side by side (``{2}{3}{4}``, a sentence's optional clauses) read as
    one value in the first field, where the translation keeps them side by side in the same order;
    otherwise unchanged."""
    import re

    for run in re.findall(r"(?<!\{)(?:\{\d+\}){2,}(?!\})", msgid):
        if run in translated:
            first = run[: run.index("}") + 1]
            msgid, translated = msgid.replace(run, first), translated.replace(run, first)
    return msgid, translated


def _template_layout(msgid: str) -> tuple | None:
    """A template's literal strings and fields, in order: a positional field (``{0}``) as its number
    (an int), a named one (``{error}``) as a 1-tuple of its name; two fields never adjacent. None
    for plain text, a field with a format (``{name:>9}``: padding cannot be read back), or a
    template that is all fields."""
    try:
        parsed = list(string.Formatter().parse(msgid))
    except ValueError:
        return None
    layout: list = []
    for literal, field, spec, conversion in parsed:
        if literal:
            layout.append(literal)
        if field is not None:
            if (
                not field
                or spec
                or conversion
                or (layout and not isinstance(layout[-1], str))
                or not (field.isdigit() or field.isidentifier())
            ):
                return None
            layout.append(int(field) if field.isdigit() else (field,))
    if all(isinstance(part, str) for part in layout) or not any(
        isinstance(part, str) and part.strip() for part in layout
    ):
        return None
    return tuple(layout)


def _match(layout: tuple, text: str) -> dict | None:
    """The values of ``text`` for a template layout, by field (a number, or a name), or None. Left
    to right, each value ends at the first place its following literal text occurs (the last literal
    must end the text): linear in the text's length, whatever the template, unlike a regular
    expression with several lazy groups. A value never spans a line break unless the template's text
    does."""
    multiline = any(isinstance(part, str) and "\n" in part for part in layout)
    values: dict = {}
    pos, pending = 0, None
    for index, part in enumerate(layout):
        if not isinstance(part, str):
            pending = part if isinstance(part, int) else part[0]
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


def error_text(exc: BaseException) -> str:
    """``ValueError: its message``: an exception caught from the learner's code or a library, its
    message in the learner's language where the catalog knows it (``localize``)."""
    return f"{type(exc).__name__}: {localize(str(exc))}"


def _has_letters(text: str) -> bool:
    return any("a" <= ch.lower() <= "z" for ch in text)


def localize(text: str) -> str:
    """Text the runtime did not make (an assertion's message, an exception's), in the learner's
    language: the catalog's exact entry, else the template entry whose literal text matches it, its
    values kept as they are but a value that is a description of its own (``_described``); the text
    unchanged when nothing matches."""
    if not text or language() == "en" or not _has_letters(text):
        return text
    found = _looked_up(text)
    return text if found is None else found


def _looked_up(text: str, nested: bool = False) -> str | None:
    """``text`` from the catalog (its exact entry, or a template whose literal text matches it), or
    None. ``nested``: ``text`` is a value inside a matched message, so a template of punctuation
    alone (a joiner such as ``{0} ({1})``) is no match: a value is split only by a sentence."""
    exact, templates = _catalog(language())
    if text in exact:
        return exact[text]
    stripped = text.strip()
    if stripped != text and stripped in exact:
        return text.replace(stripped, exact[stripped])
    for layout, translated in templates:
        if nested and not any(isinstance(part, str) and _is_phrase(part) for part in layout):
            continue
        values = _match(layout, text)
        if values is not None:
            values = {key: _described(value) for key, value in values.items()}
            numbered = [key for key in values if isinstance(key, int)]
            try:
                return translated.format(
                    *(values.get(i, "") for i in range(max(numbered) + 1 if numbered else 0)),
                    **{k: v for k, v in values.items() if isinstance(k, str)},
                )
            except (IndexError, KeyError, ValueError):
                return text
    return None


def _is_phrase(text: str) -> bool:
    """Words a person reads: a word of three letters or more, and a space."""
    return " " in text.strip() and any(
        len(word) >= 3 and word.isascii() and word.isalpha() for word in text.split()
    )


def _described(value: str) -> str:
    """A value of a matched message in the learner's language when it is a description the catalog
    knows as text of its own (a public check's ``what``: ``end (prefill end + exposed)``, nested in
    ``{0}: expected {1} ms, got {2}``); anything else as it is: a number, a code value such as
    ``wait``, a learner's repr."""
    if not _is_phrase(value):
        return value
    found = _looked_up(value, nested=True)
    return value if found is None else found


# ---------------------------------------------------------------- the font


def use_course_font() -> bool:
    """Register the CJK font the course ships and make matplotlib fall back to it glyph by glyph."""
    if not FONT_FILE.is_file():
        return False
    from matplotlib import font_manager, rcParams

    registered = {f.fname for f in font_manager.fontManager.ttflist}
    # regular and bold: a bold title is bold in Chinese too
    for file in (FONT_FILE, BOLD_FONT_FILE):
        if file.is_file() and str(file) not in registered:
            font_manager.fontManager.addfont(str(file))
    # a generic family ("sans-serif") resolves to one font only: name them, so that a character
    # DejaVu Sans lacks is drawn from the CJK font (glyph-by-glyph fallback, Matplotlib >= 3.6)
    chosen = [
        f
        for f in rcParams["font.family"]
        if f not in ("sans-serif", "serif", "monospace", FONT_FAMILY)
    ]
    rcParams["font.family"] = [*(chosen or ["DejaVu Sans"]), FONT_FAMILY]
    return True


def install() -> str:
    """Set up figures for the learner's language (the course's CJK font for Chinese); returns the
    language. Idempotent; the text itself is translated where it is made (``tr``)."""
    lang = language()
    if lang != "en":
        # every time (cheap): a font list reset since the first call gets the course's font back
        use_course_font()
    return lang
