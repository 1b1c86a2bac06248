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

import functools
import json
import string
from pathlib import Path

from . import settings
from .frontend import running_notebook

EDITIONS = ("en", "zh")
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
            msgid, translated = _merge_adjacent_fields(message.id, message.string)
            layout = _template_layout(msgid)
            if layout is not None and not _spaced_values(layout):
                templates.append((layout, translated))
    # the most specific template first: the most literal text
    templates.sort(key=lambda item: -sum(len(part) for part in item[0] if isinstance(part, str)))
    return exact, templates


def _merge_adjacent_fields(msgid: str, translated: str) -> tuple[str, str]:
    """A template with values side by side (``{2}{3}{4}``, a sentence's optional clauses) read as
    one value in the first field, where the translation keeps them side by side in the same order
    (the value is then localized as a whole); otherwise unchanged."""
    import re

    for run in re.findall(r"(?<!\{)(?:\{\d+\}){2,}(?!\})", msgid):
        if run in translated:
            first = run[: run.index("}") + 1]
            msgid, translated = msgid.replace(run, first), translated.replace(run, first)
    return msgid, translated


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


def _spaced_values(layout: tuple) -> bool:
    """Whether two of the template's values are apart by spaces only (a table's row): padding makes
    where one ends ambiguous, so such a template is not matched (its columns are, one by one)."""
    return any(
        isinstance(part, str) and not part.strip() and isinstance(layout[i - 1], int) and isinstance(layout[i + 1], int)
        for i, part in enumerate(layout[1:-1], 1)
    )


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


# Short labels that the notebooks' own code cells print or draw (a table's column, a figure's lane
# or legend title): the catalog takes a code cell's strings of two words or more only, so these are
# named here, and translated where they are shown.
NOTEBOOK_LABELS = (
    N_("link"),
    N_("transfer"),
    N_("ready at"),
    N_("deadline"),
    N_("register"),
    N_("action"),
    # notebook 05's table of cases: its columns, which its note below names
    N_("window"),
    N_("matmuls"),
    N_("balance"),
    N_("serial"),
    N_("overlap"),
    N_("ratio"),
    N_("covered"),
    N_("copy x"),
)


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
    """Text already rendered, in the learner's language (unchanged when nothing matches). A
    template's values are localized too (a label put into a sentence), padded to the width they
    had (a value padded into a column keeps its column)."""
    if not text or language() == "en" or not _HAS_LETTERS(text):
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
                return translated.format(*(_localize_value(values.get(i, "")) for i in range(max(values) + 1)))
            except (IndexError, KeyError, ValueError):
                return text
    return text


_DERIVED: dict[str, tuple] = {}  # language -> (its catalog, derived tables), rebuilt when the catalog is


def _derived(language: str) -> dict:
    """Tables derived from a language's catalog (the phrase pattern, the labels already drawn),
    kept as long as that catalog is the one in use."""
    catalog = _catalog(language)
    cached = _DERIVED.get(language)
    if cached is None or cached[0] is not catalog:
        cached = _DERIVED[language] = (catalog, {"labels": {}})
    return cached[1]


def _phrases(language: str):
    """One pattern matching every catalog text of two words or more, longest first, as whole words."""
    import re

    derived = _derived(language)
    if "phrases" not in derived:
        texts = sorted((t for t in _catalog(language)[0] if " " in t.strip() and _HAS_LETTERS(t) and "{" not in t), key=len, reverse=True)
        derived["phrases"] = re.compile(r"(?<![A-Za-z])(?:" + "|".join(re.escape(t) for t in texts) + r")(?![A-Za-z])") if texts else None
    return derived["phrases"]


def _substitute(text: str) -> str:
    """Text that a notebook or the runtime put together from catalog texts (a label joined to an
    action, clauses joined to a sentence): each template found inside it, and each catalog text of
    two words or more, translated in place; the rest kept. A template is looked for by its first
    words; a value before them (or after its last words) is the token next to them (a number, a
    name)."""
    if not text or language() == "en" or not _HAS_LETTERS(text):
        return text
    exact, templates = _catalog(language())
    leading = []
    for layout, translated in templates:
        if isinstance(layout[0], int):
            leading.append((layout, translated))
        else:
            text = _substitute_template(text, layout, translated, 0)
    pattern = _phrases(language())
    if pattern is not None:
        text = pattern.sub(lambda m: exact[m.group(0)], text)
    for layout, translated in leading:
        text = _substitute_template(text, layout, translated, 1)
    return text


