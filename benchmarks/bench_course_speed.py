"""Benchmark: how long a learner's Run All takes, against bare kernel start-up.

Answers every release notebook (the reference answers, as a learner who finished would
have them), puts them in one folder as a learner would, and runs each headless with
nbclient, ROUNDS times, alternating with as many one-cell notebooks (``1 + 1``: kernel
start-up and shut-down only). Reports the median seconds of the whole course, of the
one-cell notebooks, their ratio against the goal, and the slowest cells, so the next
change knows where the seconds go.

    python benchmarks/bench_course_speed.py [--rounds 3] [--top 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from submissions import NOTEBOOKS, build  # noqa: E402

GOAL = 3.0  # the answered course at most 3x the same number of one-cell notebooks


def run(path: Path) -> tuple[float, list[tuple[float, str, int]]]:
    """Seconds for one notebook (kernel start to shut-down) and per-cell seconds."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    cells: list[tuple[float, str, int]] = []
    start = time.perf_counter()
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            began = time.perf_counter()
            client.execute_cell(cell, index)
            if cell.cell_type == "code":
                cells.append((time.perf_counter() - began, path.stem, index))
    return time.perf_counter() - start, cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--top", type=int, default=8, help="how many of the slowest cells to list")
    args = parser.parse_args(argv)
    os.environ.setdefault("LLM_ALGO_PROJECT_ROOT", str(ROOT))  # notebook 05 writes its result under the course
    course: list[float] = []
    bare: list[float] = []
    per_notebook: dict[str, list[float]] = {name: [] for name in NOTEBOOKS}
    slow_cells: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-course-") as tmp:
        folder = Path(tmp)
        for name in NOTEBOOKS:
            nbformat.write(build(name), folder / f"{name}.ipynb")
        one = nbformat.v4.new_notebook()
        one.cells = [nbformat.v4.new_code_cell("1 + 1")]
        nbformat.write(one, folder / "one_cell.ipynb")
        for round_ in range(args.rounds):
            order = ("course", "bare") if round_ % 2 == 0 else ("bare", "course")
            for what in order:
                if what == "bare":
                    bare.append(sum(run(folder / "one_cell.ipynb")[0] for _ in NOTEBOOKS))
                    continue
                total = 0.0
                for name in NOTEBOOKS:
                    seconds, cells = run(folder / f"{name}.ipynb")
                    per_notebook[name].append(seconds)
                    total += seconds
                    for cell_seconds, stem, index in cells:
                        slow_cells.setdefault((stem, index), []).append(cell_seconds)
                course.append(total)
            print(f"round {round_ + 1}/{args.rounds}: course {course[-1]:.1f} s, one-cell x{len(NOTEBOOKS)} {bare[-1]:.1f} s", flush=True)
    course_s, bare_s = statistics.median(course), statistics.median(bare)
    ratio = course_s / bare_s
    print(f"\nanswered course, {len(NOTEBOOKS)} notebooks: {course_s:.1f} s (median of {args.rounds})")
    print(f"{len(NOTEBOOKS)} one-cell notebooks:          {bare_s:.1f} s")
    print(f"ratio: {ratio:.2f}x (goal <= {GOAL:.1f}x) -> {'met' if ratio <= GOAL else 'NOT met'}")
    print("\nper notebook (median s):")
    for name, values in per_notebook.items():
        print(f"  {name:34s} {statistics.median(values):5.2f}")
    print("\nslowest cells (median s), kernel start-up excluded:")
    ranked = sorted(((statistics.median(v), key) for key, v in slow_cells.items()), reverse=True)
    for seconds, (stem, index) in ranked[: args.top]:
        print(f"  {seconds:5.2f}  {stem} cell {index}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
