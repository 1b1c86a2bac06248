"""The translation catalogs: one source (``solutions/``, ``tools/``), one catalog per edition's
text.

The course is written in English; each other edition's text lives in gettext PO catalogs that
translators' tools read (Poedit, Weblate, ``msgmerge``), read and written with Babel:

- ``translations/<lang>/<notebook>.po``: one unit per markdown cell, keyed by the cell's id
  (``msgctxt``), the English cell as ``msgid``. Instructor-only: it holds the translated model
  answers of the reflection cells, so it never ships to learners.
- ``translations/<lang>/grader.po``: the hidden tests' idea texts (``msgctxt`` ``grade_id:idea``)
  and the feedback page's own lines. Instructor-only as well.
- ``tools/locale/<lang>/runtime.po``: every learner-facing string the code prints, shipped in the
  learner wheel: the ``tr("...")`` strings of ``tools`` and the strings of the notebooks' code cells
  (public-check labels and messages, figure titles and labels). A string with values in it (an
  f-string) becomes a template whose ``{0}``, ``{1}``... stand for the values.

``update`` brings a catalog up to date with its units: new ones are added untranslated, a unit whose
English changed keeps its old translation marked fuzzy (with the old English as ``#| msgid``), units
that are gone become obsolete. ``problems`` is what ``check`` refuses: a catalog that does not
parse, an untranslated or fuzzy unit, a placeholder or inline code span that the translation lost,
and (for the course's catalogs) a translation that uses a term the glossary (``docs/glossary.md``)
lists as a variant to avoid: one term per concept."""

from __future__ import annotations

import ast
import io
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from babel.messages.catalog import Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import PoFileError, read_po, write_po

from tools.i18n import EDITIONS, runtime_catalog_path

from ..errors import GraderError
from ..judging.ideas import (
    docstrings,
    message_nodes,
    message_template,
    message_templates,
    source_comments,
    split_hidden,
)

PROJECT = "serving-overlap-course"
# the runtime's message calls (tools/i18n.py): a template's first argument, looked up where the text
# is made (tr, say, Message) or marked where a label is written and translated where it is shown
# (N_)
MESSAGE_CALLS = ("tr", "say", "Message", "N_")
# calls whose first argument is text the runtime did not make, matched against the catalog
# (localize)
OUTSIDE_CALLS = ("localize",)
# tools.i18n.CONTEXT: "context\x04text", gettext's key of a template with a msgctxt
CONTEXT = "\x04"
PLACEHOLDER = re.compile(r"(?<!\{)\{[^{}]*\}(?!\})")
LATEX_ARGUMENT = re.compile(r"\\[A-Za-z]+\{[^{}]*\}")
CODE_SPAN = re.compile(r"(?<!`)`[^`]+`(?!`)")  # may run over a line break, as markdown allows
SOLUTION = re.compile(r"### BEGIN SOLUTION.*?### END SOLUTION", re.S)


@dataclass(frozen=True)
class Unit:
    """One translatable text: ``context`` keys it (a cell id, ``grade_id:idea``) or is None for a
    string that means the same wherever the code prints it."""

    msgid: str
    context: str | None = None
    comment: str = ""
    where: str = ""


# ---------------------------------------------------------------- units from the sources


def notebook_units(path: Path) -> list[Unit]:
    """Each markdown cell of an instructor source, keyed by its cell id, and each comment block of
    its code cells (comment_blocks), keyed ``<cell id>:comment:<n>``, and each comment after code on
    its line (trailing_notes), keyed ``<cell id>:trailing:<n>``, and each docstring of a given
    function (given_docstrings), keyed ``<cell id>:docstring:<n>``."""
    units = []
    for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type == "code":
            for n, (_, _, _, text) in enumerate(comment_blocks(cell.source)):
                comment = f"cell {index} (code comment: each line one '# ' line)"
                units.append(
                    Unit(text, f"{cell.id}:comment:{n}", comment, f"{path.name}:{cell.id}")
                )
            for n, (_, _, text) in enumerate(trailing_notes(cell.source)):
                comment = f"cell {index} (code comment after code on its line: one line)"
                units.append(
                    Unit(text, f"{cell.id}:trailing:{n}", comment, f"{path.name}:{cell.id}")
                )
            for n, text in enumerate(given_docstrings(cell)):
                comment = (
                    f"cell {index} (docstring of a given function: no backslash, no triple quote)"
                )
                units.append(
                    Unit(text, f"{cell.id}:docstring:{n}", comment, f"{path.name}:{cell.id}")
                )
        if cell.cell_type != "markdown" or not cell.source.strip():
            continue
        meta = cell.metadata.get("nbgrader", {})
        kind = (
            "model answer (instructor only)"
            if meta.get("solution")
            else ("read-only" if meta.get("locked") else "markdown")
        )
        units.append(Unit(cell.source, cell.id, f"cell {index} ({kind})", f"{path.name}:{cell.id}"))
    return units


