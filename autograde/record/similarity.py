"""``python -m autograde similarity OUT``: which students handed in the same code for a TODO, one
self-contained HTML page (``OUT/similarity.html``) and the same findings in ``OUT/similarity.json``.

It reads the notebooks ``grade`` kept, ``OUT/submitted/<student>/<assignment>/<notebook>.ipynb``,
as JSON data within the grader's limits (nothing in them is run or imported), and compares every
pair of students' answers to each TODO: the code cells whose ``metadata.nbgrader.solution`` is true,
by their grade id.

How two answers are compared, as MOSS does (winnowing: Schleimer, Wilkerson and Aiken, SIGMOD 2003):

- the release's own lines of the cell (the scaffold, the ``def`` line, ``# YOUR CODE HERE``,
  ``raise NotImplementedError()``) are left out, and so are comments, docstrings, brackets ``( )``
  and line breaks; every name becomes ``V`` except keywords, builtins and attribute names, so a
  renamed or reformatted copy reads as the same tokens;
- the statements of each block are read in one canonical order (``canonical_order``): statements
  that do not depend on each other (neither uses a name the other assigns or changes) are put in
  the order of their tokens, each after what it depends on, so a copy whose independent lines were
  reordered reads as the same tokens too (code Python cannot parse keeps its order);
- each run of ``K`` tokens is hashed, and winnowing keeps the smallest hash of every ``WINDOW``
  consecutive ones: any run of ``K + WINDOW - 1`` tokens that two answers share gives them a common
  fingerprint. Fingerprints of the release's own code, and those found in too many different
  answers (``COMMON_SHARE``: the natural way to write a line, not a copy), are not counted;
- the similarity of two answers is their shared fingerprints over the fingerprints of the smaller
  one (1.0: one answer's code is all in the other). A pair at or above the threshold is flagged.
  An answer with fewer than ``MIN_FINGERPRINTS`` fingerprints of its own is not compared: two
  correct answers of a few lines can be the same tokens without anyone copying, so the page says
  "too short to compare" instead of flagging them.

Students with the same normalized answer are grouped first, and candidate pairs come from an
inverted index (fingerprint -> answers), so a class of hundreds is not compared pair by pair.
Every text from OUT (student ids, code) is escaped in the page, which also forbids scripts outright.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import hashlib
import io
import json
import keyword
import math
import os
import re
import tokenize
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from markupsafe import Markup

from ..course import Course, UnusableInput
from ..matching import MAX_BYTES, check_nodes
from .exporters import add_csp, base_style, write_page_and_numbers

K = 8  # tokens in a hashed run
WINDOW = 3  # winnowing window: every run of K + WINDOW - 1 = 10 shared tokens is found
THRESHOLD = 0.7  # the default: flagged at 70% of the smaller answer's fingerprints (why: write_similarity)
MIN_FINGERPRINTS = 25  # fewer fingerprints of its own (about 55 tokens, 5-7 lines of code): too short to compare
COMMON_SHARE = 0.2  # a fingerprint in more than this share of the distinct answers to a TODO is common code ...
COMMON_MIN = 10  # ... when that is more than this many answers (a small class has no "common" code)
NEAR = 0.15  # the page also shows pairs this far below the threshold
SHOWN = 20  # pairs per TODO on the page
LISTED = 2000  # flagged pairs per TODO in similarity.json (the count covers them all)
MAX_ANSWER_CHARS = 20_000  # of one answer compared (a longer one is cut)
MAX_SHOWN_CHARS = 6_000  # of one answer shown on the page
MAX_STUDENTS = 5_000  # student folders read

# a builtin is kept by its name: renaming a copy does not change it. The soft keywords match and case
# are names like any other (a loop over `cases` names its variable `case`, and a copy may rename it)
NAMES_KEPT = frozenset(dir(builtins))
_LINE_BREAKS = {tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT, tokenize.ENCODING, tokenize.ENDMARKER}
_DROPPED_OPS = {"(", ")", ";"}  # extra parentheses and joined lines do not hide a copy
# code Python cannot tokenize (an unclosed bracket or string): comments, strings, names, numbers, the rest
_FALLBACK = re.compile(
    r"(?P<comment>#[^\n]*)|(?P<string>[rRbBuUfF]{0,2}(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'[^'\n]*'|\"[^\"\n]*\"))"
    r"|(?P<name>[^\W\d]\w*)|(?P<number>\d[\w.]*)|(?P<op>\S)"
)
_KINDS = {"string": tokenize.STRING, "name": tokenize.NAME, "number": tokenize.NUMBER, "op": tokenize.OP}


def _unusable(out: Path, why: str) -> UnusableInput:
    return UnusableInput(f"{out} is not a graded course folder: {why} (run `python -m autograde grade SUBMISSIONS --out {out}` first)")


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
            (_KINDS[m.lastgroup], m.group(), m.start(), m.end(), bisect.bisect_right(starts, m.start()) - 1)
            for m in _FALLBACK.finditer(source)
            if m.lastgroup != "comment"
        ]
    found, line_start = [], True
    for i, tok in enumerate(raw):
        if tok.type in _LINE_BREAKS:
            line_start = line_start or tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
            continue
        if tok.type == tokenize.STRING and line_start:
            after = i + 1
            while after < len(raw) and raw[after].type in (tokenize.COMMENT, tokenize.NL):
                after += 1
            if after == len(raw) or raw[after].type in (tokenize.NEWLINE, tokenize.ENDMARKER) or raw[after].string == ";":
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
    if kind in (tokenize.STRING, tokenize.NUMBER) and not text[:2].lower().replace("r", "").startswith("f"):
        try:
            return repr(ast.literal_eval(text))  # 'a' and "a", 1_000 and 1000 alike
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text
    return None if text in _DROPPED_OPS or not text.strip() else text


def normalized(source: str, given: set[int] = frozenset()) -> list[Token]:
    """The tokens of ``source`` (lines ended by ``\\n``: plain_lines) as compared, less those on the lines in ``given`` (0-based)."""
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
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
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
    """The blocks of statements directly inside ``stmt`` (bodies, branches, handlers, cases), in source order."""
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
        chars = col if line.isascii() else len(line.encode("utf-8")[:col].decode("utf-8", "replace"))
        return self.line_starts[min(lineno, len(self.lines)) - 1] + chars

    def first_token(self, lineno: int, col: int) -> int:
        return bisect.bisect_left(self.starts, self.offset(lineno, col))

    def start(self, stmt: ast.stmt) -> int:
        """The index of a statement's first token (its decorators' '@', each at the start of its line, included)."""
        decorators = getattr(stmt, "decorator_list", [])
        return self.first_token(min(d.lineno for d in decorators), 0) if decorators else self.first_token(stmt.lineno, stmt.col_offset)

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
        waits = [{i for i in range(j) if names[i][0] & (names[j][0] | names[j][1]) or names[j][0] & names[i][1]} for j in range(len(stmts))]
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

        for j in sorted((j for j in range(len(stmts)) if j not in needed), key=lambda j: (keys[j], j)):
            place(j)
        return order

    def statement(self, stmt: ast.stmt, lo: int, hi: int) -> list[int]:
        """The token indices ``lo`` to ``hi`` of one statement, its blocks in canonical order."""
        out, at = [], lo
        for child in _child_blocks(stmt):
            first = min(hi, max(at, self.start(child[0])))
            last = child[-1]
            end = min(hi, max(first, bisect.bisect_left(self.starts, self.offset(last.end_lineno or last.lineno, last.end_col_offset or 0))))
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
        order = _Arranger(source, tokens).block(0, len(tokens), tree.body) if tree.body else list(range(len(tokens)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return tokens
    if sorted(order) != list(range(len(tokens))):  # every token once, or the order is not used
        return tokens
    return [tokens[i] for i in order]


def plain_lines(source: str) -> str:
    """``source`` with its lines ended by ``\\n`` alone (a ``\\r`` or ``\\r\\n`` ends a line too)."""
    return source.replace("\r\n", "\n").replace("\r", "\n")


def _line_key(line: str) -> str:
    return "".join(line.split())


def given_lines(source: str, release: Counter) -> set[int]:
    """The lines of ``source`` (0-based) that are the release's own lines of the cell, each release
    line taken as many times as the release has it (whitespace does not count)."""
    left, found = Counter(release), set()
    for row, line in enumerate(source.split("\n")):
        key = _line_key(line)
        if key and left[key] > 0:
            left[key] -= 1
            found.add(row)
    return found


def token_ids(tokens: list[Token], cache: dict[str, int]) -> list[int]:
    """A stable number for each token (the same in every run, unlike ``hash`` of a string)."""
    out = []
    for t in tokens:
        if t.text not in cache:
            cache[t.text] = int.from_bytes(hashlib.blake2b(t.text.encode("utf-8", "replace"), digest_size=8).digest(), "big")
        out.append(cache[t.text])
    return out


def kgram_hashes(ids: list[int]) -> list[int]:
    """The hash of every run of K tokens, in order (a tuple of ints hashes the same in every run)."""
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


# ---------------------------------------------------------------- the course's TODOs and the class's answers


@dataclass
class Todo:
    grade_id: str
    notebook: str
    release: Counter = field(default_factory=Counter)  # the release's own lines of the cell, whitespace taken out
    boilerplate: set[int] = field(default_factory=set)  # hashes of every run of K tokens of the release's code


def course_todos(course: Course, cache: dict[str, int]) -> list[Todo]:
    """Every TODO of the course (a code cell that learners answer), in course order, with its
    release code from every edition of the release."""
    found: dict[str, Todo] = {}
    for name in course.notebooks:
        for path in [course.release / f"{name}.ipynb", *sorted(course.release.glob(f"*/{name}.ipynb"))]:
            if not path.is_file():
                continue
            for cell in nbformat.read(path, as_version=4).cells:
                meta = cell.metadata.get("nbgrader", {})
                if cell.cell_type == "code" and meta.get("solution") and meta.get("grade_id"):
                    todo = found.setdefault(meta["grade_id"], Todo(meta["grade_id"], name))
                    todo.release |= Counter(key for key in map(_line_key, plain_lines(cell.source).split("\n")) if key)
                    todo.boilerplate.update(kgram_hashes(token_ids(normalized(cell.source), cache)))
    if not found:
        raise UnusableInput(f"the release in {course.release} has no answer cells (run `python -m autograde release` first)")
    return list(found.values())


def _source(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return None


def answer_cells(path: Path) -> dict[str, str] | None:
    """{grade id: source} of a notebook's answer cells (code cells with ``nbgrader.solution``), read
    as JSON within the grader's limits; cells that share a grade id are joined. None when the file
    is missing, a link, over the size limit, or not a notebook."""
    try:
        if path.is_symlink() or path.parent.is_symlink() or not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None
        raw = path.read_bytes()
        check_nodes(raw)
        nb = json.loads(raw)
    except (OSError, ValueError, RecursionError):  # TooManyObjects is a ValueError
        return None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        return None
    found: dict[str, str] = {}
    for cell in cells:
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        meta = meta.get("nbgrader") if isinstance(meta, dict) else None
        if not (isinstance(meta, dict) and cell.get("cell_type") == "code" and meta.get("solution") is True):
            continue
        gid, source = meta.get("grade_id"), _source(cell.get("source"))
        if isinstance(gid, str) and source is not None:
            found[gid] = f"{found[gid]}\n\n{source}" if gid in found else source
    return found


def students(out: Path) -> list[str]:
    """The student folders under OUT/submitted (links and hidden folders left out), sorted."""
    folder = out / "submitted"
    if not folder.is_dir() or folder.is_symlink():
        raise _unusable(out, "it has no submitted/ folder")
    try:
        with os.scandir(folder) as entries:
            names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))
    except OSError as exc:
        raise _unusable(out, f"its submitted/ folder cannot be read ({type(exc).__name__})") from None
    return names[:MAX_STUDENTS]


@dataclass
class Answer:
    student: str
    source: str  # as the learner wrote it (cut at MAX_ANSWER_CHARS)
    given: set[int]  # the release's lines in it
    tokens: list[Token]  # the learner's own code, as compared
    hashes: list[int]  # of every run of K of those tokens
    prints: frozenset[int] = frozenset()  # its fingerprints, as compared


def class_answers(todo: Todo, sources: dict[str, str | None], cache: dict[str, int]) -> tuple[list[Answer], dict[str, list[str]]]:
    """The answers to ``todo`` that can be compared, and the students left out by why: 'missing'
    (no notebook or no such cell), 'unanswered' (nothing but the release's lines), 'too_short'."""
    left: dict[str, list[str]] = {"missing": [], "unanswered": [], "too_short": []}
    answers = []
    for student, source in sources.items():
        if source is None:
            left["missing"].append(student)
            continue
        source = plain_lines(source[:MAX_ANSWER_CHARS])
        given = given_lines(source, todo.release)
        tokens = canonical_order(source, normalized(source, given))
        if not tokens:
            left["unanswered"].append(student)
            continue
        hashes = kgram_hashes(token_ids(tokens, cache))
        answers.append(Answer(student, source, given, tokens, hashes, frozenset(winnow(hashes) - todo.boilerplate)))
    common = common_prints(answers)
    kept = []
    for a in answers:
        a.prints = a.prints - common
        if len(a.prints) >= MIN_FINGERPRINTS:
            kept.append(a)
        else:
            left["too_short"].append(a.student)
    return kept, left


def common_prints(answers: list[Answer]) -> set[int]:
    """Fingerprints found in more than COMMON_SHARE of the distinct answers, when that is more than
    COMMON_MIN answers: the way most of the class writes a line, not a copy. Identical answers
    count once, so a copy handed round a large group stays a copy."""
    distinct = {a.prints for a in answers}
    limit = max(COMMON_MIN, COMMON_SHARE * len(distinct))
    seen = Counter(h for prints in distinct for h in prints)
    return {h for h, n in seen.items() if n > limit}


# ---------------------------------------------------------------- comparing


@dataclass(frozen=True)
class Match:
    score: float  # shared fingerprints / fingerprints of the smaller answer
    shared: int
    first: int  # groups (the same index twice: students of one group, with the same normalized answer)
    second: int


def compare(groups: list[list[Answer]], floor: float) -> list[Match]:
    """Every pair of groups (each group: answers with the same fingerprints) scoring ``floor`` or
    more, and every group of two or more, most similar first. Candidates come from an inverted
    index (fingerprint -> groups), so groups that share nothing are never looked at."""
    index: dict[int, list[int]] = defaultdict(list)
    for g, group in enumerate(groups):
        for h in group[0].prints:
            index[h].append(g)  # in increasing g
    found = []
    for g, group in enumerate(groups):
        prints = group[0].prints
        if len(group) > 1:
            found.append(Match(1.0, len(prints), g, g))
        shared: Counter = Counter()
        for h in prints:
            bucket = index[h]
            shared.update(bucket[bisect.bisect_right(bucket, g) :])
        for other, n in shared.items():
            score = n / min(len(prints), len(groups[other][0].prints))
            if score >= floor:
                found.append(Match(round(score, 4), n, g, other))
    found.sort(key=lambda m: (-m.score, -m.shared, groups[m.first][0].student, groups[m.second][0].student))
    return found


def group_answers(answers: list[Answer]) -> list[list[Answer]]:
    """The answers by their fingerprints: students with the same normalized answer in one group."""
    by_prints: dict[frozenset[int], list[Answer]] = {}
    for a in answers:
        by_prints.setdefault(a.prints, []).append(a)
    return sorted(by_prints.values(), key=lambda group: group[0].student)


def student_pairs(groups: list[list[Answer]], matches: list[Match], threshold: float) -> tuple[int, list[dict], set[str]]:
    """(how many pairs of students are flagged, the first LISTED of them, the students flagged)."""
    total, listed, flagged = 0, [], set()
    for m in matches:
        if m.score < threshold:
            break
        a, b = groups[m.first], groups[m.second]
        pairs = [(x, y) for i, x in enumerate(a) for y in a[i + 1 :]] if m.first == m.second else [(x, y) for x in a for y in b]
        total += len(pairs)
        flagged.update(x.student for pair in pairs for x in pair)
        for x, y in pairs[: max(0, LISTED - len(listed))]:
            x, y = sorted((x, y), key=lambda answer: answer.student)
            listed.append({"a": x.student, "b": y.student, "score": m.score, "shared": m.shared, "fingerprints": [len(x.prints), len(y.prints)]})
    return total, listed, flagged


# ---------------------------------------------------------------- the numbers


def _entry(groups: list[list[Answer]], m: Match, threshold: float) -> dict:
    """One pair as the page shows it: the two answers side by side, the code they share marked."""
    first, second = groups[m.first], groups[m.second]
    a, b = (first[0], first[1]) if m.first == m.second else (first[0], second[0])
    shared = a.prints & b.prints
    also_a, also_b = (first[2:], []) if m.first == m.second else (first[1:], second[1:])
    return {
        "score": m.score,
        "shared": m.shared,
        "flagged": m.score >= threshold,
        "a": a.student,
        "b": b.student,
        "a_also": [x.student for x in also_a],
        "b_also": [x.student for x in also_b],
        "a_code": segments(a, shared),
        "b_code": segments(b, shared),
    }


def todo_section(todo: Todo, sources: dict[str, str | None], threshold: float, cache: dict[str, int]) -> tuple[dict, dict]:
    """One TODO's findings (for similarity.json) and its view (the page's pairs, with their code)."""
    answers, left = class_answers(todo, sources, cache)
    groups = group_answers(answers)
    matches = compare(groups, max(0.0, threshold - NEAR))
    total, listed, flagged = student_pairs(groups, matches, threshold)
    section = {
        "grade_id": todo.grade_id,
        "notebook": todo.notebook,
        "students": len(sources),
        "compared": len(answers),
        "too_short": len(left["too_short"]),
        "unanswered": len(left["unanswered"]),
        "missing": len(left["missing"]),
        "distinct_answers": len(groups),
        "pairs_above_threshold": total,
        "pairs_listed": len(listed),
        "students_flagged": len(flagged),
        "pairs": listed,
        "left_out": {why: sorted(names) for why, names in left.items()},  # the students not compared, by why
    }
    return section, {**section, "entries": [_entry(groups, m, threshold) for m in matches[:SHOWN]]}


def build_similarity(course: Course, out: Path, threshold: float = THRESHOLD) -> tuple[dict, list[dict]]:
    """Read a graded folder and compare the class's answers: (what similarity.json holds, the
    page's view of each TODO)."""
    if not out.is_dir():
        raise UnusableInput(f"{out} is not a folder (run `python -m autograde grade SUBMISSIONS --out {out}` first)")
    if not 0 < threshold <= 1:
        raise UnusableInput(f"the threshold is a share of fingerprints, above 0 and at most 1, not {threshold}")
    names = students(out)
    warnings = [f"only the first {MAX_STUDENTS:,} student folders were read"] if len(names) >= MAX_STUDENTS else []
    cache: dict[str, int] = {}
    todos = course_todos(course, cache)
    cells = {
        student: {nb: answer_cells(out / "submitted" / student / course.assignment / f"{nb}.ipynb") for nb in {t.notebook for t in todos}}
        for student in names
    }
    sections, views = [], []
    for todo in todos:
        section, view = todo_section(todo, {s: (cells[s][todo.notebook] or {}).get(todo.grade_id) for s in names}, threshold, cache)
        sections.append(section)
        views.append(view)
    data = {
        "assignment": course.assignment,
        "students": len(names),
        "threshold": threshold,
        "method": {
            "score": "shared fingerprints / fingerprints of the smaller answer",
            "order": "statements that do not depend on each other read in one canonical order",
            "k": K,
            "window": WINDOW,
            "min_fingerprints": MIN_FINGERPRINTS,
            "common_share": COMMON_SHARE,
            "common_min": COMMON_MIN,
        },
        "todos": sections,
        "warnings": warnings,
    }
    return data, views


# ---------------------------------------------------------------- the page


def segments(answer: Answer, shared: frozenset[int]) -> list[tuple[str, str]]:
    """The answer's source in pieces (text, kind), cut at MAX_SHOWN_CHARS: 'shared' (tokens of a
    run the other answer has too, marked line by line), 'given' (the release's lines), '' (the rest)."""
    covered = sorted({i + j for i, h in enumerate(answer.hashes) if h in shared for j in range(K)})
    spans: list[list] = []  # [start, end, kind, row, last token]
    for i in covered:
        t = answer.tokens[i]
        if spans and spans[-1][3] == t.row and spans[-1][4] == i - 1:
            spans[-1][1], spans[-1][4] = t.end, i
        else:
            spans.append([t.start, t.end, "shared", t.row, i])
    at = 0
    for row, line in enumerate(answer.source.split("\n")):
        if row in answer.given:
            spans.append([at, at + len(line) + 1, "given", row, -1])
        at += len(line) + 1
    text = answer.source[:MAX_SHOWN_CHARS]
    pieces: list[tuple[str, str]] = []
    pos = 0
    for start, end, kind, _row, _last in sorted(spans):
        start, end = max(start, pos), min(end, len(text))
        if start >= end:
            continue
        if start > pos:
            pieces.append((text[pos:start], ""))
        pieces.append((text[start:end], kind))
        pos = end
    if pos < len(text):
        pieces.append((text[pos:], ""))
    if len(answer.source) > len(text):
        pieces.append((f"\n… (cut: {len(answer.source) - len(text):,} more characters)", "cut"))
    return pieces


# the page is one self-contained file: its own styles, no scripts, no images
SIMILARITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
SHOWN_ALSO = 30  # names listed for students with the same answer
PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Similar answers · {{ data.assignment }}</title>
<style>
{{ base_style }}
.pair { border: 1px solid #ccc; margin: 1em 0; padding: 0 0.8em 0.5em; } .pair.flagged { border-color: #c62828; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #fafafa; padding: 0.5em; margin: 0; font-size: 0.85em; }
.warn { background: #fff3cd; padding: 0.5em; border: 1px solid #e0c36a; }
mark { background: #ffe082; } .given { color: #6b6b6b; } .cut { color: #c62828; } .note { color: #546e7a; }
</style></head><body>
<h1>Similar answers | 相似答案 · {{ data.assignment }}</h1>
<p>{{ data.students }} student(s). Each TODO's answers are compared two by two on their code alone: the release's own
lines, comments, docstrings and brackets are left out, every name counts as the same name and statements that do
not depend on each other are read in one order, so a renamed, reformatted or reordered copy still matches. The score
is the share of the smaller answer's fingerprints (runs of {{ data.method.k }} tokens) found in the other; a pair is
flagged at {{ pct(data.threshold) }} or more. Code that many different answers share is not counted, and an answer
with fewer than {{ data.method.min_fingerprints }} fingerprints of its own is <em>too short to compare</em>: two correct
answers of a few lines can be the same without anyone copying.
A high score is a reason to read the two answers, not proof.</p>
{% for w in data.warnings %}<p class="warn">{{ w }}</p>{% endfor %}
<table id="summary"><tr><th>TODO</th><th>notebook</th><th>compared</th><th>too short to compare</th><th>unanswered</th>
<th>missing</th><th>pairs flagged</th><th>students in them</th></tr>
{% for t in data.todos %}<tr data-todo="{{ t.grade_id }}"><td><a href="#{{ t.grade_id }}">{{ t.grade_id }}</a></td><td>{{ t.notebook }}</td>
<td class="n">{{ t.compared }}</td><td class="n too_short">{{ t.too_short }}</td><td class="n">{{ t.unanswered }}</td>
<td class="n">{{ t.missing }}</td><td class="n flagged">{{ t.pairs_above_threshold }}</td><td class="n">{{ t.students_flagged }}</td></tr>
{% endfor %}</table>
{% for t in views %}<section id="{{ t.grade_id }}" data-todo="{{ t.grade_id }}"><h2>{{ t.grade_id }} · {{ t.notebook }}</h2>
<p>{{ t.compared }} answer(s) compared ({{ t.distinct_answers }} different), {{ t.too_short }} too short to compare,
{{ t.unanswered }} unanswered (the release's code only), {{ t.missing }} missing. {{ t.pairs_above_threshold }} pair(s) flagged.</p>
{% if t.too_short and not t.compared %}<p class="note">Every answer to this TODO is too short to compare.</p>{% endif %}
{% if t.compared and not t.entries %}<p class="note">No pair at or near the threshold.</p>{% endif %}
{% if t.pairs_above_threshold > t.entries|selectattr("flagged")|list|length %}<p class="note">The {{ t.entries|length }} most
similar shown; similarity.json lists {{ t.pairs_listed }} of the {{ t.pairs_above_threshold }} flagged pairs.</p>{% endif %}
{% for e in t.entries %}<div class="pair {{ 'flagged' if e.flagged else 'near' }}">
<h3><span class="student">{{ e.a }}</span> · <span class="student">{{ e.b }}</span>: <span class="score">{{ pct(e.score) }}</span>
{{ "flagged" if e.flagged else "below the threshold" }} ({{ e.shared }} shared fingerprints)</h3>
<div class="sides">{% for who, also, code in ((e.a, e.a_also, e.a_code), (e.b, e.b_also, e.b_code)) %}<div>
<p><b class="student">{{ who }}</b>{% if also %} <span class="note">(the same answer, renamed or reformatted, also from
{% for s in also[:shown_also] %}{{ s }}{{ ", " if not loop.last }}{% endfor %}{% if also|length > shown_also %} and
{{ also|length - shown_also }} more{% endif %})</span>{% endif %}</p>
<pre>{% for text, kind in code -%}
{% if kind == "shared" %}<mark>{{ text }}</mark>{% elif kind %}<span class="{{ kind }}">{{ text }}</span>
{%- else %}{{ text }}{% endif %}{% endfor %}</pre>
</div>{% endfor %}</div></div>
{% endfor %}</section>
{% endfor %}
</body></html>
"""


def _pct(value) -> str:
    """A score as a percentage, rounded down to 0.1% (69.96% is not shown as 70%, the threshold)."""
    return "–" if value is None else f"{math.floor(1000 * value + 1e-9) / 10:g}%"


def render(data: dict, views: list[dict]) -> str:
    from jinja2 import Environment, StrictUndefined

    env = Environment(autoescape=True, undefined=StrictUndefined)
    env.globals.update(pct=_pct)
    page = env.from_string(PAGE).render(data=data, views=views, shown_also=SHOWN_ALSO, base_style=Markup(base_style("90em")))
    return add_csp(page, SIMILARITY_POLICY)


def write_similarity(course: Course, out: Path, threshold: float | None = None) -> tuple[Path, Path, dict]:
    """Write OUT/similarity.html and OUT/similarity.json. Returns (page, findings file, findings).

    ``threshold`` (default THRESHOLD, 0.7) is the share of the smaller answer's fingerprints that
    two answers must share to be flagged. On the course's measurement set (tests/data/similarity:
    five answers to each TODO written apart, the course's own, copies disguised by hand and by
    tests/data/similarity/make_copies.py; benchmarks/bench_similarity.py) no two answers from
    different origins score over 0.60, the usual way to write a TODO against the course's answer
    included, and every copy long enough to compare that was renamed, reformatted, reordered or
    given dead code scores 0.82 or more: 0.7 lies in that gap. Copies whose expressions were split
    or whose loops were rewritten score from 0.22 up, so some of them are missed at any threshold
    that flags no independent pair; a lower threshold flags answers that follow the same hint.
    """
    data, views = build_similarity(course, out, THRESHOLD if threshold is None else threshold)
    page = render(data, views)
    target, numbers = write_page_and_numbers(out, "similarity", page, data)
    return target, numbers, data
