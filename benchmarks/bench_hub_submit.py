"""A class submitting within one minute on the class hub (hub/): nothing lost, each graded on their
own newest.

A class of N learners (default 30, at most 30; real Unix users) on a running JupyterHub. Each
learner asks the hub for their own API token with their own login (JupyterHub's token API, as a
script of theirs would), and their own JupyterLab server is started; they fetch the assignment
through it. Then, within one minute, each saves a draft (TODO 0 unanswered) and submits it, and
later in the minute saves their answers and submits again: each save is a PUT to their server's
contents API, each submission a POST to the Assignments tab's own endpoint
(``/user/<name>/assignments/submit``, nbgrader's assignment_list server extension), with their own
token. So no Python starts per submission: the learner's running server does nbgrader's submit, as
the Submit button does. A third of the class works in English, a third in the Chinese edition (its
own assignment), and a third submits the draft in English and the answer in Chinese. Meanwhile a
probe asks the hub for its login page and its API every quarter second. Then ``autograde grade``
reads the exchange.

Printed: the submissions sent and found in the exchange, the learners graded on their own newest
(TODO 0, which only the second submission answers, and the edition of that submission), how long
each submission took, how long the whole minute's submissions took to complete, and the hub's
slowest answer during the minute.

    sudo .venv/bin/python benchmarks/bench_hub_submit.py [--learners 30]
        [--json benchmarks/results/hub_submit.json]

Bounded: at most 30 learners, two submissions each; every phase has a time limit and the whole run
stops itself (``--budget``, default 900 s), then removes the class (users, processes, folders).
Needs root and what `make hub-up` needs (npm, a system Python 3.11+)."""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import signal
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "hub"), str(ROOT / "tests")]
import classroom  # noqa: E402

from submissions import build  # noqa: E402

NOTEBOOK = "01_what_can_overlap"
MAX_LEARNERS = 30
MINUTE = 60.0
SPAWN_LIMIT_S = 420  # every learner's server up, or the run stops
REPLY_LIMIT_S = 120  # one request's longest wait


class OutOfTime(Exception):
    pass


def call(
    url: str,
    method: str = "GET",
    body=None,
    token: str | None = None,
    timeout: float = REPLY_LIMIT_S,
):
    """One HTTP request; (status, parsed JSON or text)."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data is not None else {}
    if token:
        headers["Authorization"] = f"token {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            status, text = reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode(errors="replace")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def token_of(cls, user: str) -> str:
    """The learner's own API token, asked of the hub with their own login."""
    auth = {"username": user, "password": cls.passwords[user]}
    status, reply = call(
        f"{cls.url}/hub/api/users/{user}/tokens",
        "POST",
        {"auth": auth, "note": "bench", "expires_in": 3600},
    )
    if status != 201:
        raise RuntimeError(f"no token for {user}: {status} {str(reply)[:300]}")
    return reply["token"]


def start_server(cls, user: str, token: str, end: float) -> float:
    """Start the learner's server through the hub's API and wait until it is ready; the seconds it
    took."""
    began = time.monotonic()
    status, reply = call(f"{cls.url}/hub/api/users/{user}/server", "POST", {}, token)
    if status not in (201, 202, 400):  # 400: already running
        raise RuntimeError(f"{user}'s server did not start: {status} {str(reply)[:300]}")
    while time.monotonic() < end:
        status, reply = call(f"{cls.url}/hub/api/users/{user}", token=token)
        if status == 200 and (reply.get("servers", {}).get("") or {}).get("ready"):
            return time.monotonic() - began
        time.sleep(1)
    raise OutOfTime(f"{user}'s server was not ready within {SPAWN_LIMIT_S} s")


def probe(url: str, stop: threading.Event, seen: list[float], failures: list[str]) -> None:
    """Ask the hub for its login page and its API, in turn, every 0.25 s until ``stop`` (at most 5
    minutes)."""
    end = time.monotonic() + 300
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


