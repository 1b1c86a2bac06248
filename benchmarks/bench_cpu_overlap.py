"""Benchmark: the CPU analogue of Step 5 on this machine.

Reports, for the balanced (calibrated) case of each payload, the overlapped median against max(copy
alone, compute alone), both measured in the same run, and the case's bound_factor (1.30 on the CPU:
TODO 5 accepts up to that). Also reports how much the fixed window leaves exposed, the overlap
evidence of every case, the negative controls (each must come out not confirmed), and the verdict of
the reference decision rule (TODO 5's answer, loaded from the instructor's notebook).

    python benchmarks/bench_cpu_overlap.py [--repeats 20] [--payload-mib 64,128,256]
        [--intra-op-threads 1] [--runs 1] [--wait-quiet 0] [--write-reference]

--payload-mib defaults to the CPU analogue's payloads (tools.overlap.lab.CPU_PAYLOAD_MIB); pass
16,64,128 to see why the chapter's smaller payloads are not used on the CPU.

--runs N repeats the whole experiment N times and reports how many runs reached each verdict,
with how busy the machine was: the 1-minute load average sampled before each run (the run's own
two threads are not in it) and, on Linux, the cores other processes kept busy during each run
(/proc/stat's busy time minus this process's CPU time). It ends with one line, for example
"verdicts over 5 runs: accept_cpu_analogue_overlap 5/5 (load before runs: 0.12-0.30; other
processes during runs: 0.00-0.04 cores)": the stability of the CPU analogue on this machine.

--wait-quiet S waits, before each run, up to S seconds for a 2-second window in which other
processes use less than a quarter of a core (Linux), and says how long it waited; the run starts
anyway when the time is up, and its load is reported either way.

--write-reference stores the last run as
benchmarks/reference/inf_serving_overlap_cpu_reference.json, the measurement that notebook 05 shows
to learners who have not run anything yet, but only when that run was measured on a quiet machine
(load average before it below 0.3, and other processes under a quarter of a core during it);
otherwise it writes nothing and says why."""

from __future__ import annotations

import argparse
import collections
import sys
import time

from tools.notebook_runtime import load_learner_functions
from tools.overlap import lab as overlap_lab
from tools.overlap.load import OtherCpuMeter, describe_load
from tools.project_runtime import resolve_project_root, write_json_atomic

QUIET_LOAD = 0.3  # --write-reference: the load average before the run must be below this
# ... and other processes must have used less than this many cores during it
QUIET_OTHER_CORES = 0.25


def reference_rule():
    """TODO 5's reference answer, from the instructor's notebook."""
    root = resolve_project_root()
    return load_learner_functions(
        "05_cuda_stream_overlap", ["decide_overlap"], search=[root / "solutions"]
    )["decide_overlap"]