_TOKEN_END = " \t\n;,(（"


def _substitute_template(text: str, layout: tuple, translated: str, anchor: int) -> str:
    """``text`` with each occurrence of one template translated; ``anchor`` is the index of the
    template's first literal part (1 when a value comes before it)."""
    first = layout[anchor]
    if anchor >= len(layout) or not isinstance(first, str) or not _HAS_LETTERS(first) or len(first.strip()) < 3:
        return text
    found = text.find(first)
    while found >= 0:
        start = found
        if anchor:  # the value before the first words: the token that ends there
            while start > 0 and text[start - 1] not in _TOKEN_END:
                start -= 1
        for piece in _pieces(text, start, found, layout, anchor):
            values = _match(layout, piece)
            if values is not None and all(values.values()):
                try:
                    new = translated.format(*(_localize_value(values.get(i, "")) for i in range(max(values) + 1)))
                except (IndexError, KeyError, ValueError):
                    break
                text = text[:start] + new + text[start + len(piece) :]
                found = start + len(new) - len(first)
                break
        found = text.find(first, found + 1)
    return text


def _pieces(text: str, start: int, found: int, layout: tuple, anchor: int):
    """The candidate texts of a template whose first words are at ``found`` (its text from
    ``start``): up to each later occurrence of its last words, or, when it ends in a value, to the
    end of the token after its last words."""
    ends_in_value = isinstance(layout[-1], int)
    last = layout[-2] if ends_in_value else layout[-1]
    end = text.find(last, found if len(layout) - 1 - ends_in_value == anchor else found + len(layout[anchor]))
    while end >= 0:
        stop = end + len(last)
        if ends_in_value:
            while stop < len(text) and text[stop] not in _TOKEN_END:
                stop += 1
            while stop > end + len(last) and text[stop - 1] in ".:;":
                stop -= 1
        yield text[start:stop]
        end = text.find(last, end + 1)


def _HAS_LETTERS(text: str) -> bool:
    return any("a" <= ch.lower() <= "z" for ch in text)


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospaced output: a Chinese (wide) character takes two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _localize_value(value: str) -> str:
    """A value matched in a template, localized when the catalog knows it whole, keeping its
    padding: the spaces around it are trimmed by what the translation's extra width needs."""
    core = value.strip()
    translated = localize(core) if core else core
    if translated == core:
        translated = _substitute(core)
    if translated == core:
        return value
    lead, trail = value[: len(value) - len(value.lstrip())], value[len(value.rstrip()) :]
    excess = display_width(translated) - display_width(core)
    if display_width(core) > 40:  # prose, not a padded cell: its spaces are its own
        return lead + translated + trail
    if excess > 0:
        cut = min(excess, len(trail))
        trail, excess = trail[cut:], excess - cut
        lead = lead[min(excess, len(lead)) :]
    elif excess < 0 and (lead or trail):  # a padded cell: back to its width
        trail, lead = (trail + " " * -excess, lead) if trail else (trail, lead + " " * -excess)
    return lead + translated + trail


def localize_lines(text: str) -> str:
    """Printed text in the learner's language: the whole text, else each line, else each column of
    a line (cells apart by two or more spaces, as a printed table lays them out), the spaces
    between them adjusted so that the table's columns stay aligned."""
    if not text or language() == "en":
        return text
    whole = localize(text)
    if whole != text:
        return whole
    return "\n".join(_localize_line(line) for line in text.split("\n"))


def _localize_head(line: str) -> str:
    """A line that begins with a template's text and goes on (a message followed by a list joined
    to it): the head translated, the rest kept; the line itself when no template begins it."""
    for layout, translated in _catalog(language())[1]:
        if not isinstance(layout[-1], str) or not layout[-1].strip():
            continue
        end = line.find(layout[-1])
        while end >= 0:
            head = line[: end + len(layout[-1])]
            values = _match(layout, head)
            if values is not None and head != line:
                try:
                    return translated.format(*(_localize_value(values.get(i, "")) for i in range(max(values) + 1))) + line[len(head) :]
                except (IndexError, KeyError, ValueError):
                    break
            end = line.find(layout[-1], end + 1)
    return line