def plan(learners: list[str], seed: int = 39) -> dict[str, list[tuple[float, str, str]]]:
    """Each learner's two submissions within the minute: (seconds from its start, edition,
    draft|answer). One third English, one third Chinese, one third a draft in English and the answer
    in Chinese."""
    rng = random.Random(seed)
    editions = [("en", "en"), ("zh", "zh"), ("en", "zh")]
    chosen = {}
    for i, user in enumerate(learners):
        first = rng.uniform(0, 35)
        second = first + rng.uniform(10, 24)
        draft_in, answer_in = editions[i % 3]
        chosen[user] = [(first, draft_in, "draft"), (second, answer_in, "answer")]
    return chosen


def learner_minute(
    cls, user: str, token: str, steps, start: float, names: dict[str, str], books: dict
) -> list[dict]:
    """The learner's save and submit at each planned time; each submission's outcome and its
    seconds."""
    base = f"{cls.url}/user/{user}"
    done = []
    for at, edition, kind in steps:
        time.sleep(max(0.0, start + at - time.monotonic()))
        began = time.monotonic()
        name = names[edition]
        saved, _ = call(
            f"{base}/api/contents/{name}/{NOTEBOOK}.ipynb",
            "PUT",
            {"type": "notebook", "format": "json", "content": books[(edition, kind)]},
            token,
        )
        status, reply = call(
            f"{base}/assignments/submit",
            "POST",
            {"assignment_id": name, "course_id": classroom.COURSE_ID},
            token,
        )
        # else nbgrader's error
        ok = (
            saved == 200
            and status == 200
            and isinstance(reply, dict)
            and reply.get("success") is True
        )
        done.append(
            {
                "user": user,
                "to": name,
                "kind": kind,
                "ok": ok,
                "seconds": time.monotonic() - began,
                "ended": time.monotonic() - start,
                "reply": "" if ok else str(reply)[:300],
            }
        )
    return done


