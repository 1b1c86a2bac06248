"""Benchmark: joining an answer split in many cells (grading._repair_cells) grows linearly.

Times the join of one answer split in N parts and in 10 N parts, in the same run (the fastest of
ROUNDS each, every round on a fresh notebook), and prints the ratio of the two: about 10 when the
join is linear in the notebook's size, about 100 when it is quadratic. The tests check the same
property without a clock (tests/grader/test_hardening.py counts what the join reads and writes);
this is the figure in seconds.

    python benchmarks/bench_split_cells.py [--parts 6000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograde.matching import repair_cells as _repair_cells  # noqa: E402

META = {
    "nbgrader": {
        "grade_id": "a",
        "solution": True,
        "grade": False,
        "locked": False,
        "schema_version": 3,
    }
}


def split_notebook(parts: int) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(f"x{i} = {i}\n", metadata=json.loads(json.dumps(META)))
        for i in range(parts)
    ]
    return nb


def fastest(parts: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        nb = split_notebook(parts)
        began = time.perf_counter()
        _repair_cells(nb, {"a"})
        best = min(best, time.perf_counter() - began)
        assert len(nb.cells) == 1, "the parts were not joined"
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--parts",
        type=int,
        default=6000,
        help="parts of the smaller notebook (the larger has 10 times as many)",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of each size; the fastest counts"
    )
    args = parser.parse_args()
    small, large = fastest(args.parts, args.rounds), fastest(10 * args.parts, args.rounds)
    ratio = large / small
    print(
        f"{args.parts:,} parts: {small * 1e3:.1f} ms; {10 * args.parts:,} parts: "
        f"{large * 1e3:.1f} ms"
    )
    print(f"ratio {ratio:.1f} (linear: about 10, quadratic: about 100)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
