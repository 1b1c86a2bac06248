"""An answer's code as the similarity check compares it (``similarity.py`` says how): its tokens,
with names made one token and comments, docstrings and the release's own lines left out; the
statements of each block in one canonical order; runs of ``K`` tokens hashed, and the hashes
winnowed into fingerprints."""

from __future__ import annotations

import ast
import bisect
import builtins
import hashlib
import io
import keyword
import re
import tokenize
from collections import Counter
from dataclasses import dataclass

K = 8  # tokens in a hashed run
WINDOW = 3  # winnowing window: every run of K + WINDOW - 1 = 10 shared tokens is found

# a builtin is kept by its name: renaming a copy does not change it. The soft keywords match and
# case are names like any other (a loop over `cases` names its variable `case`, and a copy may
# rename it)
NAMES_KEPT = frozenset(dir(builtins))
_LINE_BREAKS = {
    tokenize.NEWLINE,
    tokenize.NL,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.COMMENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}
_DROPPED_OPS = {"(", ")", ";"}  # extra parentheses and joined lines do not hide a copy
# code Python cannot tokenize (an unclosed bracket or string): comments, strings, names, numbers,
# the rest
_FALLBACK = re.compile(
    r"(?P<comment>#[^\n]*)|(?P<string>[rRbBuUfF]{0,2}(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'[^'\n]*'|\"[^\"\n]*\"))"
    r"|(?P<name>[^\W\d]\w*)|(?P<number>\d[\w.]*)|(?P<op>\S)"
)
_KINDS = {
    "string": tokenize.STRING,
    "name": tokenize.NAME,
    "number": tokenize.NUMBER,
    "op": tokenize.OP,
}


# ---------------------------------------------------------------- code to tokens


@dataclass
class Token:
    text: str  # as compared: names are V, strings and numbers in one spelling
    start: int  # where it is in the answer's source
    end: int
    row: int  # 0-based line


def _lexemes(source: str) -> list[tuple[int, str, int, int, int]]:
    """(type, text, start, end, row) of each token of ``source`` that is code: not a comment, a
    line break, an indentation or a docstring (a string alone on its line). Code Python cannot
    tokenize is split by a simple pattern instead (comments out, no docstrings found)."""
    starts = [0]
    for line in source.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    try:
        raw = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return [
            (
                _KINDS[m.lastgroup],
                m.group(),
                m.start(),
                m.end(),
                bisect.bisect_right(starts, m.start()) - 1,
            )
            for m in _FALLBACK.finditer(source)
            if m.lastgroup != "comment"
        ]
    found, line_start = [], True
    for i, tok in enumerate(raw):
        if tok.type in _LINE_BREAKS:
            line_start = line_start or tok.type in (
                tokenize.NEWLINE,
                tokenize.INDENT,
                tokenize.DEDENT,
            )
            continue
        if tok.type == tokenize.STRING and line_start:
            after = i + 1
            while after < len(raw) and raw[after].type in (tokenize.COMMENT, tokenize.NL):
                after += 1
            if (
                after == len(raw)
                or raw[after].type in (tokenize.NEWLINE, tokenize.ENDMARKER)
                or raw[after].string == ";"
            ):
                continue  # a docstring, or a string used as a comment
        line_start = tok.string == ";"
        start = starts[tok.start[0] - 1] + tok.start[1]
        end = starts[tok.end[0] - 1] + tok.end[1]
        found.append((tok.type, tok.string, start, end, tok.start[0] - 1))
    return found


def _spelling(kind: int, text: str, previous: str) -> str | None:
    """A token as compared, or None when it is left out."""
    if kind == tokenize.NAME:
        return text if keyword.iskeyword(text) or text in NAMES_KEPT or previous == "." else "V"
    if kind in (tokenize.STRING, tokenize.NUMBER) and not text[:2].lower().replace(
        "r", ""
    ).startswith("f"):
        try:
            return repr(ast.literal_eval(text))  # 'a' and "a", 1_000 and 1000 alike
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text
    return None if text in _DROPPED_OPS or not text.strip() else text


def normalized(source: str, given: set[int] = frozenset()) -> list[Token]:
    """The tokens of ``source`` (lines ended by ``\\n``: plain_lines) as compared, less those on the
    lines in ``given`` (0-based)."""
    tokens, previous = [], ""
    for kind, text, start, end, row in _lexemes(source):
        spelled = _spelling(kind, text, previous)
        previous = text
        if spelled is not None and row not in given:
            tokens.append(Token(spelled, start, end, row))
    return tokens


