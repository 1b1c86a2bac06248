"""GPU check for Step 5: the whole ``real_gpu`` path with small payloads, its controls, the
pipeline sweep and the bandwidth curve, in under 3 minutes; prints a pass/fail table.

    python benchmarks/gpu_check.py [--out DIR]        # on the GPU machine: torch + the stdlib
    python benchmarks/gpu_check.py --validate FILE    # back on the course machine: schema check

The sizes (``--payload-mib``, ``--matrix-size``, ``--repeats`` ...) default to the check's own; the
tests run it whole, with tiny sizes, on the stand-in for torch.cuda (``tests/fake_cuda.py``): such a
run fails its "measured on a device" row, and is never written inside the course folder.

On the GPU machine it needs only torch and Python >= 3.11 (the course runtime in ``tools/`` is
imported from this checkout; jsonschema is not needed there). It writes
``inf_serving_overlap_gpu_check.json`` (the result, decided by TODO 5's reference rule) and
``gpu_check_extras.json`` (sweep, bandwidth curve, profiler cross-check; the Chrome traces lie
beside it) to ``--out``, then exits 1 when any check fails. The result can be copied under
``benchmarks/reference/`` labelled with the device.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.overlap import lab as overlap_lab  # noqa: E402  (after the path set-up)

BUDGET_S = 180


def reference_rule(notebook: Path = ROOT / "solutions" / "05_cuda_stream_overlap.ipynb"):
    """TODO 5's reference answer: the instructor notebook's ``todo5_solution`` cell, run alone.

    Only that cell: the notebook's set-up cell installs packages and imports matplotlib, which the
    GPU machine need not have. Read with the standard library (a notebook is JSON), and before the
    run, so that a missing rule costs no device time."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    found = [
        c
        for c in cells
        if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "todo5_solution"
    ]
    if len(found) != 1:
        raise RuntimeError(
            f"{notebook.name}: expected one cell with grade_id todo5_solution, found {len(found)}"
        )
    source = found[0]["source"]
    namespace: dict = {}
    exec(
        compile(
            "".join(source) if isinstance(source, list) else source,
            f"{notebook.name}:todo5_solution",
            "exec",
        ),
        namespace,
    )
    return namespace["decide_overlap"]


