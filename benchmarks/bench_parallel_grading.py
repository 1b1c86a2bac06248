"""Benchmark: grading speed with 2 workers against 1, on the same class, in one run.

Builds a class of STUDENTS complete submissions from the release notebooks (answers filled
in), grades it with --workers 1 and with --workers 2 into separate folders, checks that the
grades are identical, and reports the speed-up and the seconds per submission.

    python benchmarks/bench_parallel_grading.py [--students 6]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from submissions import NOTEBOOKS, build, write  # noqa: E402

GOAL = 1.6


def grade(subs: Path, out: Path, workers: int) -> float:
    begin = time.monotonic()
    subprocess.run([sys.executable, "-m", "autograde", "grade", str(subs), "--out", str(out), "--workers", str(workers), "--no-progress"],
                   check=True, capture_output=True, text=True)
    return time.monotonic() - begin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=6)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        subs = Path(tmp) / "submissions"
        for i in range(args.students):
            for name in NOTEBOOKS:
                write(subs, f"s{i:03d}", name, build(name))
        one = grade(subs, Path(tmp) / "out1", 1)
        two = grade(subs, Path(tmp) / "out2", 2)
        same = (Path(tmp) / "out1" / "grades.csv").read_text() == (Path(tmp) / "out2" / "grades.csv").read_text()
    speedup = one / two
    print(f"class: {args.students} students x {len(NOTEBOOKS)} notebooks on {os.cpu_count()} cores")
    print(f"1 worker : {one:7.1f} s  ({one / args.students:5.1f} s per submission)")
    print(f"2 workers: {two:7.1f} s  ({two / args.students:5.1f} s per submission)")
    print(f"speed-up : {speedup:.2f}x ({'meets' if speedup >= GOAL else 'misses'} the {GOAL}x goal); identical grades: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
