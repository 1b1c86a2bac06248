"""Benchmark: the similarity report (``write_similarity``): which copies it flags and which answers
written apart it leaves alone (the default), and how long it takes on a large class (``--speed``).

Flags (the default). The measurement set is tests/data/similarity: for every TODO, five correct
answers written independently (``v1`` ... ``v5``), the course's own (``course``), two copies made by
hand (``copy_of_v1``, ``copy_of_v3``) and, in ``generated/``, copies of each of the six made by
tests/data/similarity/make_copies.py: ``renamed``, ``reordered`` (independent statements shuffled),
``split`` (``a = b + c`` as ``t = b``, ``a = t + c``), ``loops`` (``for`` as ``while``,
comprehensions as loops), ``comments``, ``deadcode`` and ``all`` (every one of them at once). For
each TODO and each kind, one class (the eight answers and that kind's six copies) goes through the
report's own code (``todo_section``, which scores every pair). Two answers of one origin (a copy and
its original, or two copies of one answer) are a copy pair; two answers of different origins are an
independent pair, except two generated copies, which share the generator's own code (its loops, its
names) and are left out. A pair in several classes counts once: a copy pair with its lowest score,
an independent pair with its highest. Printed, at several thresholds: copy pairs flagged of those
compared (an answer under MIN_FINGERPRINTS is "too short to compare" and never flagged: those pairs
are counted apart), independent pairs flagged; per TODO, per kind, overall; then the same with the
tokens in their source order (the scoring before statements were put in a canonical order), for
comparison.

Speed (``--speed``). Makes a graded folder of STUDENTS students
(OUT/submitted/<student>/<assignment>/<notebook>.ipynb): each student answers each TODO with one of
the test class's answers (tests/data/similarity, and the course's own), with its learner-written
names renamed at random, a few statements of its own added (so that nearly every answer differs from
every other, as in a real class), comments and blank lines sprinkled in; a few leave a TODO
unanswered or a notebook out. That is a hard case: every answer has about 60 others close to it, so
the index finds thousands of candidate pairs. Reports the seconds ``write_similarity`` takes (the
class is built before the clock starts), the pairs flagged per TODO, and the page's size.

    python benchmarks/bench_similarity.py [--thresholds 0.5,0.6,0.7,0.8]
    python benchmarks/bench_similarity.py --speed [--students 500] [--seed 1]
"""

from __future__ import annotations

import argparse
import builtins
import io
import itertools
import json
import keyword
import random
import sys
import tempfile
import time
import tokenize
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from autograde.course import Course  # noqa: E402
from autograde.term import similarity  # noqa: E402
from autograde.term.similarity import write_similarity  # noqa: E402

from submissions import answer  # noqa: E402

DATA = ROOT / "tests" / "data" / "similarity"
KEPT = set(dir(builtins)) | set(keyword.kwlist) | {"match", "case"}
WORDS = (
    "alpha beta gamma delta item value result total count window layer chunk part piece stamp "
    "tick mark slot"
).split()


def variants() -> dict[str, list[str]]:
    """{TODO: the test class's answer cells to it}."""
    return {
        p.name: [f.read_text(encoding="utf-8") for f in sorted(p.glob("*.txt"))] + [answer(p.name)]
        for p in sorted(DATA.iterdir())
        if p.is_dir()
    }


def release_cells(course: Course) -> dict[str, dict]:
    """{notebook: the release notebook as JSON}."""
    return {
        name: json.loads((course.release / f"{name}.ipynb").read_text(encoding="utf-8"))
        for name in course.notebooks
    }


def names_in(source: str) -> list[tuple[int, int, int, str]]:
    """(row, start col, end col, name) of every plain name (not after a dot) in ``source``."""
    found, previous = [], ""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME and previous != "." and tok.string not in KEPT:
            found.append((tok.start[0] - 1, tok.start[1], tok.end[1], tok.string))
        previous = tok.string
    return found