def run(learners: int, prefix: str, keep: bool = False, log=print) -> dict:
    if not 1 <= learners <= MAX_LEARNERS:
        raise SystemExit(f"--learners {learners}: give 1 to {MAX_LEARNERS}")
    cls = classroom.create(
        classroom.HUB_ROOT / f"bench-{prefix.strip('-')}", prefix, learners, log=log
    )
    names = classroom.editions()
    try:
        classroom.start(cls)
        classroom.release(cls, [NOTEBOOK])
        began = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            tokens = dict(
                zip(cls.learners, pool.map(lambda u: token_of(cls, u), cls.learners), strict=True)
            )
        end = time.monotonic() + SPAWN_LIMIT_S
        # a few spawns at a time, as a class logging in over some minutes
        with ThreadPoolExecutor(6) as pool:
            spawns = list(pool.map(lambda u: start_server(cls, u, tokens[u], end), cls.learners))
        log(
            f"{learners} servers ready in {time.monotonic() - began:.0f} s (each "
            f"{statistics.median(spawns):.1f} s median)"
        )
        chosen = plan(cls.learners)

        def fetch(user: str) -> None:
            for name in sorted({names[edition] for _, edition, _ in chosen[user]}):
                status, reply = call(
                    f"{cls.url}/user/{user}/assignments/fetch",
                    "POST",
                    {"assignment_id": name, "course_id": classroom.COURSE_ID},
                    tokens[user],
                )
                if status != 200 or not (cls.home(user) / name / f"{NOTEBOOK}.ipynb").is_file():
                    raise RuntimeError(
                        f"{user} could not fetch {name}: {status} {str(reply)[:300]}"
                    )

        with ThreadPoolExecutor(6) as pool:
            list(pool.map(fetch, cls.learners))
        books = {
            (edition, kind): build(
                NOTEBOOK,
                fill=kind == "answer",
                edition=edition,
                edits={} if kind == "answer" else {"reflection_01_q1": "A first thought."},
            )
            for edition in ("en", "zh")
            for kind in ("draft", "answer")
        }
        seen: list[float] = []
        failures: list[str] = []
        stop = threading.Event()
        watcher = threading.Thread(target=probe, args=(cls.url, stop, seen, failures), daemon=True)
        watcher.start()
        start = time.monotonic()
        with ThreadPoolExecutor(len(cls.learners)) as pool:
            sent = [
                s
                for steps in pool.map(
                    lambda u: learner_minute(cls, u, tokens[u], chosen[u], start, names, books),
                    cls.learners,
                )
                for s in steps
            ]
        stop.set()
        watcher.join()
        found = {
            u: sorted(
                p.name.split("+")[1] for p in cls.inbound.iterdir() if p.name.startswith(f"{u}+")
            )
            for u in cls.learners
        }
        log(
            f"{len(sent)} submissions sent, the last answered "
            f"{max(s['ended'] for s in sent):.1f} s after the minute began; grading the "
            "exchange"
        )
        graded_at = time.monotonic()
        graded = classroom.grade(cls, "--workers", "2")
        grading = time.monotonic() - graded_at
        if graded.returncode:
            raise RuntimeError(graded.stdout[-3000:] + graded.stderr[-3000:])
        rows = {
            r["student_id"]: r
            for r in csv.DictReader((cls.grading / "grades.csv").open(encoding="utf-8"))
        }
        newest = [
            u
            for u in cls.learners
            if u in rows
            and float(rows[u]["todo0_check_overlap"]) > 0
            and rows[u]["edition"] == chosen[u][1][1]
        ]
        return {
            "learners": learners,
            "submissions_sent": len(sent),
            "submissions_accepted": sum(s["ok"] for s in sent),
            "submissions_in_exchange": sum(len(v) for v in found.values()),
            "learners_with_both": sum(1 for v in found.values() if len(v) == 2),
            "graded_on_newest": len(newest),
            "refused": [f"{s['user']} {s['kind']}: {s['reply']}" for s in sent if not s["ok"]][:5],
            "minute_all_done_s": round(max(s["ended"] for s in sent), 1),
            "last_planned_s": round(max(at for steps in chosen.values() for at, _, _ in steps), 1),
            "submit_median_s": round(statistics.median(s["seconds"] for s in sent), 2),
            "submit_slowest_s": round(max(s["seconds"] for s in sent), 2),
            "servers_ready_s": round(start - began, 1),
            "hub_answers": len(seen),
            "hub_failures": failures[:5],
            "hub_median_ms": round(1000 * statistics.median(seen), 1) if seen else None,
            "hub_slowest_ms": round(1000 * max(seen), 1) if seen else None,
            "grading_s": round(grading, 1),
            "cores": os.cpu_count(),
            "load_before": os.getloadavg()[0],
        }
    finally:
        if not keep:
            classroom.remove(cls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=MAX_LEARNERS, help=f"1 to {MAX_LEARNERS}")
    parser.add_argument("--prefix", default="bh-")
    parser.add_argument(
        "--budget",
        type=int,
        default=900,
        help="the whole run stops itself after this many seconds (default 900)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the benchmark makes real Unix users")
    os.umask(0o022)

    def out_of_time(*_):
        raise OutOfTime(f"the run reached its budget of {args.budget} s")

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(args.budget)  # the class is removed on the way out (run's finally)
    try:
        result = run(args.learners, args.prefix)
    finally:
        signal.alarm(0)
    print(
        f"{result['learners']} learners, {result['submissions_sent']} submissions sent "
        "within the minute "
        f"(the last planned at {result['last_planned_s']} s), all answered "
        f"{result['minute_all_done_s']} s after it began\n"
        f"each: {result['submit_median_s']} s median, {result['submit_slowest_s']} s "
        "slowest (a save, then nbgrader's submit in their server)\n"
        f"accepted {result['submissions_accepted']}, in the exchange "
        f"{result['submissions_in_exchange']}; "
        f"graded on their own newest: {result['graded_on_newest']} of "
        f"{result['learners']} (grading {result['grading_s']} s)\n"
        f"the hub during the minute: {result['hub_answers']} answers, median "
        f"{result['hub_median_ms']} ms, slowest {result['hub_slowest_ms']} ms, "
        f"{len(result['hub_failures'])} failed; the servers were ready in "
        f"{result['servers_ready_s']} s"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    ok = (
        result["submissions_in_exchange"]
        == result["submissions_sent"]
        == result["submissions_accepted"]
        and result["graded_on_newest"] == result["learners"]
    )
    return 0 if ok and not result["hub_failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
