"""Benchmark: the CPU analogue of Step 5 on this machine.

Reports, for the balanced (calibrated) case of each payload, the overlapped median against
max(copy alone, compute alone), both measured in the same run. Goal: within 1.15x for the
largest payload. Also reports how much the fixed window leaves exposed, the overlap evidence
of every case, the negative controls (each must come out not confirmed), and the verdict of
the reference decision rule (TODO 5's answer, loaded from the instructor's notebook).

    python benchmarks/bench_cpu_overlap.py [--repeats 20] [--intra-op-threads 1] [--runs 1] [--write-reference]

--runs N repeats the whole experiment N times and reports how many runs reached the same
verdict, with the load average: the stability of the CPU analogue on this machine.

--write-reference stores the result as benchmarks/reference/inf_serving_overlap_cpu_reference.json,
the measurement that notebook 05 shows to learners who have not run anything yet.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys

from tools import overlap_lab
from tools.notebook_runtime import load_learner_functions
from tools.project_runtime import resolve_project_root, write_json_atomic

GOAL = 1.15


def reference_rule():
    """TODO 5's reference answer, from the instructor's notebook."""
    root = resolve_project_root()
    return load_learner_functions("05_cuda_stream_overlap", ["decide_overlap"], search=[root / "solutions"])["decide_overlap"]


def report(result: dict) -> None:
    print(f"{'payload':>8} {'window':>10} {'count':>5} {'copy':>7} {'compute':>8} {'serial':>8} {'overlap':>8} "
          f"{'vs max':>7} {'ratio':>6} {'covered':>7} {'copy x':>6} confirmed")
    for case in result["cases"]:
        bound = max(case["copy_alone_ms"], case["compute_alone_ms"])
        ev = case["overlap_evidence"]
        print(f"{case['payload_mib']:>6}Mi {case['window']:>10} {case['matmul_count']:>5} {case['copy_alone_ms']:>7.2f} "
              f"{case['compute_alone_ms']:>8.2f} {case['serial_median_ms']:>8.2f} {case['overlap_median_ms']:>8.2f} "
              f"{case['overlap_median_ms'] / bound:>6.3f}x {case['latency_ratio']:>6.3f} {ev['covered_fraction_median']:>7.2f} "
              f"{ev['copy_slowdown']:>6.2f} {case['overlap_confirmed']}")
    for ctl in result["controls"]:
        ev = ctl["overlap_evidence"]
        print(f"control {ctl['name']:>14}: ratio {ctl['latency_ratio']:.3f}, covered {ev['covered_fraction_median']:.2f}, "
              f"confirmed {ctl['overlap_confirmed']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--intra-op-threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--write-reference", action="store_true")
    args = parser.parse_args(argv)

    decide = reference_rule()
    verdicts = collections.Counter()
    loads = []
    for run in range(args.runs):
        result = overlap_lab.run_experiment("real_cpu", "bench_cpu", repeat_steps=args.repeats, progress=False,
                                            intra_op_threads=args.intra_op_threads)
        if result["failure"]:
            print(f"failed: {result['failure']}")
            return 1
        overlap_lab.finalize(result, decide)
        overlap_lab.validate_result(result)
        loads.append(os.getloadavg()[0])
        verdicts[result["decision"]] += 1
        print(f"\nrun {run + 1}/{args.runs}: CPU analogue on {result['hardware']['processor']} "
              f"({result['hardware']['logical_cpus']} logical CPUs), torch {result['framework']['torch']}, "
              f"{args.repeats} repeats, {args.intra_op_threads} intra-op thread(s), load average {loads[-1]:.2f}")
        report(result)
        largest = [c for c in result["cases"] if c["window"] == "calibrated"][-1]
        vs_bound = largest["overlap_median_ms"] / max(largest["copy_alone_ms"], largest["compute_alone_ms"])
        print(f"balanced case, {largest['payload_mib']} MiB: overlapped median = {vs_bound:.3f}x max(copy, compute); "
              f"{'meets' if vs_bound <= GOAL else 'misses'} the {GOAL}x goal")
        print(f"verdict: {result['decision']} ({result['decision_reason']})")
    if args.runs > 1:
        top, count = verdicts.most_common(1)[0]
        print(f"\nstability: {count} of {args.runs} runs reached {top!r}; all verdicts {dict(verdicts)}; "
              f"1-min load average {min(loads):.2f}-{max(loads):.2f}")
    if args.write_reference:
        target = resolve_project_root() / "benchmarks" / "reference" / "inf_serving_overlap_cpu_reference.json"
        result["run_label"] = "cpu_reference"
        overlap_lab.validate_result(result)
        write_json_atomic(target, result)
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
