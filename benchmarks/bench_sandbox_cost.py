"""Benchmark: what the sandbox and the trusted judge cost, against grading without the sandbox.

Builds a class of complete submissions from the release notebooks, grades it with and
without the sandbox (alternating, ROUNDS times each, into fresh folders), checks that the
grades are identical, and reports seconds per submission from the per-notebook times in
``log.jsonl`` (building the master course once per folder is left out) and the ratio.

    python benchmarks/bench_sandbox_cost.py [--students 3] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from submissions import NOTEBOOKS, build, write  # noqa: E402

GOAL = 1.15  # the sandbox and the judge together add at most 15%


def grade(subs: Path, out: Path, sandbox: bool) -> tuple[float, float, str]:
    """Seconds per submission (sum of notebook times / students), of which the judge, and the
    grades."""
    extra = [] if sandbox else ["--no-sandbox"]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "autograde",
            "grade",
            str(subs),
            "--out",
            str(out),
            "--workers",
            "1",
            "--no-progress",
            *extra,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    students = {r["student_id"] for r in records}
    judge = sum(r.get("timings", {}).get("judge", 0.0) for r in records) / len(students)
    return (
        sum(r.get("seconds", 0.0) for r in records) / len(students),
        judge,
        (out / "grades.csv").read_text(),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    times: dict[bool, list[float]] = {True: [], False: []}
    judged: dict[bool, list[float]] = {True: [], False: []}
    grades: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        subs = Path(tmp) / "submissions"
        for i in range(args.students):
            for name in NOTEBOOKS:
                write(subs, f"s{i:03d}", name, build(name))
        for round_ in range(args.rounds):
            for sandbox in (True, False) if round_ % 2 == 0 else (False, True):
                seconds, judge, table = grade(subs, Path(tmp) / f"out-{round_}-{sandbox}", sandbox)
                times[sandbox].append(seconds)
                judged[sandbox].append(judge)
                grades.add(table)
    boxed, bare = statistics.median(times[True]), statistics.median(times[False])
    ratio = boxed / bare
    print(
        f"class: {args.students} complete submissions x {len(NOTEBOOKS)} notebooks, 1 worker, "
        f"{os.cpu_count()} cores, {args.rounds} round(s)"
    )
    print(f"without sandbox : {bare:6.1f} s per submission  {[round(t, 1) for t in times[False]]}")
    print(f"sandbox + judge : {boxed:6.1f} s per submission  {[round(t, 1) for t in times[True]]}")
    print(
        f"of which judging: {statistics.median(judged[False]):6.2f} s without the sandbox, "
        f"{statistics.median(judged[True]):.2f} s with it (the judge runs in both modes)"
    )
    print(
        f"cost            : {ratio:.3f}x ({'within' if ratio <= GOAL else 'over'} the {GOAL}x "
        f"bound); identical grades: {len(grades) == 1}"
    )
    return 0 if len(grades) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