def report(result: dict) -> None:
    print(
        f"{'payload':>8} {'window':>10} {'count':>5} {'copy':>7} {'compute':>8} "
        f"{'serial':>8} {'overlap':>8} "
        f"{'vs max':>7} {'ratio':>6} {'covered':>7} {'copy x':>6} confirmed"
    )
    for case in result["cases"]:
        bound = max(case["copy_alone_ms"], case["compute_alone_ms"])
        ev = case["overlap_evidence"]
        print(
            f"{case['payload_mib']:>6}Mi {case['window']:>10} {case['matmul_count']:>5} "
            f"{case['copy_alone_ms']:>7.2f} "
            f"{case['compute_alone_ms']:>8.2f} {case['serial_median_ms']:>8.2f} "
            f"{case['overlap_median_ms']:>8.2f} "
            f"{case['overlap_median_ms'] / bound:>6.3f}x {case['latency_ratio']:>6.3f} "
            f"{ev['covered_fraction_median']:>7.2f} "
            f"{ev['copy_slowdown']:>6.2f} {case['overlap_confirmed']}"
        )
    for ctl in result["controls"]:
        ev = ctl["overlap_evidence"]
        print(
            f"control {ctl['name']:>14}: ratio {ctl['latency_ratio']:.3f}, covered "
            f"{ev['covered_fraction_median']:.2f}, "
            f"confirmed {ctl['overlap_confirmed']}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--payload-mib",
        type=lambda s: [float(v) for v in s.split(",")],
        default=list(overlap_lab.CPU_PAYLOAD_MIB),
    )
    parser.add_argument("--intra-op-threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="S")
    parser.add_argument("--write-reference", action="store_true")
    args = parser.parse_args(argv)

    decide = reference_rule()
    verdicts = collections.Counter()
    loads, others = [], []
    # per calibrated case: (overlapped median / its bound, overlapped P95 / serial median); 1 is the
    # bar
    margins = []
    for run in range(args.runs):
        if args.wait_quiet > 0:
            print(wait_quiet(args.wait_quiet))
        result = overlap_lab.run_experiment(
            "real_cpu",
            "bench_cpu",
            repeat_steps=args.repeats,
            progress=False,
            payload_mib=args.payload_mib,
            intra_op_threads=args.intra_op_threads,
        )
        if result["failure"]:
            print(f"failed: {result['failure']}")
            return 1
        overlap_lab.finalize(result, decide)
        overlap_lab.validate_result(result)
        hw = result["hardware"]
        loads.append(hw.get("load_average_1m"))
        others.append(hw.get("other_cpu_cores"))
        verdicts[result["decision"]] += 1
        print(
            f"\nrun {run + 1}/{args.runs}: CPU analogue on {hw['processor']} "
            f"({hw['logical_cpus']} logical CPUs), "
            f"torch {result['framework']['torch']}, {args.repeats} repeats, "
            f"{args.intra_op_threads} intra-op thread(s), "
            f"cpu_block {result['workload']['cpu_block']}; "
            f"{describe_load(loads[-1], hw['logical_cpus'], others[-1])}"
        )
        report(result)
        for case in (c for c in result["cases"] if c["window"] == "calibrated"):
            vs_bound = case["overlap_median_ms"] / max(
                case["copy_alone_ms"], case["compute_alone_ms"]
            )
            margins.append(
                (vs_bound / case["bound_factor"], case["overlap_p95_ms"] / case["serial_median_ms"])
            )
            print(
                f"balanced case, {case['payload_mib']:g} MiB: overlapped median = "
                f"{vs_bound:.3f}x max(copy, compute) "
                f"(bound {case['bound_factor']:g}x); overlapped P95 = "
                f"{margins[-1][1]:.3f}x the serial median (bound 1)"
            )
        print(f"verdict: {result['decision']} ({result['decision_reason']})")
    print("\n" + stability_line(verdicts, loads, others))
    if margins:
        print(
            f"closest to the bar over {len(margins)} calibrated cases (1.0 is the bar): "
            "overlapped median / bound "
            f"{max(m for m, _ in margins):.3f}, overlapped P95 / serial median "
            f"{max(p for _, p in margins):.3f}"
        )
    if args.write_reference:
        quiet, why = quiet_enough(loads[-1], others[-1])
        if not quiet:
            print(f"not writing the reference: {why}. Rerun on a quiet machine.")
            return 2
        target = (
            resolve_project_root()
            / "benchmarks"
            / "reference"
            / "inf_serving_overlap_cpu_reference.json"
        )
        result["run_label"] = "cpu_reference"
        overlap_lab.validate_result(result)
        write_json_atomic(target, result)
        print(f"wrote {target}")
    return 0


def wait_quiet(limit_s: float, window_s: float = 2.0) -> str:
    """Wait up to ``limit_s`` for a ``window_s`` window in which other processes use <
    QUIET_OTHER_CORES."""
    begin = time.perf_counter()
    while True:
        with OtherCpuMeter() as meter:
            time.sleep(window_s)
        waited = time.perf_counter() - begin
        if meter.other_cores is None:
            return "wait-quiet: /proc/stat cannot be read here; not waiting"
        if meter.other_cores < QUIET_OTHER_CORES:
            return (
                f"wait-quiet: quiet after {waited:.0f} s (other processes "
                f"{meter.other_cores:.2f} cores)"
            )
        if waited >= limit_s:
            return (
                f"wait-quiet: still busy after {waited:.0f} s (other processes "
                f"{meter.other_cores:.2f} cores); running anyway"
            )


def _span(values: list, unit: str = "") -> str:
    known = [v for v in values if v is not None]
    return f"{min(known):.2f}-{max(known):.2f}{unit}" if known else "not measured"


def stability_line(verdicts: collections.Counter, loads: list, others: list) -> str:
    """'verdicts over 5 runs: accept_cpu_analogue_overlap 5/5 (load before runs: 0.12-0.30;
    ...)'."""
    runs = sum(verdicts.values())
    counts = ", ".join(f"{verdict} {count}/{runs}" for verdict, count in verdicts.most_common())
    return (
        f"verdicts over {runs} run{'s' if runs != 1 else ''}: {counts} (load before runs: "
        f"{_span(loads)}; "
        f"other processes during runs: {_span(others, ' cores')})"
    )


def quiet_enough(load: float | None, other_cores: float | None) -> tuple[bool, str]:
    """Whether a run was measured on a quiet machine, and if not, why."""
    if load is None and other_cores is None:
        return False, "this system reports neither a load average nor /proc/stat"
    if load is not None and load >= QUIET_LOAD:
        return False, f"the load average before the run was {load:.2f} (>= {QUIET_LOAD})"
    if other_cores is not None and other_cores >= QUIET_OTHER_CORES:
        return False, (
            f"other processes kept {other_cores:.2f} cores busy during the run (>= "
            f"{QUIET_OTHER_CORES})"
        )
    return True, ""


if __name__ == "__main__":
    sys.exit(main())