def checks_for(result: dict, extras: dict) -> list[tuple[str, bool, str]]:
    """(check, passed, detail) for a decided real_gpu result and its extras. Pure: testable
    anywhere."""
    hw, cases, controls = result["hardware"], result["cases"], result["controls"]
    calibrated = [c for c in cases if c["window"] == "calibrated"]
    rows = [
        ("run finished without failure", result["failure"] is None, str(result["failure"] or "")),
        (
            "measured on a device (not a stand-in)",
            hw.get("provenance") == "device"
            and result["evidence_level"] == "local_mechanism_benchmark",
            f"{hw.get('device', '?')}: provenance {hw.get('provenance')}, evidence "
            f"{result['evidence_level']}",
        ),
        (
            "device facts from the driver",
            all(
                hw.get(k) is not None
                for k in (
                    "async_engine_count",
                    "concurrent_kernels",
                    "compute_capability",
                    "sm_count",
                )
            ),
            f"engines {hw.get('async_engine_count')}, concurrent kernels "
            f"{hw.get('concurrent_kernels')}, cc {hw.get('compute_capability')}, "
            f"{hw.get('sm_count')} SMs, bus {hw.get('pci_bus_id')}",
        ),
        (
            "a free copy engine (async_engine_count >= 1)",
            (hw.get("async_engine_count") or 0) >= 1,
            str(hw.get("async_engine_count")),
        ),
        (
            "every case correct",
            bool(cases) and all(c["copy_correct"] and c["compute_correct"] for c in cases),
            f"{sum(c['copy_correct'] and c['compute_correct'] for c in cases)}/{len(cases)}",
        ),
        ("preconditions met", bool(cases) and all(c["preconditions_met"] for c in cases), ""),
    ]
    for ctl in controls:
        ev = ctl["overlap_evidence"]
        rows.append(
            (
                f"control {ctl['name']} not confirmed",
                not ctl["overlap_confirmed"],
                f"ratio {ctl['latency_ratio']:.2f}, covered "
                f"{ev['covered_fraction_median']:.2f}, "
                f"{ev['overlapped_repeats']}/{ev['repeats']} repeats",
            )
        )
    rows.append(("three controls ran", len(controls) == 3, str([c["name"] for c in controls])))
    for c in calibrated:
        ev = c["overlap_evidence"]
        rows.append(
            (
                f"{c['payload_mib']:g} MiB calibrated: overlap confirmed",
                c["overlap_confirmed"],
                f"covered {ev['covered_fraction_median']:.2f}, "
                f"{ev['overlapped_repeats']}/{ev['repeats']} repeats, copy "
                f"x{ev['copy_slowdown']:.2f}",
            )
        )
        rows.append(
            (
                f"{c['payload_mib']:g} MiB calibrated: balance within 10%",
                abs(c["compute_copy_balance"] - 1) <= 0.10,
                f"compute/copy {c['compute_copy_balance']:.3f} with {c['matmul_count']} matmuls",
            )
        )
        rows.append(
            (
                f"{c['payload_mib']:g} MiB calibrated: launches inside the gate",
                c.get("gate_held_fraction", 0) >= 0.9,
                f"{c.get('gate_held_fraction', 0):.0%} of runs, launch "
                f"{c.get('launch_overhead_ms', float('nan')):.3f} ms",
            )
        )
    rows.append(
        (
            "decision: accept_physical_overlap",
            result["decision"] == "accept_physical_overlap",
            result.get("decision_reason") or "",
        )
    )
    sweep = extras.get("sweep")
    if sweep is not None:
        rows.append(
            (
                "pipeline: chunking hides copy (best > 1 chunk)",
                sweep["best_chunks"] > 1,
                f"best {sweep['best_chunks']} chunks, exposed "
                f"{sweep['exposed_ms'][0]:.3f} -> {min(sweep['exposed_ms']):.3f} ms, "
                f"per-chunk cost {sweep['per_chunk_cost_ms'] * 1e3:.1f} µs",
            )
        )
    profile = extras.get("profile")
    if profile is not None:
        over, serial = profile["overlap"], profile["serial"]
        rows.append(
            (
                "profiler: kernels ran during the memcpy (overlapped run)",
                over["overlap_fraction"] >= 0.5,
                f"{over['kernel_ms_during_memcpy']:.3f} of {over['memcpy_ms']:.3f} ms "
                f"memcpy, {over['kernel_spans']} kernels",
            )
        )
        rows.append(
            (
                "profiler: none during the memcpy (serial run)",
                serial["memcpy_spans"] >= 1 and serial["overlap_fraction"] <= 0.05,
                f"{serial['kernel_ms_during_memcpy']:.3f} of {serial['memcpy_ms']:.3f} ms",
            )
        )
    curve = extras.get("bandwidth")
    if curve is not None:
        s = curve["series"]
        rows.append(
            (
                "bandwidth: pinned H2D faster than pageable",
                s["h2d_pinned"]["gbytes_per_s"] > s["h2d_pageable"]["gbytes_per_s"],
                ", ".join(
                    f"{k} {v['gbytes_per_s']:.1f} GB/s (t0 {v['t0_ms'] * 1e3:.0f} µs)"
                    for k, v in s.items()
                ),
            )
        )
    return rows


def print_table(rows: list[tuple[str, bool, str]]) -> None:
    width = max(len(name) for name, *_ in rows)
    for name, passed, detail in rows:
        print(f"{'PASS' if passed else 'FAIL'}  {name:<{width}}  {detail}")
    print(f"\n{sum(p for _, p, _ in rows)}/{len(rows)} checks passed")


