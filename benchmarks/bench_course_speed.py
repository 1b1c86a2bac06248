"""Benchmark: how long a learner's Run All takes, against bare kernel start-up.

Answers every release notebook (the reference answers, as a learner who finished would
have them), puts them in one folder as a learner would, and runs each headless with
nbclient, ROUNDS times, alternating with as many one-cell notebooks (``1 + 1``: kernel
start-up and shut-down only). Reports the course (each notebook's median over the rounds,
summed), the one-cell notebooks (the median one-cell run, times six), their ratio against the
goal, and the slowest cells, so the next change knows where the seconds go.

Medians per notebook, not of each round's sum: now and then a kernel takes about 3.5 s to
exit after its shut-down request (ipykernel, with ``1 + 1`` as much as with the course), and
one such stall in a round of six moves a round's sum by a whole second. The stalls are counted
and printed, for both kinds of notebook, so a reader sees what the medians left out.

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


STALL_S = 1.0  # a shut-down longer than this waited for a kernel that did not exit (normal: 0.1 s)


def run(path: Path) -> tuple[float, list[tuple[float, str, int]], float]:
    """Seconds for one notebook (kernel start to shut-down), per-cell seconds, and the
    seconds its shut-down took."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    cells: list[tuple[float, str, int]] = []
    start = time.perf_counter()
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            began = time.perf_counter()
            client.execute_cell(cell, index)
            if cell.cell_type == "code":
                cells.append((time.perf_counter() - began, path.stem, index))
        finished = time.perf_counter()
    end = time.perf_counter()
    return end - start, cells, end - finished


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--top", type=int, default=8, help="how many of the slowest cells to list")
    args = parser.parse_args(argv)
    # notebook 05 writes its result under the course
    os.environ.setdefault("LLM_ALGO_PROJECT_ROOT", str(ROOT))
    bare: list[float] = []
    per_notebook: dict[str, list[float]] = {name: [] for name in NOTEBOOKS}
    slow_cells: dict[tuple[str, int], list[float]] = {}
    stalls = {"course": 0, "bare": 0}
    with tempfile.TemporaryDirectory(prefix="bench-course-") as tmp:
        folder = Path(tmp)
        for name in NOTEBOOKS:
            nbformat.write(build(name), folder / f"{name}.ipynb")
        one = nbformat.v4.new_notebook()
        one.cells = [nbformat.v4.new_code_cell("1 + 1")]
        nbformat.write(one, folder / "one_cell.ipynb")
        for round_ in range(args.rounds):
            order = ("course", "bare") if round_ % 2 == 0 else ("bare", "course")
            sums = {}
            for what in order:
                total = 0.0
                for name in NOTEBOOKS:
                    seconds, cells, shutdown = run(
                        folder / ("one_cell.ipynb" if what == "bare" else f"{name}.ipynb")
                    )
                    stalls[what] += shutdown > STALL_S
                    total += seconds
                    if what == "bare":
                        bare.append(seconds)
                        continue
                    per_notebook[name].append(seconds)
                    for cell_seconds, stem, index in cells:
                        slow_cells.setdefault((stem, index), []).append(cell_seconds)
                sums[what] = total
            print(
                f"round {round_ + 1}/{args.rounds}: course {sums['course']:.1f} s, one-cell "
                f"x{len(NOTEBOOKS)} {sums['bare']:.1f} s",
                flush=True,
            )
    course_s = sum(statistics.median(values) for values in per_notebook.values())
    bare_s = statistics.median(bare) * len(NOTEBOOKS)
    ratio = course_s / bare_s
    runs = args.rounds * len(NOTEBOOKS)
    print(
        f"\nanswered course, {len(NOTEBOOKS)} notebooks: {course_s:.1f} s (each notebook's "
        f"median of {args.rounds}, summed)"
    )
    print(
        f"{len(NOTEBOOKS)} one-cell notebooks:          {bare_s:.1f} s (the median of {runs} "
        f"runs, x{len(NOTEBOOKS)})"
    )
    print(f"ratio: {ratio:.2f}x (goal <= {GOAL:.1f}x) -> {'met' if ratio <= GOAL else 'NOT met'}")
    print(
        f"kernels slow to exit (shut-down > {STALL_S:g} s): course {stalls['course']} of "
        f"{runs}, one-cell {stalls['bare']} of {runs}"
    )
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
