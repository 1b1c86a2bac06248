"""Many learners submitting at once on the class hub (hub/): nothing lost, each graded on their own newest.

A class of N learners (default 30, real Unix users) on a running JupyterHub. Each learner fetches the assignment
with nbgrader's own command as themselves; then all of them, at once, submit twice: a draft (TODO 0 unanswered),
then their answer, each with ``nbgrader submit`` run as that learner, while a probe asks the hub for its login page
and its API every quarter second. Then ``autograde grade`` reads the exchange. Printed: the submissions found in
the exchange against those made, the learners graded on their newest (full marks on TODO 0, which only the second
submission answers), how long the submissions took, and the hub's slowest answer meanwhile.

    sudo .venv/bin/python benchmarks/bench_hub_submit.py [--learners 30] [--json benchmarks/results/hub_submit.json]

Needs root (it makes and removes the users) and what `make hub-up` needs (npm, a system Python 3.11+).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "hub"), str(ROOT / "tests")]
import classroom  # noqa: E402
import nbformat  # noqa: E402

from submissions import build  # noqa: E402

NOTEBOOK = "01_what_can_overlap"


def probe(url: str, stop: threading.Event, seen: list[float], failures: list[str]) -> None:
    """Ask the hub for its login page and its API, in turn, every 0.25 s until ``stop`` (at most 10 minutes)."""
    end = time.monotonic() + 600
    paths = ("/hub/login", "/hub/api/")
    n = 0
    while not stop.is_set() and time.monotonic() < end:
        start = time.monotonic()
        try:
            with urllib.request.urlopen(url + paths[n % 2], timeout=30) as reply:
                reply.read()
            seen.append(time.monotonic() - start)
        except OSError as exc:
            failures.append(f"{paths[n % 2]}: {exc}")
        n += 1
        stop.wait(0.25)


def write_as(cls, user: str, relative: str, nb) -> None:
    entry = classroom.pwd.getpwnam(user)
    path = cls.home(user) / relative
    nbformat.write(nb, path)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def submit_twice(cls, user: str, draft, answer) -> list[float]:
    """A draft, then the answer: two submissions by ``user``, each the time ``nbgrader submit`` took."""
    took = []
    for nb in (draft, answer):
        write_as(cls, user, f"{classroom.assignment()}/{NOTEBOOK}.ipynb", nb)
        start = time.monotonic()
        classroom.nbgrader(cls, user, "submit", classroom.assignment())
        took.append(time.monotonic() - start)
    return took


def run(learners: int, prefix: str, keep: bool = False, log=print) -> dict:
    cls = classroom.create(classroom.HUB_ROOT / f"bench-{prefix.strip('-')}", prefix, learners, log=log)
    try:
        classroom.start(cls)
        classroom.release(cls, [NOTEBOOK])
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda u: classroom.nbgrader(cls, u, "fetch_assignment", classroom.assignment()), cls.learners))
        draft = build(NOTEBOOK, fill=False, edits={"reflection_01_q1": "A first thought."})
        answer = build(NOTEBOOK)
        seen: list[float] = []
        failures: list[str] = []
        stop = threading.Event()
        watcher = threading.Thread(target=probe, args=(cls.url, stop, seen, failures), daemon=True)
        watcher.start()
        start = time.monotonic()
        with ThreadPoolExecutor(len(cls.learners)) as pool:
            took = [t for pair in pool.map(lambda u: submit_twice(cls, u, draft, answer), cls.learners) for t in pair]
        window = time.monotonic() - start
        stop.set()
        watcher.join()
        found = {u: sum(1 for p in cls.inbound.iterdir() if p.name.startswith(f"{u}+")) for u in cls.learners}
        log(f"{len(took)} submissions in {window:.1f} s; grading the exchange")
        start = time.monotonic()
        graded = classroom.grade(cls, "--workers", "2")
        grading = time.monotonic() - start
        if graded.returncode:
            raise RuntimeError(graded.stdout[-3000:] + graded.stderr[-3000:])
        rows = {r["student_id"]: r for r in csv.DictReader((cls.grading / "grades.csv").open(encoding="utf-8"))}
        newest = sum(1 for u in cls.learners if u in rows and float(rows[u]["todo0_check_overlap"]) > 0)
        return {
            "learners": learners,
            "submissions_made": len(took),
            "submissions_in_exchange": sum(found.values()),
            "learners_with_both": sum(1 for n in found.values() if n == 2),
            "graded_on_newest": newest,
            "submit_window_s": round(window, 2),
            "submit_median_s": round(statistics.median(took), 2),
            "submit_slowest_s": round(max(took), 2),
            "hub_answers": len(seen),
            "hub_failures": failures[:5],
            "hub_median_ms": round(1000 * statistics.median(seen), 1) if seen else None,
            "hub_slowest_ms": round(1000 * max(seen), 1) if seen else None,
            "grading_s": round(grading, 1),
            "cores": os.cpu_count(),
        }
    finally:
        if not keep:
            classroom.remove(cls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=30)
    parser.add_argument("--prefix", default="bh-")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the benchmark makes real Unix users")
    os.umask(0o022)
    result = run(args.learners, args.prefix)
    print(
        f"{result['learners']} learners, {result['submissions_made']} submissions in {result['submit_window_s']} s "
        f"(each {result['submit_median_s']} s median, {result['submit_slowest_s']} s slowest)\n"
        f"in the exchange: {result['submissions_in_exchange']} of {result['submissions_made']}; "
        f"graded on their newest: {result['graded_on_newest']} of {result['learners']} (grading {result['grading_s']} s)\n"
        f"the hub meanwhile: {result['hub_answers']} answers, median {result['hub_median_ms']} ms, slowest {result['hub_slowest_ms']} ms, "
        f"{len(result['hub_failures'])} failed"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    ok = result["submissions_in_exchange"] == result["submissions_made"] and result["graded_on_newest"] == result["learners"]
    return 0 if ok and not result["hub_failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
