"""Benchmark: the similarity report (``write_similarity``) on a synthetic class.

Makes a graded folder of STUDENTS students (OUT/submitted/<student>/<assignment>/<notebook>.ipynb):
each student answers each TODO with one of the test class's answers (tests/data/similarity, and
the course's own), with its learner-written names renamed at random, a few statements of its own
added (so that nearly every answer differs from every other, as in a real class), comments and
blank lines sprinkled in; a few leave a TODO unanswered or a notebook out. That is a hard case:
every answer has about 60 others close to it, so the index finds thousands of candidate pairs.
Reports the seconds ``write_similarity`` takes (the class is built before the clock starts), the
pairs flagged per TODO, and the page's size.

    python benchmarks/bench_similarity.py [--students 500] [--seed 1]
"""

from __future__ import annotations

import argparse
import builtins
import io
import json
import keyword
import random
import sys
import tempfile
import time
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from autograde.course import Course  # noqa: E402
from autograde.record.similarity import write_similarity  # noqa: E402

from submissions import answer  # noqa: E402

DATA = ROOT / "tests" / "data" / "similarity"
KEPT = set(dir(builtins)) | set(keyword.kwlist) | {"match", "case"}
WORDS = "alpha beta gamma delta item value result total count window layer chunk part piece stamp tick mark slot".split()


def variants() -> dict[str, list[str]]:
    """{TODO: the test class's answer cells to it}."""
    return {p.name: [f.read_text(encoding="utf-8") for f in sorted(p.glob("*.txt"))] + [answer(p.name)] for p in sorted(DATA.iterdir()) if p.is_dir()}


def release_cells(course: Course) -> dict[str, dict]:
    """{notebook: the release notebook as JSON}."""
    return {name: json.loads((course.release / f"{name}.ipynb").read_text(encoding="utf-8")) for name in course.notebooks}


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
    own = [i for i, line in enumerate(lines) if line.strip() and line not in release and not line.rstrip().endswith((":", ",", "(", "[", "\\"))]
    for at in sorted(rng.sample(own, min(len(own), rng.randint(2, 4))), reverse=True):
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        lines.insert(at + 1, f"{indent}{rng.choice(WORDS)}_{rng.randrange(10**6)} = {rng.randrange(10**6)} * {rng.choice(WORDS)}_x")
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
                    cells[index] = {**cells[index], "source": disguise(rng.choice(answers[gid]), release, rng)}
            (folder / f"{name}.ipynb").write_text(json.dumps({**nb, "cells": cells}), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    course = Course.load()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        begin = time.perf_counter()
        make_class(course, out, args.students, random.Random(args.seed))
        built = time.perf_counter() - begin
        begin = time.perf_counter()
        page, _, data = write_similarity(course, out)
        seconds = time.perf_counter() - begin
        size = page.stat().st_size
    print(f"class of {args.students} built in {built:.1f} s")
    print(f"{'TODO':<16} {'compared':>8} {'too short':>9} {'unanswered':>10} {'missing':>7} {'distinct':>8} {'flagged pairs':>13}")
    for t in data["todos"]:
        print(
            f"{t['grade_id']:<16} {t['compared']:>8} {t['too_short']:>9} {t['unanswered']:>10} {t['missing']:>7} "
            f"{t['distinct_answers']:>8} {t['pairs_above_threshold']:>13}"
        )
    print(f"page: {size / 1e6:.1f} MB")
    print(f"write_similarity: {seconds:.1f} s for {args.students} students")


if __name__ == "__main__":
    main()