# comment lines a code cell keeps as they are in every edition: nbgrader's markers and code stub
KEPT_COMMENTS = re.compile(r"^#(?:##|\s*YOUR CODE HERE\b|!|\s*(?:noqa|type:|fmt:|pragma))")
_REGION = re.compile(r"^\s*### (BEGIN|END) (SOLUTION|HIDDEN TESTS)\b")


def comment_blocks(source: str) -> list[tuple[int, int, str, str]]:
    """The comment blocks of a code cell that an edition words in its language: runs of
    comment-only lines (``ideas.Comments.alone``) at one indentation, outside solution and
    hidden-test regions (which no learner sees), nbgrader's markers and stub kept
    (KEPT_COMMENTS). Each is (first line, line after the last, indentation, text without the
    ``# ``), lines counted from 0; none when the cell does not tokenize."""
    comments = source_comments(source)
    if comments is None:
        return []
    lines, blocks, inside = source.split("\n"), [], False
    for i, line in enumerate(lines):
        region = _REGION.match(line)
        if region:
            inside = region.group(1) == "BEGIN"
            continue
        comment = comments.alone(i)
        if inside or comment is None or KEPT_COMMENTS.match(comment):
            continue
        indent, text = line[: len(line) - len(line.lstrip())], re.sub(r"^# ?", "", comment)
        if blocks and blocks[-1][1] == i and blocks[-1][2] == indent:
            start, _, _, before = blocks[-1]
            blocks[-1] = (start, i + 1, indent, before + "\n" + text)
        else:
            blocks.append((i, i + 1, indent, text))
    return blocks


def trailing_notes(source: str) -> list[tuple[int, int, str]]:
    """The comments after code on their line (``ideas.Comments.after_code``) that an edition words
    in its language: outside solution and hidden-test regions, nbgrader's markers and linters'
    pragmas kept (KEPT_COMMENTS). Each is (line, column of its ``#``, text without the ``# ``)."""
    comments = source_comments(source)
    if comments is None:
        return []
    notes, inside = [], False
    for i, line in enumerate(source.split("\n")):
        region = _REGION.match(line)
        if region:
            inside = region.group(1) == "BEGIN"
        elif (
            not inside
            and (comment := comments.after_code(i))
            and not KEPT_COMMENTS.match(comment.text)
        ):
            notes.append((i, comment.column, re.sub(r"^# ?", "", comment.text)))
    return notes


def _docstring_spans(source: str) -> list[tuple[int, int, int, int, str]]:
    """The docstrings of ``source`` (``ideas.docstrings``) outside solution and hidden-test
    regions."""
    inside, regions = False, set()
    for i, line in enumerate(source.split("\n")):
        region = _REGION.match(line)
        if region:
            inside = region.group(1) == "BEGIN"
        elif inside:
            regions.add(i)
    return [span for span in docstrings(source) if span[0] not in regions]


def given_docstrings(cell) -> list[str]:
    """The docstrings an edition words in its language: those of the functions a learner is given
    (in an answer cell outside its solution, or in a given cell). A grade cell's are its public
    checks' labels, which the runtime translates as it prints them and the judge reads in
    English."""
    if cell.cell_type != "code" or cell.metadata.get("nbgrader", {}).get("grade"):
        return []
    return [span[4] for span in _docstring_spans(cell.source)]