def disguise(source: str, release: str, rng: random.Random) -> str:
    """``source`` with its own names (those the release does not use) renamed, two to four
    statements of its own added after lines of the learner's, and a comment or a blank line here
    and there."""
    given = {name for *_, name in names_in(release)}
    mapping: dict[str, str] = {}
    lines = source.splitlines()
    for row, start, end, name in sorted(names_in(source), reverse=True):
        if name not in given:
            new = mapping.setdefault(name, f"{rng.choice(WORDS)}_{len(mapping)}")
            lines[row] = lines[row][:start] + new + lines[row][end:]
    own = [
        i
        for i, line in enumerate(lines)
        if line.strip()
        and line not in release
        and not line.rstrip().endswith((":", ",", "(", "[", "\\"))
    ]
    for at in sorted(rng.sample(own, min(len(own), rng.randint(2, 4))), reverse=True):
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        lines.insert(
            at + 1,
            f"{indent}{rng.choice(WORDS)}_{rng.randrange(10**6)} = "
            f"{rng.randrange(10**6)} * {rng.choice(WORDS)}_x",
        )
    for at in sorted(rng.sample(range(len(lines)), min(len(lines), 3)), reverse=True):
        lines.insert(at, rng.choice(["", "    # checked by hand", "    # see the hint above"]))
    return "\n".join(lines) + "\n"


def make_class(course: Course, out: Path, students: int, rng: random.Random) -> None:
    notebooks = release_cells(course)
    answers = variants()
    where = {}
    for name, nb in notebooks.items():
        for index, cell in enumerate(nb["cells"]):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell["cell_type"] == "code" and meta.get("solution"):
                where[meta["grade_id"]] = (name, index, "".join(cell["source"]))
    for number in range(students):
        student = f"s{number:04d}"
        folder = out / "submitted" / student / course.assignment
        folder.mkdir(parents=True)
        for name, nb in notebooks.items():
            if rng.random() < 0.02:
                continue  # a notebook not handed in
            cells = list(nb["cells"])
            for gid, (nb_name, index, release) in where.items():
                if nb_name == name and rng.random() >= 0.05:  # 5% leave the scaffold as it was
                    cells[index] = {
                        **cells[index],
                        "source": disguise(rng.choice(answers[gid]), release, rng),
                    }
            (folder / f"{name}.ipynb").write_text(
                json.dumps({**nb, "cells": cells}), encoding="utf-8"
            )


# ---------------------------------------------------------------- copies flagged, independent
# answers not

KINDS = ("renamed", "reordered", "split", "loops", "comments", "deadcode", "all")
ORIGINS = ("v1", "v2", "v3", "v4", "v5", "course")


def origin(student: str) -> str:
    """The independent answer a student's answer comes from (``split_of_v2`` and ``copy_of_v2``:
    ``v2``)."""
    return student.rsplit("_of_", 1)[-1]


def is_generated(student: str) -> bool:
    return student.split("_of_", 1)[0] in KINDS


def measurement_classes(todo: str) -> dict[str, dict[str, str]]:
    """{kind: {student: answer cell}}: the eight answers of the TODO and the six copies of one
    kind."""
    base = {p.stem: p.read_text(encoding="utf-8") for p in sorted((DATA / todo).glob("*.txt"))}
    base["course"] = answer(todo)
    return {
        kind: {
            **base,
            **{
                f"{kind}_of_{o}": (DATA / todo / "generated" / f"{kind}_of_{o}.txt").read_text(
                    encoding="utf-8"
                )
                for o in ORIGINS
            },
        }
        for kind in KINDS
    }


def pair_scores(course: Course) -> dict[tuple[str, str, str], dict]:
    """{(TODO, a, b): {score, compared, copy, kind}} of every pair counted (see the docstring)."""
    cache: dict[str, int] = {}
    todos = {t.grade_id: t for t in similarity.course_todos(course, cache)}
    found: dict[tuple[str, str, str], dict] = {}
    for gid in sorted(p.name for p in DATA.iterdir() if p.is_dir()):
        for sources in measurement_classes(gid).values():
            # every pair that shares a fingerprint
            section = similarity.todo_section(todos[gid], sources, 1e-9, cache)
            scores = {(p.a, p.b): p.score for p in section.pairs}
            short = set(section.left_out.too_short)
            for a, b in itertools.combinations(sorted(sources), 2):
                if is_generated(a) and is_generated(b) and origin(a) != origin(b):
                    continue
                copy = origin(a) == origin(b)
                pair = {
                    "score": scores.get((a, b), 0.0),
                    "compared": a not in short and b not in short,
                    "copy": copy,
                }
                pair["kind"] = (
                    (
                        "siblings"
                        if origin(a) not in (a, b)
                        else max(a, b, key=len).split("_of_", 1)[0]
                    )
                    if copy
                    else "-"
                )
                seen = found.get((gid, a, b))
                if seen is None or (
                    pair["score"] < seen["score"] if copy else pair["score"] > seen["score"]
                ):
                    found[(gid, a, b)] = pair
    return found


