"""Record the CPU pipeline sweep and bandwidth curve that notebook 05's dry run replays.

A dry run measures nothing, so that Run All stays quick; its sections 5.5 and 5.6 then show these
recordings, each marked as replayed with the machine, the date and this command. Run it on an idle
machine; it refuses to write a recording that carries warnings (a busy machine, a poor fit).

    python benchmarks/record_cpu_curves.py [--sweep-mib 64] [--bandwidth-max-mib 16]
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.i18n import english  # noqa: E402
from tools.overlap import sweep as overlap_sweep  # noqa: E402
from tools.project_runtime import write_json_atomic  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # 64 MiB: the copy (about 7 ms on the course's machine) outlasts the per-chunk costs, so the
    # replay shows what chunking hides; at the notebook's 8 MiB (kept for a short measured run) the
    # thread hand-offs cost about as much as the copy, and no chunk count hides anything
    parser.add_argument(
        "--sweep-mib",
        type=float,
        default=64,
        help="the sweep's payload (the notebook measures 8 MiB)",
    )
    parser.add_argument(
        "--bandwidth-max-mib", type=float, default=16, help="the notebook's BANDWIDTH_MAX_MIB"
    )
    parser.add_argument(
        "--force", action="store_true", help="write even when the measurement carries warnings"
    )
    args = parser.parse_args(argv)
    machine = (
        f"{platform.processor() or platform.machine()}, {overlap_sweep.machine_load()[1]} "
        "logical CPUs"
    )
    recordings = {
        "pipeline_sweep": overlap_sweep.pipeline_sweep_cpu(payload_mib=args.sweep_mib, repeats=4),
        "bandwidth_curve": overlap_sweep.bandwidth_curve_cpu(
            max_mib=args.bandwidth_max_mib, repeats=5
        ),
    }
    command = (
        f"python benchmarks/record_cpu_curves.py --sweep-mib {args.sweep_mib:g} "
        f"--bandwidth-max-mib {args.bandwidth_max_mib:g}"
    )
    status = 0
    for kind, result in recordings.items():
        # a recording keeps its warnings in English
        result["warnings"] = [english(w) for w in result["warnings"]]
        if result["warnings"] and not args.force:
            print(f"{kind}: not written, the measurement carries warnings: {result['warnings']}")
            status = 1
            continue
        path = ROOT / "benchmarks" / "reference" / overlap_sweep.REFERENCE_FILES[kind]
        write_json_atomic(
            path,
            {
                "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "machine": machine,
                "command": command,
                "result": result,
            },
        )
        print(f"{kind}: wrote {path.relative_to(ROOT)}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