def translate_docstrings(source: str, cell_id: str, table: Translations) -> str:
    """A given cell (given_docstrings) with its docstrings in the catalog's words, each a
    triple-quoted string at the original's place; ValueError for a translation that a triple-quoted
    string cannot hold as it is, KeyError when the catalog lacks one."""
    lines = source.split("\n")
    for n, (first, start, last, end, text) in reversed(list(enumerate(_docstring_spans(source)))):
        words = table.text(text, f"{cell_id}:docstring:{n}")
        if '"""' in words or "\\" in words or words.endswith('"'):
            raise ValueError(
                f"{cell_id}:docstring:{n}: a docstring's translation holds a "
                "backslash or a quote at its end"
            )
        body = ("\n" + " " * start).join(words.split("\n"))
        lines[first : last + 1] = (
            lines[first][:start] + f'"""{body}"""' + lines[last][end:]
        ).split("\n")
    return "\n".join(lines)


def translate_comments(source: str, cell_id: str, table: Translations) -> str:
    """A code cell with each comment block (comment_blocks) and each comment after code
    (trailing_notes) in the catalog's words (``table``); its code
    unchanged, line for line (``ideas.code_only`` is the same). KeyError when the catalog lacks one
    (the release checks the catalog first)."""
    lines = source.split("\n")
    for n, (row, column, text) in enumerate(trailing_notes(source)):
        words = table.text(text, f"{cell_id}:trailing:{n}")
        lines[row] = f"{lines[row][:column]}# {' '.join(words.split())}".rstrip()
    for n, (start, end, indent, text) in reversed(list(enumerate(comment_blocks(source)))):
        words = table.text(text, f"{cell_id}:comment:{n}")
        lines[start:end] = [
            f"{indent}# {line}".rstrip() if line.strip() else f"{indent}#"
            for line in words.split("\n")
        ]
    return "\n".join(lines)


# a string literal's text, or an f-string as a template with {0}, {1}... for its values
_template = message_template


_PARSE_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    """``ast.parse``, one call at a time in this process. CPython 3.11 keeps the AST builder's
    recursion depth in state that threads share; two threads parsing at once can fail with
    ``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905). The grading
    process reads catalogs from several threads, one per worker."""
    with _PARSE_LOCK:
        return ast.parse(source)


