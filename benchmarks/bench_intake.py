"""Benchmark: what the intake's checks on a live exchange cost, against the intake at a git
revision.

Builds one class in a temporary exchange ``inbound/`` as ``nbgrader submit`` leaves it:
``--students`` learners (200 by default), each a submission folder holding the six release
notebooks, ``timestamp.txt``, ``submission_secret.txt`` and a small file of their own; then times
``read_submissions`` (the whole intake: listing, reading, placing, into a fresh folder) with this
tree's code and with the code at ``--against REV`` (each in its own process, alternately, best of
``--repeats``). The checks this tree adds on each file (every folder on its path reopened and
checked, the file checked against its listing before and after it is copied, the budgets, the
arrival times) are in "now" only. Prints CPU and wall seconds of each, and the ratio now/then.

    python benchmarks/bench_intake.py --against REV [--students 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograde.course import Course  # noqa: E402

# one intake, timed in a process of its own whose autograde is the one on PYTHONPATH
TIMED = """
import json, sys, time, shutil
from pathlib import Path
from autograde.term.intake import read_submissions
source, dest, notebooks, assignment = Path(sys.argv[1]), Path(sys.argv[2]), \
tuple(sys.argv[3].split(",")), sys.argv[4]
shutil.rmtree(dest, ignore_errors=True)
wall, cpu = time.perf_counter(), time.process_time()
found = read_submissions(source, dest, notebooks, assignment)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"wall": wall, "cpu": cpu, "students": len(found.times), "problems": \
len(found.problems)}))
"""


def build_class(where: Path, students: int, course: Course) -> Path:
    inbound = where / "exchange" / "course101" / "inbound"
    inbound.mkdir(parents=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    release = {name: (course.release / f"{name}.ipynb").read_bytes() for name in course.notebooks}
    for i in range(students):
        folder = inbound / f"s{i:04d}+{course.assignment}+{stamp}+{secrets.token_hex(4)}"
        folder.mkdir()
        for name, data in release.items():
            (folder / f"{name}.ipynb").write_bytes(data)
        (folder / "timestamp.txt").write_text(stamp)
        (folder / "submission_secret.txt").write_text(secrets.token_hex(64))
        (folder / "notes.txt").write_text("my notes")
    return inbound


def code_at(revision: str, where: Path) -> Path:
    """The autograde package (and what it imports of the runtime) as it was at git ``revision``."""
    where.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", revision, "autograde", "tools", "course.toml"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive.stdout, check=True)
    return where


def timed(code: Path, inbound: Path, dest: Path, course: Course) -> dict:
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            TIMED,
            str(inbound),
            str(dest),
            ",".join(course.notebooks),
            course.assignment,
        ],
        cwd=code,
        env={**os.environ, "PYTHONPATH": str(code)},
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode:
        raise SystemExit(f"the intake at {code} failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--against",
        metavar="REV",
        required=True,
        help="the git revision whose intake is timed beside this tree's",
    )
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    course = Course.load(ROOT)
    scratch = Path(tempfile.mkdtemp(prefix="bench-intake-"))
    try:
        inbound = build_class(scratch / "class", args.students, course)
        codes = {"then": code_at(args.against, scratch / "then"), "now": ROOT}
        best: dict[str, dict] = {}
        for _ in range(args.repeats):
            for name, code in codes.items():
                got = timed(code, inbound, scratch / f"dest-{name}", course)
                held = best.get(name)
                best[name] = got if held is None or got["cpu"] < held["cpu"] else held
        print(
            f"{args.students} learners x {len(course.notebooks)} notebooks in a live "
            f"inbound/, best of {args.repeats} (by CPU of its process)"
        )
        for name in ("then", "now"):
            b = best[name]
            label = args.against if name == "then" else "this tree"
            print(
                f"  {name:<4} ({label}): CPU {b['cpu']:6.2f} s  wall {b['wall']:6.2f} s  "
                f"{b['students']} with a time, {b['problems']} problems"
            )
        cpu, wall = (
            best["now"]["cpu"] / best["then"]["cpu"],
            best["now"]["wall"] / best["then"]["wall"],
        )
        print(f"now/then: CPU {cpu:.2f}x, wall {wall:.2f}x")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
