"""Benchmark: seconds per submission, against plain nbgrader on the same notebooks, in one run.

Builds a class of STUDENTS complete submissions from the release notebooks (answers filled
in), then times, one after another on this machine:

1. plain nbgrader: ``nbgrader autograde`` (serial, as nbgrader grades) in a course folder
   generated from the full sources with the course's nbgrader config, no sandbox, no judge,
   no feedback pages. The course folder is generated before the clock starts;
2. ``grade --workers 1`` and ``grade --workers 2``: sandbox, judge, feedback, gradebook and
   report included. Each grades into a fresh OUT that already holds the grading master (built
   once, before the clocks, as plain nbgrader's course folder is);
3. ``grade --scheduler`` on a local Dask cluster of 2 workers (started before the clock; each
   worker prepares its copy of the master on the first task, inside the clock).

Every run of ours must give the same grades, full marks for every student (the tests' points; a run
whose judge could not load the answers gives every student the same wrong total). Prints seconds per
submission for each, the speed-up of 2 workers over 1, and 2 workers against plain nbgrader, with
the goal (at most a third of plain nbgrader's time).

    python benchmarks/bench_parallel_grading.py [--students 6] [--no-cluster] [--no-plain]
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# test_dask.Cluster
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "grader" / "executors")]

from submissions import NOTEBOOKS, build, write  # noqa: E402

GOAL = 0.33  # 2 workers: at most a third of plain nbgrader's seconds per submission


def grade(subs: Path, out: Path, *extra: str) -> float:
    begin = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograde",
            "grade",
            str(subs),
            "--out",
            str(out),
            "--no-progress",
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    seconds = time.monotonic() - begin
    if proc.returncode != 0:
        raise SystemExit(
            f"grade {' '.join(extra)} failed "
            f"({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    return seconds


def full_auto_points() -> float:
    """The points a complete, correct submission earns from the tests (a person's answers aside)."""
    from autograde.course import Course, exercises

    return sum(e.points for e in exercises(Course.load()) if not e.manual)


FULL_AUTO = full_auto_points()


def totals(out: Path) -> dict[str, str]:
    with open(out / "grades.csv", encoding="utf-8") as handle:
        return {row["student_id"]: row["auto_total"] for row in csv.DictReader(handle)}


def plain_nbgrader(subs: Path, folder: Path) -> float:
    """Seconds for ``nbgrader autograde`` of the whole class (course folder made first, untimed)."""
    from autograde.course import Course, run_nbgrader
    from autograde.publish.release import generate

    course = Course.load(ROOT)
    generate(course, folder)
    for student in sorted(subs.iterdir()):
        target = folder / "submitted" / student.name / course.assignment
        target.mkdir(parents=True)
        for notebook in student.glob("*.ipynb"):
            shutil.copy(notebook, target / notebook.name)
    result = run_nbgrader(["autograde", course.assignment, "--force"], folder, timeout=7200)
    if result.returncode != 0:
        raise SystemExit(f"plain nbgrader failed:\n{result.log[-3000:]}")
    return result.seconds


def prepared_out(master: Path, out: Path) -> Path:
    """A fresh OUT holding the grading master built once (verified by its digest on use)."""
    out.mkdir(parents=True)
    shutil.copytree(master / ".course", out / ".course")
    shutil.copy(master / ".course.digest", out / ".course.digest")
    return out


def cluster_run(subs: Path, folder: Path) -> float:
    from test_dask import Cluster

    cluster = Cluster(folder / "cluster")
    try:
        for name in ("w1", "w2"):
            cluster.add_worker(name)
        cluster.wait_for_workers(2)
        return grade(subs, folder / "out-cluster", "--scheduler", cluster.address)
    finally:
        cluster.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=6)
    parser.add_argument("--no-cluster", action="store_true", help="skip the Dask cluster run")
    parser.add_argument(
        "--no-plain", action="store_true", help="skip plain nbgrader (no baseline then)"
    )
    args = parser.parse_args(argv)
    n = args.students
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        tmp = Path(tmp)
        subs = tmp / "submissions"
        for i in range(n):
            for name in NOTEBOOKS:
                write(subs, f"s{i:03d}", name, build(name))
        print(
            f"class: {n} students x {len(NOTEBOOKS)} notebooks, {os.cpu_count()} cores", flush=True
        )
        plain = None if args.no_plain else plain_nbgrader(subs, tmp / "plain")
        if plain is not None:
            print(f"plain nbgrader autograde, serial: {plain:7.1f} s", flush=True)
        begin = time.monotonic()  # the master, built by grading one student once (also a warm-up)
        shutil.copytree(subs / "s000", tmp / "one" / "s000")
        grade(tmp / "one", tmp / "master", "--workers", "1")
        print(
            f"grading master built, one student graded: {time.monotonic() - begin:.1f} s",
            flush=True,
        )
        runs = {}
        for workers in (1, 2):
            out = prepared_out(tmp / "master", tmp / f"out{workers}")
            runs[workers] = grade(subs, out, "--workers", str(workers))
            print(f"grade --workers {workers}: {runs[workers]:7.1f} s", flush=True)
        cluster = None if args.no_cluster else cluster_run(subs, tmp)
        expected = {f"s{i:03d}": None for i in range(n)}
        grades = [totals(tmp / f"out{w}") for w in (1, 2)] + (
            [totals(tmp / "out-cluster")] if cluster else []
        )
        same = all(g == grades[0] for g in grades) and set(grades[0]) == set(expected)
        full = all(float(total) == FULL_AUTO for total in grades[0].values())
    print()
    print(f"{'run':34s} {'s per submission':>17s}")
    if plain is not None:
        print(f"{'plain nbgrader (serial)':34s} {plain / n:17.1f}")
    print(f"{'grade, 1 worker':34s} {runs[1] / n:17.1f}")
    print(f"{'grade, 2 workers':34s} {runs[2] / n:17.1f}")
    if cluster is not None:
        print(f"{'grade, Dask cluster of 2 workers':34s} {cluster / n:17.1f}")
    print(f"\nspeed-up, 2 workers over 1: {runs[1] / runs[2]:.2f}x")
    if plain is not None:
        ratio = runs[2] / plain
        print(
            f"2 workers / plain nbgrader: {ratio:.2f} (goal <= {GOAL}) -> "
            f"{'met' if ratio <= GOAL else 'NOT met'}"
        )
    print(
        f"identical grades in every run: {same}; every student full marks ({FULL_AUTO:g}): {full}"
    )
    return 0 if same and full else 1


if __name__ == "__main__":
    sys.exit(main())