def tally(pairs: list[dict], threshold: float) -> str:
    copies = [p for p in pairs if p["copy"] and p["compared"]]
    independent = [p for p in pairs if not p["copy"] and p["compared"]]
    short = sum(p["copy"] and not p["compared"] for p in pairs)
    caught = sum(p["score"] >= threshold for p in copies)
    wrong = sum(p["score"] >= threshold for p in independent)
    recall = f"{100 * caught / len(copies):.0f}%" if copies else "-"
    return (
        f"{caught:>3}/{len(copies):<3} {recall:>4} ({short:>2} short) | "
        f"{wrong:>2}/{len(independent):<4}"
    )


def report(found: dict, thresholds: list[float], title: str) -> None:
    print(
        f"\n{title}\ncopy pairs flagged/compared (recall, too short to compare) | independent "
        "pairs flagged/compared"
    )
    print(f"{'':<16}" + "".join(f"{'threshold ' + str(t):<36}" for t in thresholds))
    by_todo: dict[str, list[dict]] = defaultdict(list)
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for (gid, _a, _b), pair in sorted(found.items()):
        by_todo[gid].append(pair)
        by_kind[pair["kind"]].append(pair)
    for name, pairs in [*sorted(by_todo.items()), ("overall", list(found.values()))]:
        print(f"{name:<16}" + "".join(f"{tally(pairs, t):<36}" for t in thresholds))
    print(
        "copies by kind (against their original; siblings: two copies of one answer), at the "
        f"default threshold {similarity.THRESHOLD}:"
    )
    for kind in ("copy", *KINDS, "siblings"):
        compared = [p["score"] for p in by_kind[kind] if p["compared"]]
        print(
            f"  {kind:<10}{tally(by_kind[kind], similarity.THRESHOLD)}  lowest score "
            f"{min(compared, default=0):.2f}"
        )
    copies = [p["score"] for p in found.values() if p["copy"] and p["compared"]]
    independent = [p["score"] for p in found.values() if not p["copy"] and p["compared"]]
    print(
        f"the default threshold {similarity.THRESHOLD}: "
        f"{tally(list(found.values()), similarity.THRESHOLD)}; highest score of an "
        f"independent pair {max(independent):.2f}, lowest of a copy {min(copies):.2f}, "
        "copies under the threshold "
        f"{sum(s < similarity.THRESHOLD for s in copies)}"
    )


def flags(course: Course, thresholds: list[float]) -> None:
    begin = time.perf_counter()
    report(pair_scores(course), thresholds, "statements in canonical order (the report as it is)")
    kept = similarity.canonical_order
    similarity.canonical_order = lambda source, tokens: tokens
    try:
        report(
            pair_scores(course), thresholds, "tokens in source order (before the canonical order)"
        )
    finally:
        similarity.canonical_order = kept
    print(f"\n{time.perf_counter() - begin:.1f} s")


# ---------------------------------------------------------------- speed


def speed(course: Course, students: int, seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        begin = time.perf_counter()
        make_class(course, out, students, random.Random(seed))
        built = time.perf_counter() - begin
        begin = time.perf_counter()
        page, _, data = write_similarity(course, out)
        seconds = time.perf_counter() - begin
        size = page.stat().st_size
    print(f"class of {students} built in {built:.1f} s")
    print(
        f"{'TODO':<16} {'compared':>8} {'too short':>9} {'unanswered':>10} {'missing':>7} "
        f"{'distinct':>8} {'flagged pairs':>13}"
    )
    for t in data.todos:
        print(
            f"{t.grade_id:<16} {t.compared:>8} {t.too_short:>9} {t.unanswered:>10} {t.missing:>7} "
            f"{t.distinct_answers:>8} {t.pairs_above_threshold:>13}"
        )
    print(f"page: {size / 1e6:.1f} MB")
    print(f"write_similarity: {seconds:.1f} s for {students} students")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--speed", action="store_true", help="time the report on a large synthetic class instead"
    )
    parser.add_argument("--students", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--thresholds", default="0.5,0.6,0.7,0.8")
    args = parser.parse_args()
    course = Course.load()
    if args.speed:
        speed(course, args.students, args.seed)
    else:
        flags(course, [float(t) for t in args.thresholds.split(",")])


if __name__ == "__main__":
    main()
