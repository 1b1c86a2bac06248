"""``python -m autograde similarity OUT``: which students handed in the same code for a TODO, one
self-contained HTML page (``OUT/similarity.html``) and the same findings in ``OUT/similarity.json``.

It reads the notebooks ``grade`` kept in OUT (through the ledger: ``kept_notebook``),
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

import bisect
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..course import Course, UnusableInput
from ..ledger.folder import Ledger
from ..ledger.layout import Out
from ..matching import MAX_BYTES, check_nodes
from .fingerprints import (
    WINDOW,
    K,
    Token,
    canonical_order,
    given_lines,
    kgram_hashes,
    line_key,
    normalized,
    plain_lines,
    token_ids,
    winnow,
)
from .similarity_findings import LeftOut, Method, PairFound, PairShown, Similarity, TodoView
from .similarity_page import SIMILARITY_POLICY, render

__all__ = [
    "SIMILARITY_POLICY",
    "THRESHOLD",
    "build_similarity",
    "canonical_order",
    "given_lines",
    "kgram_hashes",
    "normalized",
    "render",
    "token_ids",
    "winnow",
    "write_similarity",
]

# the default: flagged at 70% of the smaller answer's fingerprints (why: write_similarity)
THRESHOLD = 0.7
# fewer fingerprints of its own (about 55 tokens, 5-7 lines of code): too short to compare
MIN_FINGERPRINTS = 25
# a fingerprint in more than this share of the distinct answers to a TODO is common code ...
COMMON_SHARE = 0.2
COMMON_MIN = 10  # ... when that is more than this many answers (a small class has no "common" code)
NEAR = 0.15  # the page also shows pairs this far below the threshold
SHOWN = 20  # pairs per TODO on the page
LISTED = 2000  # flagged pairs per TODO in similarity.json (the count covers them all)
MAX_ANSWER_CHARS = 20_000  # of one answer compared (a longer one is cut)
MAX_SHOWN_CHARS = 6_000  # of one answer shown on the page
MAX_STUDENTS = 5_000  # student folders read


# ---------------------------------------------------------------- the course's TODOs and the
# class's answers


@dataclass
class Todo:
    grade_id: str
    notebook: str
    # the release's own lines of the cell, whitespace taken out
    release: Counter = field(default_factory=Counter)
    # hashes of every run of K tokens of the release's code
    boilerplate: set[int] = field(default_factory=set)


def course_todos(course: Course, cache: dict[str, int]) -> list[Todo]:
    """Every TODO of the course (a code cell that learners answer), in course order, with its
    release code from every edition of the release."""
    found: dict[str, Todo] = {}
    for name in course.notebooks:
        for path in [
            course.release / f"{name}.ipynb",
            *sorted(course.release.glob(f"*/{name}.ipynb")),
        ]:
            if not path.is_file():
                continue
            for cell in nbformat.read(path, as_version=4).cells:
                meta = cell.metadata.get("nbgrader", {})
                if cell.cell_type == "code" and meta.get("solution") and meta.get("grade_id"):
                    todo = found.setdefault(meta["grade_id"], Todo(meta["grade_id"], name))
                    todo.release |= Counter(
                        key for key in map(line_key, plain_lines(cell.source).split("\n")) if key
                    )
                    todo.boilerplate.update(kgram_hashes(token_ids(normalized(cell.source), cache)))
    if not found:
        raise UnusableInput(
            f"the release in {course.release} has no answer cells (run `python -m "
            "autograde release` first)"
        )
    return list(found.values())


def _source(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return None


def answer_cells(raw: bytes | None) -> dict[str, str] | None:
    """{grade id: source} of a notebook's answer cells (code cells with ``nbgrader.solution``), read
    as JSON within the grader's limits; cells that share a grade id are joined. None when there is
    no notebook (``raw`` None: missing, a link, over the size limit) or it is not one."""
    if raw is None:
        return None
    try:
        check_nodes(raw)
        nb = json.loads(raw)
    except (ValueError, RecursionError):  # TooManyObjects is a ValueError
        return None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        return None
    found: dict[str, str] = {}
    for cell in cells:
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        meta = meta.get("nbgrader") if isinstance(meta, dict) else None
        if not (
            isinstance(meta, dict)
            and cell.get("cell_type") == "code"
            and meta.get("solution") is True
        ):
            continue
        gid, source = meta.get("grade_id"), _source(cell.get("source"))
        if isinstance(gid, str) and source is not None:
            found[gid] = f"{found[gid]}\n\n{source}" if gid in found else source
    return found


@dataclass
class Answer:
    student: str
    source: str  # as the learner wrote it (cut at MAX_ANSWER_CHARS)
    given: set[int]  # the release's lines in it
    tokens: list[Token]  # the learner's own code, as compared
    hashes: list[int]  # of every run of K of those tokens
    prints: frozenset[int] = frozenset()  # its fingerprints, as compared


def class_answers(
    todo: Todo, sources: dict[str, str | None], cache: dict[str, int]
) -> tuple[list[Answer], LeftOut]:
    """The answers to ``todo`` that can be compared, and the students left out by why: missing (no
    notebook or no such cell), unanswered (nothing but the release's lines), too short."""
    left = LeftOut()
    answers = []
    for student, source in sources.items():
        if source is None:
            left.missing.append(student)
            continue
        source = plain_lines(source[:MAX_ANSWER_CHARS])
        given = given_lines(source, todo.release)
        tokens = canonical_order(source, normalized(source, given))
        if not tokens:
            left.unanswered.append(student)
            continue
        hashes = kgram_hashes(token_ids(tokens, cache))
        answers.append(
            Answer(
                student, source, given, tokens, hashes, frozenset(winnow(hashes) - todo.boilerplate)
            )
        )
    common = common_prints(answers)
    kept = []
    for a in answers:
        a.prints = a.prints - common
        if len(a.prints) >= MIN_FINGERPRINTS:
            kept.append(a)
        else:
            left.too_short.append(a.student)
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
    # groups (the same index twice: students of one group, with the same normalized answer)
    first: int
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
    found.sort(
        key=lambda m: (-m.score, -m.shared, groups[m.first][0].student, groups[m.second][0].student)
    )
    return found


def group_answers(answers: list[Answer]) -> list[list[Answer]]:
    """The answers by their fingerprints: students with the same normalized answer in one group."""
    by_prints: dict[frozenset[int], list[Answer]] = {}
    for a in answers:
        by_prints.setdefault(a.prints, []).append(a)
    return sorted(by_prints.values(), key=lambda group: group[0].student)


def student_pairs(
    groups: list[list[Answer]], matches: list[Match], threshold: float
) -> tuple[int, list[PairFound], set[str]]:
    """(how many pairs of students are flagged, the first LISTED of them, the students flagged)."""
    total, listed, flagged = 0, [], set()
    for m in matches:
        if m.score < threshold:
            break
        a, b = groups[m.first], groups[m.second]
        pairs = (
            [(x, y) for i, x in enumerate(a) for y in a[i + 1 :]]
            if m.first == m.second
            else [(x, y) for x in a for y in b]
        )
        total += len(pairs)
        flagged.update(x.student for pair in pairs for x in pair)
        for x, y in pairs[: max(0, LISTED - len(listed))]:
            x, y = sorted((x, y), key=lambda answer: answer.student)
            listed.append(
                PairFound(x.student, y.student, m.score, m.shared, [len(x.prints), len(y.prints)])
            )
    return total, listed, flagged


# ---------------------------------------------------------------- the numbers


def _entry(groups: list[list[Answer]], m: Match, threshold: float) -> PairShown:
    """One pair as the page shows it: the two answers side by side, the code they share marked."""
    first, second = groups[m.first], groups[m.second]
    a, b = (first[0], first[1]) if m.first == m.second else (first[0], second[0])
    shared = a.prints & b.prints
    also_a, also_b = (first[2:], []) if m.first == m.second else (first[1:], second[1:])
    return PairShown(
        score=m.score,
        shared=m.shared,
        flagged=m.score >= threshold,
        a=a.student,
        b=b.student,
        a_also=[x.student for x in also_a],
        b_also=[x.student for x in also_b],
        a_code=segments(a, shared),
        b_code=segments(b, shared),
    )


def todo_section(
    todo: Todo, sources: dict[str, str | None], threshold: float, cache: dict[str, int]
) -> TodoView:
    """One TODO's findings (``findings()``: for similarity.json) and the page's pairs, with their
    code."""
    answers, left = class_answers(todo, sources, cache)
    groups = group_answers(answers)
    matches = compare(groups, max(0.0, threshold - NEAR))
    total, listed, flagged = student_pairs(groups, matches, threshold)
    return TodoView(
        grade_id=todo.grade_id,
        notebook=todo.notebook,
        students=len(sources),
        compared=len(answers),
        too_short=len(left.too_short),
        unanswered=len(left.unanswered),
        missing=len(left.missing),
        distinct_answers=len(groups),
        pairs_above_threshold=total,
        pairs_listed=len(listed),
        students_flagged=len(flagged),
        pairs=listed,
        # the students not compared
        left_out=LeftOut(sorted(left.missing), sorted(left.unanswered), sorted(left.too_short)),
        entries=[_entry(groups, m, threshold) for m in matches[:SHOWN]],
    )


def build_similarity(
    course: Course, out: Path, threshold: float = THRESHOLD
) -> tuple[Similarity, list[TodoView]]:
    """Read a graded folder and compare the class's answers: (what similarity.json holds, the
    page's view of each TODO)."""
    if not out.is_dir():
        raise UnusableInput(
            f"{out} is not a folder (run `python -m autograde grade SUBMISSIONS --out {out}` first)"
        )
    if not 0 < threshold <= 1:
        raise UnusableInput(
            f"the threshold is a share of fingerprints, above 0 and at most 1, not {threshold}"
        )
    ledger = Ledger(out, course)
    names = ledger.kept_students(MAX_STUDENTS)
    warnings = (
        [f"only the first {MAX_STUDENTS:,} student folders were read"]
        if len(names) >= MAX_STUDENTS
        else []
    )
    cache: dict[str, int] = {}
    todos = course_todos(course, cache)
    cells = {
        student: {
            nb: answer_cells(ledger.kept_notebook(student, nb, MAX_BYTES))
            for nb in {t.notebook for t in todos}
        }
        for student in names
    }
    views = [
        todo_section(
            todo,
            {s: (cells[s][todo.notebook] or {}).get(todo.grade_id) for s in names},
            threshold,
            cache,
        )
        for todo in todos
    ]
    method = Method(
        score="shared fingerprints / fingerprints of the smaller answer",
        order="statements that do not depend on each other read in one canonical order",
        k=K,
        window=WINDOW,
        min_fingerprints=MIN_FINGERPRINTS,
        common_share=COMMON_SHARE,
        common_min=COMMON_MIN,
    )
    return Similarity(
        course.assignment,
        len(names),
        threshold,
        method,
        [view.findings() for view in views],
        warnings,
    ), views


def segments(answer: Answer, shared: frozenset[int]) -> list[tuple[str, str]]:
    """The answer's source in pieces (text, kind), cut at MAX_SHOWN_CHARS: 'shared' (tokens of a run
    the other answer has too, marked line by line), 'given' (the release's lines), '' (the rest)."""
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


def write_similarity(
    course: Course, out: Path, threshold: float | None = None
) -> tuple[Path, Path, Similarity]:
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
    found, views = build_similarity(course, out, THRESHOLD if threshold is None else threshold)
    page = render(found, views)
    target, numbers = Ledger(out, course).write_page_and_numbers(
        Out.SIMILARITY, page, found.to_json()
    )
    return target, numbers, found
