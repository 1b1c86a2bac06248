"""Benchmark: what the grader's shared master saves, as a share of a class's grading time, in one
run.

The cache (keep only machinery that pays; the feedback fragment cache, 0.23 s of CPU per student
measured here, went when pages came to be rendered once by the grading command from their data):

- the shared grading master (``publish/master.py``: ``copy_shared_master``, the master built once
  per state of the sources in ``.course_build/masters`` under a lock, and copied into each new OUT
  instead of two ``nbgrader generate_assignment`` runs there).

Builds a class of STUDENTS complete submissions, then grades it into fresh OUT folders (no master
there yet, as a first grading has), ROUNDS times in each of two arms, interleaved so that the
machine's load falls on every arm alike: as shipped; without the shared master (each OUT builds its
own). An arm is switched off by a ``sitecustomize`` module this script writes and puts on
``PYTHONPATH`` (the grading process, the worker server and its workers all start with it); the
course's code is not changed. Every run must give the same grades. Prints each arm's median
wall-clock seconds, the workers' seconds (each notebook's time in its worker, summed) and of them
the feedback step's, then the shared master's saving as a share of the wall clock (it acts before
any worker starts), and in one process the master's build against its copy from the shared cache.

    python benchmarks/bench_caches.py [--students 6] [--rounds 2] [--workers 2]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from submissions import NOTEBOOKS, build, write  # noqa: E402

WORTH = 0.03  # a cache that saves less than this share of a class's grading time does not pay

# imported by every Python process of a run (PYTHONPATH): switches one cache off when its module
# loads
SITECUSTOMIZE = """
import importlib.abc, importlib.util, os, sys

OFF = os.environ.get("BENCH_CACHE_OFF", "")


def _patch(name, module):
    if OFF == "master" and name == "autograde.publish.master":
        module.copy_shared_master = lambda course, digest, into: False
    else:
        return
    with open(os.path.join(os.environ["BENCH_MARKS"], f"{OFF}-{os.getpid()}"), "w"):
        pass  # proof that the cache was off in this process


class _After(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in ("autograde.record.exporters", "autograde.publish.master"):
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(name, module)

        spec.loader.exec_module = exec_module
        return spec


if OFF:
    sys.meta_path.insert(0, _After())
"""

ARMS = {"shipped": "", "no shared master": "master"}


def grade(
    subs: Path, out: Path, workers: int, off: str, hook: Path
) -> tuple[dict[str, float], dict[str, str]]:
    """One grading run: its wall-clock seconds, the workers' seconds (each notebook's time in its
    worker, log.jsonl's ``seconds``, summed) and of them the feedback pages' (its ``timings``), and
    the grades."""
    marks = hook / "marks"
    shutil.rmtree(marks, ignore_errors=True)
    marks.mkdir()
    path = os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "BENCH_CACHE_OFF": off, "BENCH_MARKS": str(marks), "PYTHONPATH": path}
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
            "--workers",
            str(workers),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    took = {"wall": time.monotonic() - begin}
    if proc.returncode != 0:
        raise SystemExit(
            f"grade ({off or 'shipped'}) failed "
            f"({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    if off and not any(marks.iterdir()):
        raise SystemExit(
            f"the {off} cache was not switched off: no process imported its module with the hook"
        )
    records = [
        json.loads(line) for line in (out / "log.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    took["workers"] = sum(r.get("seconds", 0.0) for r in records)
    took["feedback"] = sum(r.get("timings", {}).get("feedback", 0.0) for r in records)
    with open(out / "grades.csv", encoding="utf-8") as handle:
        return took, {row["student_id"]: row["total"] for row in csv.DictReader(handle)}


def master_in_process(reps: int) -> tuple[float, float]:
    """Seconds to build the grading master in a new OUT, and to copy it from the shared cache
    (warm): medians of ``reps`` interleaved runs."""
    from autograde.course import Course
    from autograde.publish.master import build_master, copy_shared_master

    course = Course.load(ROOT)
    built, copied = [], []
    for _ in range(reps):
        with tempfile.TemporaryDirectory(prefix="bench-master-") as tmp:
            begin = time.monotonic()
            build_master(course, Path(tmp) / "built")
            built.append(time.monotonic() - begin)
            begin = time.monotonic()
            copy_shared_master(course, course.sources_digest(), Path(tmp) / "copied")
            copied.append(time.monotonic() - begin)
    return statistics.median(built), statistics.median(copied)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--reps", type=int, default=7, help="interleaved repetitions of the in-process measurements"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-caches-") as tmp:
        tmp = Path(tmp)
        hook = tmp / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
        subs = tmp / "submissions"
        for i in range(args.students):
            for name in NOTEBOOKS:
                write(subs, f"s{i:03d}", name, build(name))
        print(
            f"class: {args.students} students x {len(NOTEBOOKS)} notebooks, --workers "
            f"{args.workers}, {os.cpu_count()} cores",
            flush=True,
        )
        shutil.copytree(subs / "s000", tmp / "one" / "s000")
        # the shared master is built, the worker code is warm
        grade(tmp / "one", tmp / "warm-up", 1, "", hook)
        runs: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
        grades = []
        for round_ in range(args.rounds):
            for arm, off in ARMS.items():
                took, found = grade(
                    subs, tmp / f"out-{off or 'shipped'}-{round_}", args.workers, off, hook
                )
                runs[arm].append(took)
                grades.append(found)
                said = (
                    f"{took['wall']:6.1f} s wall, workers {took['workers']:6.1f} s, of which "
                    f"feedback {took['feedback']:5.1f} s"
                )
                print(f"round {round_ + 1}, {arm:17s}: {said}", flush=True)
    med = {
        arm: {
            k: statistics.median(run[k] for run in runs[arm])
            for k in ("wall", "workers", "feedback")
        }
        for arm in ARMS
    }
    base = med["shipped"]
    print(
        f"\n{'arm':17s} {'wall s':>7s} {'workers s':>10s} {'feedback s':>11s} "
        f"{'wall / shipped':>15s}"
    )
    for arm in ARMS:
        m = med[arm]
        print(
            f"{arm:17s} {m['wall']:7.1f} {m['workers']:10.1f} {m['feedback']:11.1f} "
            f"{m['wall'] / base['wall']:15.3f}"
        )
    # the shared master works in the grading process before any worker: its saving of the wall clock
    master = (med["no shared master"]["wall"] - base["wall"]) / med["no shared master"]["wall"]
    verdict = "pays" if master >= WORTH else "does not pay"
    print(
        f"saving of the shared master, a first grading into a new OUT: {master:+.1%} of the "
        f"wall clock ({verdict})"
    )
    print("\nin one process (the class's run above only as the scale):")
    built, copied = master_in_process(max(1, args.reps // 3))
    print(
        f"  the grading master: built {built:.1f} s, copied from the shared cache {copied:.2f} s: "
        f"{built - copied:.1f} s saved, "
        f"{(built - copied) / (base['wall'] + built - copied):.1%} of a first grading of "
        "this class"
    )
    same = all(g == grades[0] for g in grades)
    print(
        f"\nidentical grades in every run: {same}; a cache pays when it saves at least "
        f"{WORTH:.0%} of the grading time"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