# ---------------------------------------------------------------- statements in one order

MAX_BLOCK = 300  # statements of one block put in order (a longer block keeps its own)


def _note(node: ast.AST, writes: set[str], reads: set[str]) -> None:
    """What one node adds to a statement's names (_Arranger.names)."""
    if isinstance(node, ast.Name):
        (reads if isinstance(node.ctx, ast.Load) else writes).add(node.id)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
    ):
        writes.add(node.func.value.id)
    elif isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(node.ctx, ast.Load):
        base = node.value
        while isinstance(base, (ast.Subscript, ast.Attribute)):
            base = base.value
        if isinstance(base, ast.Name):
            writes.add(base.id)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        writes.add(node.name)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        writes.update((a.asname or a.name).split(".")[0] for a in node.names)


def _child_blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The blocks of statements directly inside ``stmt`` (bodies, branches, handlers, cases), in
    source order."""
    found = []
    for node in [stmt, *getattr(stmt, "handlers", []), *getattr(stmt, "cases", [])]:
        for name in ("body", "orelse", "finalbody"):
            value = getattr(node, name, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                found.append(value)
    return sorted(found, key=lambda block: (block[0].lineno, block[0].col_offset))


class _Arranger:
    """The tokens of a parsed answer in a canonical order. Within every block, a statement waits
    for each earlier one that assigns or changes a name it reads, assigns or changes, or that reads
    a name it assigns or changes; statements that do not wait for each other may trade places
    without changing what the code does. The order: the statements nothing waits for, smallest
    tokens first, each preceded by what it waits for (in the same order, recursively), so a value
    stays next to where it is used. It depends on those waits and on the statements' tokens only,
    not on where the author put independent statements: two answers that differ only in that read
    as the same tokens."""

    def __init__(self, source: str, tokens: list[Token]):
        self.lines = source.split("\n")
        self.line_starts = [0]
        for line in self.lines:
            self.line_starts.append(self.line_starts[-1] + len(line) + 1)
        self.tokens = tokens
        self.starts = [t.start for t in tokens]
        self.known: dict[int, tuple[set[str], set[str]]] = {}

    def names(self, stmt: ast.stmt) -> tuple[set[str], set[str]]:
        """(names a statement assigns or changes, names it reads), its nested statements included:
        a name whose method is called, or whose item or attribute is set, counts as changed; a
        nested function reads what its body reads. Each statement is walked once."""
        if id(stmt) not in self.known:
            writes, reads = set(), set()
            _note(stmt, writes, reads)
            stack = list(ast.iter_child_nodes(stmt))
            while stack:
                node = stack.pop()
                if isinstance(node, ast.stmt):
                    inner = self.names(node)
                    writes |= inner[0]
                    reads |= inner[1]
                    continue
                _note(node, writes, reads)
                stack.extend(ast.iter_child_nodes(node))
            self.known[id(stmt)] = (writes, reads)
        return self.known[id(stmt)]

    def offset(self, lineno: int, col: int) -> int:
        """The character offset of an AST position (its column counts UTF-8 bytes)."""
        line = self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""
        chars = (
            col if line.isascii() else len(line.encode("utf-8")[:col].decode("utf-8", "replace"))
        )
        return self.line_starts[min(lineno, len(self.lines)) - 1] + chars

    def first_token(self, lineno: int, col: int) -> int:
        return bisect.bisect_left(self.starts, self.offset(lineno, col))

    def start(self, stmt: ast.stmt) -> int:
        """The index of a statement's first token (its decorators' '@', each at the start of its
        line, included)."""
        decorators = getattr(stmt, "decorator_list", [])
        return (
            self.first_token(min(d.lineno for d in decorators), 0)
            if decorators
            else self.first_token(stmt.lineno, stmt.col_offset)
        )

    def block(self, lo: int, hi: int, stmts: list[ast.stmt]) -> list[int]:
        """The token indices ``lo`` to ``hi`` (the block ``stmts``, tokens before its first
        statement counted with it) in canonical order."""
        cuts = [lo]
        for stmt in stmts[1:]:
            cuts.append(min(hi, max(cuts[-1], self.start(stmt))))
        cuts.append(hi)
        pieces = [self.statement(stmt, cuts[i], cuts[i + 1]) for i, stmt in enumerate(stmts)]
        if len(stmts) > MAX_BLOCK:
            return [i for piece in pieces for i in piece]
        keys = [tuple(self.tokens[i].text for i in piece) for piece in pieces]
        names = [self.names(stmt) for stmt in stmts]
        waits = [
            {
                i
                for i in range(j)
                if names[i][0] & (names[j][0] | names[j][1]) or names[j][0] & names[i][1]
            }
            for j in range(len(stmts))
        ]
        needed = set().union(*waits)
        order: list[int] = []
        placed: set[int] = set()

        def place(j: int) -> None:  # what j waits for first, smallest first, then j
            if j in placed:
                return
            placed.add(j)
            for i in sorted(waits[j], key=lambda i: (keys[i], i)):
                place(i)
            order.extend(pieces[j])

        for j in sorted(
            (j for j in range(len(stmts)) if j not in needed), key=lambda j: (keys[j], j)
        ):
            place(j)
        return order

    def statement(self, stmt: ast.stmt, lo: int, hi: int) -> list[int]:
        """The token indices ``lo`` to ``hi`` of one statement, its blocks in canonical order."""
        out, at = [], lo
        for child in _child_blocks(stmt):
            first = min(hi, max(at, self.start(child[0])))
            last = child[-1]
            end = min(
                hi,
                max(
                    first,
                    bisect.bisect_left(
                        self.starts,
                        self.offset(last.end_lineno or last.lineno, last.end_col_offset or 0),
                    ),
                ),
            )
            out.extend(range(at, first))
            out.extend(self.block(first, end, child))
            at = end
        out.extend(range(at, hi))
        return out


def canonical_order(source: str, tokens: list[Token]) -> list[Token]:
    """``tokens`` (of ``source``) with the independent statements of each block in one order
    (_Arranger), so that a copy whose independent lines were reordered reads as the same tokens.
    Code Python cannot parse (nothing is run: ``ast.parse`` only reads it) keeps its order."""
    try:
        tree = ast.parse(source)
        order = (
            _Arranger(source, tokens).block(0, len(tokens), tree.body)
            if tree.body
            else list(range(len(tokens)))
        )
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return tokens
    if sorted(order) != list(range(len(tokens))):  # every token once, or the order is not used
        return tokens
    return [tokens[i] for i in order]


def plain_lines(source: str) -> str:
    """``source`` with its lines ended by ``\\n`` alone (a ``\\r`` or ``\\r\\n`` ends a line
    too)."""
    return source.replace("\r\n", "\n").replace("\r", "\n")


def line_key(line: str) -> str:
    return "".join(line.split())


def given_lines(source: str, release: Counter) -> set[int]:
    """The lines of ``source`` (0-based) that are the release's own lines of the cell, each release
    line taken as many times as the release has it (whitespace does not count)."""
    left, found = Counter(release), set()
    for row, line in enumerate(source.split("\n")):
        key = line_key(line)
        if key and left[key] > 0:
            left[key] -= 1
            found.add(row)
    return found


def token_ids(tokens: list[Token], cache: dict[str, int]) -> list[int]:
    """A stable number for each token (the same in every run, unlike ``hash`` of a string)."""
    out = []
    for t in tokens:
        if t.text not in cache:
            cache[t.text] = int.from_bytes(
                hashlib.blake2b(t.text.encode("utf-8", "replace"), digest_size=8).digest(), "big"
            )
        out.append(cache[t.text])
    return out


def kgram_hashes(ids: list[int]) -> list[int]:
    """The hash of every run of K tokens, in order (a tuple of ints hashes the same in every
    run)."""
    return [hash(tuple(ids[i : i + K])) for i in range(len(ids) - K + 1)]


def winnow(hashes: list[int], window: int = WINDOW) -> set[int]:
    """Robust winnowing: the smallest hash of every ``window`` consecutive ones (the rightmost on a
    tie), each selected position once. A text shorter than a window gives its smallest hash."""
    picked, last = set(), -1
    for i in range(max(1, len(hashes) - window + 1)):
        part = hashes[i : i + window]
        if not part:
            break
        low = min(part)
        at = i + len(part) - 1 - part[::-1].index(low)
        if at != last:
            picked.add(low)
            last = at
    return picked
