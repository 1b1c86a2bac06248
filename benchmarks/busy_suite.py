"""The suite on a busy machine: two fresh clones run ``make test`` at the same time while a grading
batch of a small class runs again and again beside them. Both must pass. Prints each run's result
and wall time, the number of grading batches that ran meanwhile, and the load they all shared.

    python benchmarks/busy_suite.py [--keep DIR] [--max-gradings N]

Each clone builds its own .venv (as CI does). The grading loop stops when both suites have ended (or
after ``--max-gradings`` batches). Exit status 0 only when both suites passed."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def clone(where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(where)], check=True)
    return where


def grading_loop(stop: threading.Event, scratch: Path, limit: int, count: list[int]) -> None:
    """A class of three graded into a fresh OUT, again and again, until ``stop`` (bounded by
    ``limit``)."""
    from submissions import NOTEBOOKS, build, write

    subs = scratch / "class"
    for student, fill in (("ana", True), ("ben", False), ("cho", True)):
        for name in NOTEBOOKS[:3]:
            write(subs, student, name, build(name, fill=fill))
    while not stop.is_set() and count[0] < limit:
        out = scratch / f"out{count[0]}"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "autograde",
                "grade",
                str(subs),
                "--out",
                str(out),
                "--no-progress",
                "--workers",
                "2",
            ],
            cwd=ROOT,
            capture_output=True,
            timeout=1800,
        )
        shutil.rmtree(out, ignore_errors=True)
        count[0] += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep", type=Path, help="clone into this folder and keep it (default: a temporary one)"
    )
    parser.add_argument("--max-gradings", type=int, default=200)
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="busy-suite-"))
    base.mkdir(parents=True, exist_ok=True)
    clones = [clone(base / f"clone{i}") for i in (1, 2)]
    stop, count = threading.Event(), [0]
    loop = threading.Thread(
        target=grading_loop, args=(stop, base / "grading", args.max_gradings, count), daemon=True
    )
    loop.start()
    began = time.monotonic()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIRTUAL_ENV")}
    runs = [
        subprocess.Popen(
            ["make", "-C", str(c), "test"],
            stdout=open(c / "suite.log", "w"),
            stderr=subprocess.STDOUT,
            env=env,
        )
        for c in clones
    ]
    loads = []
    while any(r.poll() is None for r in runs):
        loads.append(os.getloadavg()[0])
        time.sleep(15)
    stop.set()
    loop.join(timeout=1800)
    ok = True
    for c, r in zip(clones, runs):
        tail = (c / "suite.log").read_text(errors="replace").strip().splitlines()[-1:]
        print(f"{c.name}: exit {r.returncode}; {tail[0] if tail else ''}")
        ok &= r.returncode == 0
    mean = sum(loads) / len(loads) if loads else 0.0
    print(
        f"both suites: {time.monotonic() - began:.0f} s; grading batches meanwhile: "
        f"{count[0]}; mean load {mean:.1f} on {os.cpu_count()} cores"
    )
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