def _call_name(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


def _has_text(template: str | None) -> bool:
    """Whether a template is more than one value: words, punctuation or an order of values that a
    language words its own way (``{count} {name}`` is ``{name} {count} 个`` in Chinese)."""
    return bool(template and template.strip()) and not re.fullmatch(r"\{[^{}]*\}", template.strip())


def message_calls(tree: ast.AST, names=MESSAGE_CALLS) -> list[ast.Call]:
    """The calls to ``names`` in ``tree`` that have a first argument."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _call_name(node) in names and node.args
    ]


def unliteral_templates(source: str) -> list[str]:
    """Where ``source`` calls tr, say or Message with a first argument that is not a string literal
    (an f-string, a concatenation): a template the catalog cannot hold. A variable (a label marked
    ``N_`` where it was written, translated where it is shown) is allowed; an f-string never is."""
    try:
        tree = parse(re.sub(r"^\s*[%!].*$", "", source, flags=re.M))
    except SyntaxError:
        return []
    return [
        f"line {node.lineno}: {_call_name(node)}({ast.unparse(node.args[0])[:60]}...)"
        for node in message_calls(tree)
        if isinstance(node.args[0], (ast.JoinedStr, ast.BinOp))
        or (_call_name(node) == "N_" and not isinstance(node.args[0], ast.Constant))
    ]


def code_strings(source: str) -> list[str]:
    """The learner-facing templates of one code cell's code: the first argument of each message call
    (tr, say, Message, N_: the runtime's one mechanism), each ``localize`` call's text (a scaffold's
    error, as the template of its f-string), and what a public check prints (each case's label, the
    suite's title, its failure messages: ``ideas.message_templates``)."""
    try:
        tree = parse(re.sub(r"^\s*[%!].*$", "", source, flags=re.M))
    except SyntaxError:
        return []
    found = [
        node.args[0].value
        for node in message_calls(tree)
        if isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
    ]
    # a contextual template: the runtime's own (tools_units)
    found = [text.split(CONTEXT, 1)[-1] for text in found if CONTEXT not in text]
    found += [_template(node.args[0]) for node in message_calls(tree, OUTSIDE_CALLS)]
    if any(_call_name(node) == "PublicChecks" for node in message_calls(tree, ("PublicChecks",))):
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(
                "case" in ast.unparse(d) for d in node.decorator_list
            ):
                found.append((ast.get_docstring(node) or node.name).strip().splitlines()[0])
        found += [_template(node.args[0]) for node in message_calls(tree, ("PublicChecks",))]
        found += message_templates(tree)
    return [text for text in dict.fromkeys(found) if _has_text(text)]


def setup_message(source: str) -> str | None:
    """The set-up cell's message for a missing course runtime (``raise ModuleNotFoundError(...)``),
    as its catalog template; the release writes its translation into the edition's set-up cell."""
    try:
        tree = parse(re.sub(r"^\s*[%!].*$", "", source, flags=re.M))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Raise)
            and isinstance(node.exc, ast.Call)
            and _call_name(node.exc) == "ModuleNotFoundError"
            and node.exc.args
        ):
            return message_template(node.exc.args[0])
    return None


def code_units(paths: Iterable[Path]) -> list[Unit]:
    """The learner-facing templates of every notebook's code cells, without solutions and hidden
    tests (code_strings), and the set-up cell's message for a missing runtime (setup_message)."""
    units = []
    for path in paths:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            public = SOLUTION.sub("", split_hidden(cell.source)[0])
            texts = dict.fromkeys(code_strings(public))
            if "imports" in cell.metadata.get("tags", []) and setup_message(public):
                texts[setup_message(public)] = None
            units += [Unit(text, None, "", f"{path.name}:{cell.get('id', '?')}") for text in texts]
    return units


def public_check_texts(paths: Iterable[Path]) -> list[str]:
    """What the judge's feedback quotes of the grade cells' public checks: each case's label (its
    docstring's first line) and each failure message's catalog key. They are runtime catalog units
    (``code_units``), translated for the learner's kernel; the feedback reads the same
    translations."""
    texts: list[str] = []
    for path in paths:
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                continue
            try:
                tree = parse(split_hidden(cell.source)[0])
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and any(
                    "case" in ast.unparse(d) for d in node.decorator_list
                ):
                    texts.append((ast.get_docstring(node) or node.name).strip().splitlines()[0])
            texts += message_templates(tree)
    return list(dict.fromkeys(texts))


def tools_units(root: Path) -> list[Unit]:
    """The learner runtime's own templates: the first argument of each ``tr``, ``say``, ``Message``
    and ``N_`` call (found by Babel's Python extractor); ``"context\x04text"`` is a template with a
    msgctxt."""
    units = []
    keywords = dict.fromkeys(MESSAGE_CALLS)
    for filename, lineno, message, comments, _context in extract_from_dir(
        root / "tools", [("**.py", "python")], keywords=keywords
    ):
        if isinstance(message, str) and _has_text(message.split(CONTEXT, 1)[-1]):
            context, _, text = message.rpartition(CONTEXT)
            units.append(
                Unit(text, context or None, " ".join(comments), f"tools/{filename}:{lineno}")
            )
    return units


def grader_units(
    paths: Iterable[Path], feedback_texts: Iterable[str | tuple[str, str]]
) -> list[Unit]:
    """The hidden tests' idea texts (read from the source, never run) and the feedback page's lines
    (a line that shares its English with another: (English, its msgctxt))."""
    units = []
    for path in paths:
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if not meta.get("grade") or meta.get("solution"):
                continue
            hidden = split_hidden(cell.source)[1]
            for node in ast.walk(parse(hidden)) if hidden.strip() else ():
                if (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", "") == "idea"
                    and len(node.args) >= 3
                ):
                    idea_id, text = ast.literal_eval(node.args[0]), ast.literal_eval(node.args[2])
                    units.append(
                        Unit(
                            text,
                            f"{meta['grade_id']}:{idea_id}",
                            "idea text (instructor only)",
                            path.name,
                        )
                    )
            units += hidden_message_units(hidden, f"{path.name}:{meta['grade_id']}")
    units += [
        Unit(*text, "feedback page", "autograde")
        if isinstance(text, tuple)
        else Unit(text, None, "feedback page", "autograde")
        for text in feedback_texts
    ]
    return units


def hidden_message_units(hidden: str, where: str) -> list[Unit]:
    """The failure messages of a grade cell's hidden tests (instructor only): each text the judge
    may show (``ideas.message_nodes``) as its catalog key, the comment naming what fills each
    field."""
    if not hidden.strip():
        return []
    units = []
    for node in message_nodes(parse(hidden)):
        fields = (
            [ast.unparse(v.value) for v in node.values if isinstance(v, ast.FormattedValue)]
            if isinstance(node, ast.JoinedStr)
            else []
        )
        comment = "hidden test's failure message (instructor only)" + "".join(
            f"; {{{i}}}: {code}" for i, code in enumerate(fields)
        )
        units.append(Unit(message_template(node), None, comment, where))
    return units


# ---------------------------------------------------------------- the glossary

GLOSSARY = Path("docs") / "glossary.md"
_TERM_SPLIT = re.compile(r"\s*[/()（）]\s*")
_VARIANT_SPLIT = re.compile(r"\s*/\s*")


@dataclass(frozen=True)
class Term:
    """One concept of the glossary: its English, the Chinese chosen for it, the variants refused."""

    english: str
    chosen: tuple[str, ...]
    avoid: tuple[str, ...]


def read_glossary(path: Path) -> list[Term]:
    """The terms of the glossary's table (the first Markdown table whose header has the columns
    ``English``, ``中文`` and ``Avoid``). A cell lists its terms separated by ``/`` (the chosen
    column may add a gloss in parentheses). ValueError when the file has no such table."""
    columns: dict[str, int] | None = None
    terms = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            if terms:
                break
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if columns is None:
            names = {cell.split()[0] if cell else "": i for i, cell in enumerate(cells)}
            if {"English", "中文", "Avoid"} <= names.keys():
                columns = names
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        chosen = tuple(t for t in _TERM_SPLIT.split(cells[columns["中文"]]) if t)
        avoid = tuple(t for t in _VARIANT_SPLIT.split(cells[columns["Avoid"]]) if t)
        terms.append(Term(cells[columns["English"]], chosen, avoid))
    if columns is None:
        raise ValueError(f"{path.name} has no table with the columns English, 中文 and Avoid")
    return terms


def term_variants(text: str, terms: list[Term]) -> list[tuple[str, Term]]:
    """(variant, its term) for each variant to avoid that ``text`` uses. A variant inside a chosen
    term of any concept is not one (笔记本 inside 笔记本电脑, when 笔记本电脑 is laptop's term)."""
    chosen = [c for term in terms for c in term.chosen]
    found = []
    for term in terms:
        for variant in term.avoid:
            masked = text
            for longer in sorted(
                (c for c in chosen if variant in c and c != variant), key=len, reverse=True
            ):
                masked = masked.replace(longer, "\0")
            if variant in masked:
                found.append((variant, term))
    return found


@dataclass(frozen=True)
class CatalogFile:
    path: Path
    units: list[Unit]
    language: str
    # the terms its translations must use (docs/glossary.md); None: not checked
    glossary: Path | None = None
    # sources whose text cannot be a unit of it (a template made before the catalog is asked)
    refused: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The catalog's path as a translator finds it: from the course folder
        (translations/zh/...)."""
        parts = self.path.parts
        for top in ("translations", "tools"):
            if top in parts:
                return "/".join(parts[len(parts) - parts[::-1].index(top) - 1 :])
        return self.path.as_posix()


def course_catalogs(
    root: Path, notebooks: list[Path], feedback_texts: Iterable[str]
) -> list[CatalogFile]:
    """Every catalog of every edition besides English, with the units it must hold."""
    catalogs = []
    for lang in EDITIONS:
        if lang == "en":
            continue
        folder, glossary = root / "translations" / lang, root / GLOSSARY
        catalogs += [
            CatalogFile(folder / f"{path.stem}.po", notebook_units(path), lang, glossary)
            for path in notebooks
        ]
        catalogs.append(
            CatalogFile(
                folder / "grader.po", grader_units(notebooks, feedback_texts), lang, glossary
            )
        )
        runtime = runtime_catalog_path(lang, root / "tools")
        catalogs.append(
            CatalogFile(
                runtime,
                [*tools_units(root), *code_units(notebooks)],
                lang,
                glossary,
                unliteral_sources(root, notebooks),
            )
        )
    return catalogs


def unliteral_sources(root: Path, notebooks: Iterable[Path]) -> tuple[str, ...]:
    """Every tr, say, Message or N_ call of the runtime and of the notebooks' code cells whose
    template is not a string literal (``unliteral_templates``), named by file and line."""
    found = []
    for path in sorted((root / "tools").rglob("*.py")):
        found += [
            f"tools/{path.relative_to(root / 'tools')} {where}"
            for where in unliteral_templates(path.read_text(encoding="utf-8"))
        ]
    for path in notebooks:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                public = SOLUTION.sub("", split_hidden(cell.source)[0])
                found += [
                    f"{path.name}:{cell.get('id', '?')} {where}"
                    for where in unliteral_templates(public)
                ]
    return tuple(found)


def _read(path: Path, language: str) -> Catalog:
    with open(path, "rb") as handle:
        return read_po(handle, locale=language, abort_invalid=True)


_CREATED = re.compile(rb'^"POT-Creation-Date: [^"]*"\n', re.M)


def write_catalog(path: Path, catalog: Catalog) -> None:
    """Write ``catalog`` to ``path``, unless all it would change is the header's creation date: an
    update that changes no unit leaves the file as it is (two branches that each ran an update do
    not then differ in a date alone)."""
    buffer = io.BytesIO()
    write_po(buffer, catalog, width=0, include_previous=True, sort_output=False)
    text = buffer.getvalue()
    if path.is_file() and _CREATED.sub(b"", path.read_bytes()) == _CREATED.sub(b"", text):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text)


@dataclass
class CatalogCounts:
    """A catalog's units by state after an update: translated, fuzzy (a translation to review),
    untranslated, and obsolete (kept, no longer in the sources)."""

    translated: int = 0
    fuzzy: int = 0
    untranslated: int = 0
    obsolete: int = 0


def update(spec: CatalogFile) -> CatalogCounts:
    """Bring one catalog up to date with its units; returns its units by state."""
    old = _read(spec.path, spec.language) if spec.path.exists() else Catalog(locale=spec.language)
    new = Catalog(locale=spec.language, project=PROJECT, fuzzy=False)
    by_context = {m.context: m for m in old if m.id and m.context}
    for unit in spec.units:
        if new.get(unit.msgid, context=unit.context) is not None:
            new.get(unit.msgid, context=unit.context).locations.append((unit.where, None))
            continue
        same = old.get(unit.msgid, context=unit.context)
        moved = by_context.get(unit.context) if unit.context else None
        message = Message(
            unit.msgid,
            "",
            [(unit.where, None)],
            auto_comments=[unit.comment] if unit.comment else [],
            context=unit.context,
        )
        if same is not None and same.string:
            message.string, message.flags = (
                same.string,
                set(same.flags) - {"python-format", "python-brace-format"},
            )
        elif moved is not None and moved.string:
            message.string, message.flags, message.previous_id = moved.string, {"fuzzy"}, [moved.id]
        new[unit.msgid] = message  # Catalog keys it by (id, context), the context from the message
    keep = {(m.id, m.context) for m in new if m.id}
    for message in old:
        if message.id and (message.id, message.context) not in keep and message.string:
            new.obsolete[(message.id, message.context)] = message
    counts = CatalogCounts(obsolete=len(new.obsolete))
    for message in new:
        if message.id:
            state = (
                "untranslated" if not message.string else "fuzzy" if message.fuzzy else "translated"
            )
            setattr(counts, state, getattr(counts, state) + 1)
    write_catalog(spec.path, new)
    return counts


def _lost(pattern: re.Pattern, english: str, translated: str) -> list[str]:
    """The tokens (placeholders, code spans) of ``english`` missing from ``translated``; a line
    break inside one counts as a space (a translation may reflow a code span onto one line), and a
    placeholder counts by its field and conversion (a translation may pad a value differently:
    ``{name:>9}`` where English aligns a column, ``{name}`` in a sentence)."""

    def key(token: str) -> str:
        token = " ".join(token.split())
        return (
            re.sub(r"^\{([^{}:]*?)(![rsa])?(?::[^{}]*)?\}$", r"{\1\2}", token)
            if pattern is PLACEHOLDER
            else token
        )

    def tokens(text: str) -> list[str]:
        # a LaTeX command's argument (\\text{bytes per token}) is words, not a value
        if pattern is PLACEHOLDER:
            text = LATEX_ARGUMENT.sub("", text)
        return pattern.findall(text)

    have = {key(token) for token in tokens(translated)}
    return [token for token in dict.fromkeys(tokens(english)) if key(token) not in have]


_PO_LINE = re.compile(
    r"^(?:#.*|(?:#~ )?(?:msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?) "
    r'+"(?:[^"\\]|\\.)*"|(?:#~ )?"(?:[^"\\]|\\.)*"|\s*)$'
)


def syntax_error(path: Path) -> str | None:
    """The first line that is not PO syntax (a keyword and a closed, escaped string; a string
    continuing the last one; a comment; a blank line). Babel's reader forgives what msgfmt and
    translators' tools refuse (an unclosed quote), so the course checks it itself."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not _PO_LINE.match(line):
            return f"line {number} is not PO syntax: {line[:60]!r}"
    return None


def problems(spec: CatalogFile) -> list[str]:
    """Why this catalog cannot make an edition (empty when it can)."""
    name = spec.label
    if not spec.path.exists():
        return [f"{name}: missing (run `python -m autograde translations update`)"]
    try:
        broken = syntax_error(spec.path)
        if broken:
            return [f"{name}: does not parse: {broken}"]
        catalog = _read(spec.path, spec.language)
    except (PoFileError, UnicodeDecodeError) as exc:
        return [f"{name}: does not parse: {exc}"]
    found = [
        f"{name}: {where}: a template must be a string literal, its values passed by name "
        f"(tr('wrote {{path}}', path=p))"
        for where in spec.refused
    ]
    terms: list[Term] = []
    if spec.glossary is not None:
        try:
            terms = read_glossary(spec.glossary)
        except (OSError, ValueError) as exc:
            found.append(f"{name}: its glossary cannot be read ({exc})")
    wanted = {(unit.msgid, unit.context) for unit in spec.units}
    for message in catalog:
        if message.id and (message.id, message.context) not in wanted:
            what = (
                f"msgctxt {message.context!r}"
                if message.context
                else (f"msgid {str(message.id)[:60]!r}")
            )
            found.append(
                f"{name}: {what} is used by no source (run `python -m autograde "
                f"translations update`) (line {message.lineno})"
            )
    for unit in spec.units:
        message = catalog.get(unit.msgid, context=unit.context)
        said = f"msgctxt {unit.context!r}" if unit.context else f"msgid {unit.msgid[:60]!r}"
        label = f"{name}: {said} ({unit.where})"
        if message is None:
            found.append(
                f"{label} is not in the catalog (run `python -m autograde translations update`)"
            )
        elif not message.string:
            found.append(f"{label} is untranslated (line {message.lineno})")
        elif message.fuzzy:
            found.append(f"{label} is fuzzy: its English changed (line {message.lineno})")
        else:
            lost = _lost(PLACEHOLDER, unit.msgid, message.string) + _lost(
                CODE_SPAN, unit.msgid, message.string
            )
            if lost:
                found.append(
                    f"{label}: the translation lost {', '.join(lost)} (line {message.lineno})"
                )
            for variant, term in term_variants(message.string, terms):
                found.append(
                    f"{label} says '{variant}': the glossary's term for '{term.english}' "
                    f"is '{' / '.join(term.chosen)}' (line {message.lineno})"
                )
    return found


@dataclass(frozen=True)
class Translations:
    """A catalog's translated units, the fuzzy ones left out: {context: {English: translation}}, the
    context a part of a cell (``<cell id>:comment:<n>``...), an idea (``grade_id:idea``), or
    None."""

    by_context: dict[str | None, dict[str, str]] = field(default_factory=dict)

    def text(self, english: str, context: str | None = None) -> str:
        """``english``'s translation; KeyError when the catalog lacks it (an edition is made only
        from a complete catalog: ``problems`` finds none)."""
        return self.by_context[context][english]

    def find(self, english: str, context: str | None = None) -> str | None:
        """``english``'s translation; None when the catalog lacks it."""
        return self.by_context.get(context, {}).get(english)


def translations(spec: CatalogFile) -> Translations:
    """The translated, not fuzzy, units of a catalog."""
    table: dict[str | None, dict[str, str]] = {}
    for message in _read(spec.path, spec.language):
        if message.id and message.string and not message.fuzzy:
            table.setdefault(message.context, {})[message.id] = message.string
    return Translations(table)


class CatalogError(GraderError, RuntimeError):
    """A catalog cannot make its edition (untranslated, fuzzy or broken units)."""

    def __init__(self, problems: list[str]):
        super().__init__(
            "the translation is not complete:\n" + "\n".join(f"  {p}" for p in problems)
        )
        self.problems = problems
