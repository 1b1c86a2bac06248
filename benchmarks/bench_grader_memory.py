"""Peak resident memory of the grading parent and of its grading processes, on a batch of
submissions that attack the grader (tests/hostile.py: output floods in every form the kernel
can send, a callback flood, deep JSON and folders, 100,000 files, hostile ids) next to an
honest student.

    python benchmarks/bench_grader_memory.py [--workers 2] [--memory-limit 1] [--keep DIR]

Prints each peak, the honest student's total against the maximum, and each attack's status.
The batch must finish (exit 0) whatever the submissions do."""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from hostile import PeakMemory, build_hardening_batch  # noqa: E402
from submissions import grade_command  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--memory-limit", default="1", help="GiB per notebook's kernel (grade --memory-limit)"
    )
    parser.add_argument("--keep", type=Path, help="grade into this folder and keep it")
    parser.add_argument(
        "--no-many-files", action="store_true", help="leave out the 100,000-file student"
    )
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="grader-memory-"))
    subs, out = base / "submissions", base / "out"
    plan = build_hardening_batch(subs, with_many_files=not args.no_many_files)
    command = grade_command(
        subs,
        out,
        "--workers",
        str(args.workers),
        "--memory-limit",
        args.memory_limit,
        "--cell-timeout",
        "20",
        "--notebook-timeout",
        "120",
    )
    began = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    with PeakMemory(proc.pid) as peaks:
        output, _ = proc.communicate()
    seconds = time.monotonic() - began
    print(f"batch of {len(plan)} students: exit {proc.returncode} in {seconds:.0f} s")
    print(
        f"peak RSS: parent {peaks.peaks['parent'] / 2**20:.0f} MiB, largest grading process "
        f"{peaks.peaks['worker'] / 2**20:.0f} MiB"
    )
    if proc.returncode != 0:
        print(output[-3000:])
        return 1
    with open(out / "grades.csv", encoding="utf-8") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    honest = rows["honest"]
    print(
        f"honest: {honest['auto_total']} of "
        f"{json.loads((out / 'summary.json').read_text())['max_auto']} automatic points"
    )
    for problem in json.loads((out / "summary.json").read_text())["problems"]:
        print(
            f"  {problem['student_id'][:24]:24s} {problem['notebook'][:26]:26s} "
            f"{problem['status']:18s} {problem['detail'][:70]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