def run(out: Path, sizes: argparse.Namespace | None = None) -> int:
    from tools.overlap import sweep as overlap_sweep
    from tools.overlap.gpu import runtime

    sizes = sizes or parser().parse_args([])
    rt = runtime()
    torch = rt.torch
    begin = time.monotonic()
    if rt.provenance != "device" and out.resolve().is_relative_to(ROOT):
        print(
            "FAIL  a stand-in for torch.cuda is installed: its results are not written "
            f"inside the course folder ({out})"
        )
        return 1
    if not torch.cuda.is_available():
        print("FAIL  CUDA is not available on this machine")
        return 1
    decide = reference_rule()
    result = overlap_lab.run_experiment(
        "real_gpu",
        "gpu_check",
        payload_mib=sizes.payload_mib,
        matrix_size=sizes.matrix_size,
        warmup_steps=sizes.warmup,
        repeat_steps=sizes.repeats,
        progress=False,
        profile_dir=out,
    )
    overlap_lab.finalize(result, decide)
    extras: dict = {}
    if result["failure"] is None:
        extras["sweep"] = overlap_sweep.pipeline_sweep_gpu(payload_mib=sizes.sweep_mib, repeats=5)
        extras["bandwidth"] = overlap_sweep.bandwidth_curve_gpu(
            max_mib=sizes.bandwidth_mib, repeats=3
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "inf_serving_overlap_gpu_check.json").write_text(
        json.dumps(result, indent=2), encoding="utf-8"
    )
    profile = out / "overlap_profile.json"
    if profile.is_file():
        extras["profile"] = json.loads(profile.read_text(encoding="utf-8"))
    (out / "gpu_check_extras.json").write_text(json.dumps(extras, indent=2), encoding="utf-8")
    rows = checks_for(result, extras)
    try:
        overlap_lab.validate_result(result)
        rows.append(("schema", True, "validated here"))
    except ImportError:
        rows.append(
            ("schema", True, "jsonschema absent here: run --validate on the course machine")
        )
    except Exception as exc:  # a schema violation is a failed check, reported with the rest
        rows.append(("schema", False, str(exc).splitlines()[0]))
    elapsed = time.monotonic() - begin
    rows.append((f"finished within {BUDGET_S} s", elapsed <= BUDGET_S, f"{elapsed:.0f} s"))
    print(
        f"{result['hardware'].get('device', '?')} · torch {torch.__version__} · CUDA "
        f"{torch.version.cuda} · "
        f"driver {result['hardware'].get('driver_version')}\n"
    )
    print_table(rows)
    print(
        f"\nwrote {out / 'inf_serving_overlap_gpu_check.json'} and {out / 'gpu_check_extras.json'}"
    )
    return 0 if all(p for _, p, _ in rows) else 1


def validate(path: Path) -> int:
    result = json.loads(path.read_text(encoding="utf-8"))
    extras_path = path.with_name("gpu_check_extras.json")
    extras = json.loads(extras_path.read_text(encoding="utf-8")) if extras_path.is_file() else {}
    rows = checks_for(result, extras)
    try:
        overlap_lab.validate_result(result)
        rows.append(("schema", True, "validated"))
    except Exception as exc:  # a schema violation is a failed check, reported with the rest
        rows.append(("schema", False, str(exc).splitlines()[0]))
    print_table(rows)
    return 0 if all(p for _, p, _ in rows) else 1


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT", ROOT / "benchmarks" / "results"))
    )
    parser.add_argument(
        "--validate", type=Path, help="check a result file written on the GPU machine"
    )
    parser.add_argument(
        "--payload-mib", type=float, nargs="+", default=[16, 64], help="the copies' sizes (MiB)"
    )
    parser.add_argument(
        "--matrix-size", type=int, default=2048, help="the fixed window's matmul size"
    )
    parser.add_argument(
        "--warmup", type=int, default=3, help="untimed runs of each program per case"
    )
    parser.add_argument(
        "--repeats", type=int, default=15, help="timed runs of each program per case"
    )
    parser.add_argument(
        "--sweep-mib", type=float, default=64, help="the pipeline sweep's payload (MiB)"
    )
    parser.add_argument(
        "--bandwidth-mib", type=float, default=256, help="the bandwidth curve's largest copy (MiB)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return validate(args.validate) if args.validate else run(args.out, args)


if __name__ == "__main__":
    sys.exit(main())