def _localize_line(line: str) -> str:
    """One printed line: whole, by its head (see _localize_head), by its columns, else the catalog
    texts found inside it (see _substitute)."""
    import re

    translated = localize(line)
    if translated == line and _HAS_LETTERS(line):
        translated = _localize_head(line)
    if translated != line or not _HAS_LETTERS(line):
        return translated
    parts = re.split(r"( {2,})", line)  # cell, gap, cell, gap, ... (a cell may be empty)
    changed = False
    for i in range(0, len(parts), 2):
        core = parts[i]
        new = (localize(core) if core in _catalog(language())[0] else _localize_words(core)) if core.strip() else core
        if new == core:
            continue
        parts[i], changed = new, True
        excess = display_width(new) - display_width(core)
        first = not any(p.strip() for p in parts[:i])  # a row's label column is left-aligned: pad after it
        for j in (i + 1, i - 1) if first else (i - 1, i + 1):  # else right-aligned, as numbers are
            if 0 <= j < len(parts) and excess:
                give = min(excess, len(parts[j]) - 1) if excess > 0 else excess  # one space is left at least
                parts[j] = " " * (len(parts[j]) - give)
                excess -= give
    return "".join(parts) if changed else _substitute(line)


def _localize_words(cell: str) -> str:
    """A table's cell of names one space apart (a header's ``window matmuls balance``, a row's
    ``64Mi calibrated``): each name (or two-word name) the catalog knows, right-aligned in the width
    it had, numbers kept; the cell as it is unless the catalog knows every name."""
    exact = _catalog(language())[0]
    words, out, i = cell.split(" "), [], 0
    while i < len(words):
        pair = " ".join(words[i : i + 2])
        name = pair if i + 1 < len(words) and pair in exact else words[i]
        if name not in exact and not any(ch.isdigit() for ch in name):  # a number (64Mi) is kept as it is
            return cell
        translated = exact.get(name, name)
        out.append(" " * max(0, display_width(name) - display_width(translated)) + translated)
        i += len(name.split(" "))
    return " ".join(out)


def localize_label(text) -> str:
    """A figure's text in the learner's language: whole, else line by line."""
    lang = language()
    if not isinstance(text, str) or not text or lang == "en":
        return text
    labels = _derived(lang)["labels"]  # a figure sets its tick labels again on every draw
    if text not in labels:
        translated = localize(text)  # whole first: a label broken over lines may be one catalog text
        if translated == text and "\n" in text:
            translated = "\n".join(localize(line) for line in text.split("\n"))
        if len(labels) > 20_000:
            labels.clear()
        labels[text] = translated if translated != text else "\n".join(_substitute(line) for line in text.split("\n"))
    return labels[text]


def localize_figure(fig) -> None:
    """Translate every text of a matplotlib figure in place (titles, labels, legends, annotations)."""
    from matplotlib.text import Text

    for artist in fig.findobj(Text):
        text = artist.get_text()
        translated = localize_label(text)
        if translated != text:
            artist.set_text(translated)


def _localize_text_as_set() -> None:
    """Translate every matplotlib text as it is set: a text set at draw time (a tick label, which
    the axis sets from its formatter on every draw, a categorical axis's names) is translated
    too, before the layout measures it. Once per process; English text is left alone."""
    from matplotlib.text import Text

    original = Text.set_text
    if getattr(original, "_course_localized", False):
        return

    @functools.wraps(original)
    def set_text(self, s):
        return original(self, localize_label(s) if isinstance(s, str) and language() != "en" else s)

    set_text._course_localized = True
    Text.set_text = set_text


def use_course_font() -> bool:
    """Register the CJK font the course ships and make matplotlib fall back to it glyph by glyph."""
    if not FONT_FILE.is_file():
        return False
    from matplotlib import font_manager, rcParams

    registered = {f.fname for f in font_manager.fontManager.ttflist}
    for file in (FONT_FILE, BOLD_FONT_FILE):  # regular and bold: a bold title is bold in Chinese too
        if file.is_file() and str(file) not in registered:
            font_manager.fontManager.addfont(str(file))
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
    if lang == "en":
        return lang
    use_course_font()  # every time (cheap): a font list reset since the first call gets the course's font back
    if _installed:
        return lang
    from matplotlib.backend_bases import FigureCanvasBase

    original = FigureCanvasBase.print_figure
    if not getattr(original, "_course_localized", False):  # once per process, whatever re-imports this module

        @functools.wraps(original)
        def print_figure(self, *args, **kwargs):
            localize_figure(self.figure)
            return original(self, *args, **kwargs)

        print_figure._course_localized = True
        FigureCanvasBase.print_figure = print_figure
    _localize_text_as_set()
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
            args = (localize_lines(args[0]),)
        return builtins.print(*args, **kwargs)

    shell.user_ns["print"] = print_localized
