"""Benchmark: how fast the handoff simulator runs, and whether its cost is linear in the requests.

Runs one mixed scenario (Poisson arrivals, prompts of 256-8192 tokens, layer-wise streaming, every
fault at 2%) at 10k, 100k and 1M requests (about 20 s of CPU; --no-million skips it), on one core
(the simulator is single threaded). Reports requests per second, the cost per request at each size
relative to the smallest (linear cost keeps it near 1.0), and the verdict against the goal: 100,000
requests in under 10 s. Each link-sharing mode is timed at 100k as well. The simulator runs on the
instructor's answers to TODO 6-8 and, inside handoff_step, TODO 3 and TODO 4, read from solutions/.
Times are CPU seconds of this process (``time.process_time``: the time on the one core it runs on,
unaffected by other processes sharing the machine); wall-clock seconds are printed beside them.

With ``--against REV`` it instead times this tree's simulator against the one at git revision REV
(e.g. ``HEAD~1``), the two runs interleaved in one process on each link mode, and prints the ratio
(a refactor of the engine should stay within 1.25x) and whether every result is identical.

    python benchmarks/bench_handoff_sim.py [--no-million] [--repeats 3] [--against REV]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.handoff import sim as handoff_sim
from tools.notebook_runtime import load_learner_functions
from tools.project_runtime import resolve_project_root

GOAL_REQUESTS, GOAL_SECONDS = 100_000, 10.0
SCENARIO = dict(
    rate_per_s=20.0,
    prompt_tokens=[256, 8192],
    output_tokens=[16, 512],
    prefill_workers=4,
    link="InfiniBand NDR",
    streaming="layerwise",
    link_sharing="fifo",
    faults={name: 0.02 for name in handoff_sim.FAULTS},
    seed=1,
)


def course_gate() -> dict:
    """The simulator's steps: the instructor's answers to TODO 6-8 (notebook 06), with handoff_step
    running on the answers to TODO 3 and TODO 4 (notebooks 03 and 04), all read from solutions/."""
    folder = [resolve_project_root() / "solutions"]
    steps = load_learner_functions("06_handoff_simulator", list(handoff_sim.STEPS), folder)
    steps["handoff_step"].__globals__.update(
        {
            **load_learner_functions(
                "03_handoff_state_contract", ["validate_handoff_state"], folder
            ),
            **load_learner_functions("04_decode_start_gate", ["plan_decode_start"], folder),
        }
    )
    return steps


GATE: dict = {}


def timed(n: int, repeats: int, records: bool = True, **overrides) -> tuple[float, float, dict]:
    """Best CPU and wall seconds of ``repeats`` runs of ``n`` requests (and the last summary)."""
    best_cpu, best_wall, summary = float("inf"), float("inf"), None
    for _ in range(repeats):
        cpu, wall = time.process_time(), time.perf_counter()
        result = handoff_sim.simulate(
            **{**SCENARIO, **overrides}, n_requests=n, records=records, steps=GATE
        )
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
        summary = result["summary"]
    return best_cpu, best_wall, summary


def simulator_at(revision: str):
    """The simulator as it was at git ``revision``, imported beside today's."""
    root = resolve_project_root()
    # tools/handoff/sim.py since the runtime became packages; tools/handoff_sim.py before
    layouts = {
        "tools/handoff/sim.py": "tools.handoff.sim_then",
        "tools/handoff_sim.py": "tools.handoff_sim_then",
    }
    shown = {
        where: subprocess.run(
            ["git", "show", f"{revision}:{where}"], cwd=root, capture_output=True, text=True
        )
        for where in layouts
    }
    where = next((where for where, found in shown.items() if found.returncode == 0), None)
    if where is None:
        raise SystemExit(
            f"no simulator at {revision}: {shown['tools/handoff_sim.py'].stderr.strip()}"
        )
    found, name = shown[where], layouts[where]
    path = Path(tempfile.mkdtemp(prefix="bench-sim-")) / "sim_then.py"
    path.write_text(found.stdout, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compare(revision: str, repeats: int, n: int = 50_000) -> int:
    """This tree's simulator against ``revision``'s: CPU seconds, interleaved, per link mode."""
    then = simulator_at(revision)
    print(f"{n:,} requests per mode, best of {repeats}, CPU s; now = this tree, then = {revision}")
    worst, same = 0.0, True
    for sharing in ("fifo", "fair"):
        for streaming in ("whole", "layerwise"):
            config = {**SCENARIO, "n_requests": n, "link_sharing": sharing, "streaming": streaming}
            best = {"now": float("inf"), "then": float("inf")}
            out = {}
            for _ in range(repeats):
                for name, module in (("then", then), ("now", handoff_sim)):
                    cpu = time.process_time()
                    out[name] = module.simulate(config, steps=GATE)
                    best[name] = min(best[name], time.process_time() - cpu)
            equal = json.dumps(out["now"], sort_keys=True) == json.dumps(
                out["then"], sort_keys=True
            )
            same &= equal
            ratio = best["now"] / best["then"]
            worst = max(worst, ratio)
            print(
                f"  {sharing:>4} / {streaming:<9} then {best['then']:6.2f}  now "
                f"{best['now']:6.2f}  now/then {ratio:5.2f}x  "
                f"results {'identical' if equal else 'DIFFER'}"
            )
    print(
        f"slowest mode: {worst:.2f}x of {revision} (goal <= 1.25x): "
        f"{'met' if worst <= 1.25 else 'NOT met'}; every result identical: {same}"
    )
    return 0 if same and worst <= 1.25 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--no-million", action="store_true", help="skip the 1,000,000-request run (about 20 s)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per size; the best is kept (default 3)"
    )
    parser.add_argument(
        "--against",
        metavar="REV",
        help="compare this tree's simulator with the one at git revision REV",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")

    GATE.update(course_gate())
    if args.against:
        return compare(args.against, args.repeats)
    timed(2_000, 1)  # warm-up
    sizes = [10_000, 100_000] + ([] if args.no_million else [1_000_000])
    print(
        f"scenario: {SCENARIO['link']}, {SCENARIO['streaming']} streaming, "
        f"{SCENARIO['link_sharing']} link, "
        f"{SCENARIO['rate_per_s']} req/s, every fault at 2%; best of {args.repeats} (1M: one run)"
    )
    print(
        f"{'requests':>10} {'CPU s':>8} {'wall s':>8} {'requests/s':>12} {'us/request':>11} "
        f"{'vs 10k':>8}  TTFT p50/p99 (ms)"
    )
    base = None
    rows = {}
    for n in sizes:
        seconds, wall, summary = timed(n, 1 if n >= 1_000_000 else args.repeats)
        per = seconds / n
        base = base or per
        rows[n] = seconds
        ttft = summary["ttft"]
        print(
            f"{n:>10,} {seconds:>8.2f} {wall:>8.2f} {n / seconds:>12,.0f} "
            f"{per * 1e6:>11.1f} {per / base:>7.2f}x  "
            f"{ttft['p50_ms']:.1f} / {ttft['p99_ms']:.1f}"
        )
    largest = max(rows)
    growth = (rows[largest] / largest) / (rows[sizes[0]] / sizes[0])
    print(
        f"cost per request at {largest:,} is {growth:.2f}x that at {sizes[0]:,}: "
        f"{'linear (within 1.25x)' if growth <= 1.25 else 'NOT linear'}"
    )
    print("\n100k requests per link mode (records kept):")
    for sharing in ("fifo", "fair"):
        for streaming in ("whole", "layerwise"):
            seconds, wall, _ = timed(
                GOAL_REQUESTS, args.repeats, link_sharing=sharing, streaming=streaming
            )
            print(
                f"  {sharing:>4} / {streaming:<9} {seconds:6.2f} CPU s ({wall:6.2f} wall)  "
                f"{GOAL_REQUESTS / seconds:>10,.0f} requests/s"
            )
    seconds = rows[GOAL_REQUESTS]
    verdict = "meets" if seconds < GOAL_SECONDS else "misses"
    print(
        f"\n{GOAL_REQUESTS:,} requests in {seconds:.2f} CPU s on one core: {verdict} the "
        f"goal of under {GOAL_SECONDS:.0f} s "
        f"({GOAL_SECONDS / seconds:.1f}x headroom)"
    )
    return 0 if seconds < GOAL_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
