"""Step 5: copy/compute overlap, measured.

``run_experiment`` times, for each payload, a serial timeline (copy, then compute) and an
overlapped one (copy and compute issued together) and records the chapter's result
fields. Three modes:

- ``'dry_run'``: record the plan only (decision ``'not_measured'``);
- ``'real_gpu'``: a pinned host tensor copied to the GPU on one non-default CUDA stream
  while bf16 matmuls run on another, timed with CUDA events;
- ``'real_cpu'``: the CPU analogue: a tensor copy on one thread (memory-bound) against
  float32 matmuls on another (compute-bound), torch limited to one intra-op thread so a
  core is left for the copy.

Each payload is measured with two compute windows: the chapter's fixed single matmul,
and a window calibrated from the measured copy-alone time so that compute lasts about as
long as the copy, the case where overlap can reach its limit (ratio near 0.5).

The decision is not made here: it is the learner's TODO 5, passed to ``finalize``.
"""
from __future__ import annotations

import json
import math
import platform
import re
import shutil
import statistics
import subprocess
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Sequence

from .notebook_runtime import grading_mode, package_version
from .project_runtime import results_dir, write_json_atomic

SCHEMA_VERSION = "inference-mechanism-gpu/v1"
SEMANTIC_ID = "INF-SERVING-OVERLAP"
RUN_MODES = ("dry_run", "real_gpu", "real_cpu")
DECISIONS = ("accept_physical_overlap", "tune_overlap_window", "reject_incorrect_path",
             "reject_until_environment_fixed", "not_measured", "not_decided")
MiB = 2**20
CPU_FIXED_DIVISOR = 4  # the CPU analogue's fixed window: MATRIX_SIZE / 4 (one 2048 matmul takes ~0.3 s on one core)
CPU_BLOCK = 256  # calibrated CPU window: repeated 256x256 float32 matmuls
# PCIe per-lane throughput after encoding (GB/s) by generation, for the nominal link figure.
PCIE_GBYTES_PER_LANE = {3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def load_schema() -> dict:
    return json.loads(resources.files("tools").joinpath("schemas/inf_serving_overlap.schema.json").read_text(encoding="utf-8"))


def validate_result(result: dict) -> None:
    """Raise jsonschema.ValidationError when ``result`` does not follow the schema."""
    import jsonschema

    jsonschema.validate(result, load_schema())


def _check_config(run_mode, run_label, payload_mib, matrix_size, warmup_steps, repeat_steps, seed) -> None:
    if run_mode not in RUN_MODES:
        raise ValueError(f"RUN_MODE must be one of {RUN_MODES}, got {run_mode!r}")
    if not isinstance(run_label, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", run_label):
        raise ValueError(f"RUN_LABEL must be 1-64 letters, digits, '_', '.' or '-' (it names a file), got {run_label!r}")
    if not payload_mib or not all(isinstance(p, (int, float)) and p > 0 for p in payload_mib):
        raise ValueError(f"PAYLOAD_MIB must be a non-empty list of positive sizes in MiB, got {payload_mib!r}")
    for name, value, low in (("MATRIX_SIZE", matrix_size, 16), ("WARMUP_STEPS", warmup_steps, 0), ("REPEAT_STEPS", repeat_steps, 1)):
        if not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if not isinstance(seed, int):
        raise ValueError(f"SEED must be an integer, got {seed!r}")


def new_result(run_mode: str, run_label: str, environment_profile: str, workload: dict) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "semantic_id": SEMANTIC_ID,
        "run_mode": run_mode,
        "run_label": run_label,
        "environment_profile": environment_profile,
        "framework": {"torch": package_version("torch"), "python": platform.python_version()},
        # a graded dry run never touches the device: importing torch alone costs seconds per notebook
        "hardware": {"cuda_available": False if run_mode == "dry_run" and grading_mode() else _cuda_available()},
        "workload": workload,
        "cases": [],
        "failure": None,
        "evidence_level": "dry_run",
        "decision": "not_measured",
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


def run_experiment(run_mode: str = "dry_run", run_label: str = "default", environment_profile: str = "INF-CUDA-MECHANISM",
                   payload_mib: Sequence[float] = (16, 64, 128), matrix_size: int = 2048, warmup_steps: int = 5,
                   repeat_steps: int = 20, seed: int = 42, progress: bool = True) -> dict:
    """Run (or plan) the experiment and return the result dictionary (not yet decided)."""
    _check_config(run_mode, run_label, payload_mib, matrix_size, warmup_steps, repeat_steps, seed)
    workload = {"payload_mib": list(payload_mib), "matrix_size": matrix_size, "warmup_steps": warmup_steps,
                "repeat_steps": repeat_steps, "seed": seed, "windows": ["fixed", "calibrated"]}
    result = new_result(run_mode, run_label, environment_profile, workload)
    if run_mode == "dry_run":
        return result
    runner = _run_gpu if run_mode == "real_gpu" else _run_cpu
    try:
        runner(result, progress)
        result["evidence_level"] = "local_mechanism_benchmark" if run_mode == "real_gpu" else "cpu_analogue_benchmark"
        result["decision"] = "not_decided"
    except Exception as exc:  # recorded, never raised: the notebook goes on and the file says why
        result["cases"] = []
        result["failure"] = {"type": type(exc).__name__, "message": str(exc)}
        result["evidence_level"] = f"failed_{run_mode}_attempt"
        result["decision"] = "reject_until_environment_fixed"
    return result


def finalize(result: dict, decide: Callable[[list], str]) -> dict:
    """Fill in ``decision`` with the learner's ``decide(cases)`` when cases were measured."""
    if result["failure"] is None and result["cases"]:
        try:
            decision = decide(result["cases"])
        except NotImplementedError:
            decision = "not_decided"
        if decision not in DECISIONS:
            raise ValueError(f"decide_overlap returned {decision!r}; expected one of {DECISIONS[:3]}")
        result["decision"] = decision
    return result


def result_path(run_label: str, root: Path | None = None) -> Path:
    return results_dir(root) / f"inf_serving_overlap_{run_label}.json"


def write_result(result: dict, root: Path | None = None) -> Path:
    """Validate against the schema, then write atomically to benchmarks/results/."""
    validate_result(result)
    return write_json_atomic(result_path(result["run_label"], root), result)


# ----------------------------------------------------------------------------- helpers

def _progress(total: int, enabled: bool, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False)


def _summarize(serial: list[dict], overlap: list[dict], copy_alone: list[float], compute_alone: list[float]) -> dict:
    serial_ms = [r["total"] for r in serial]
    overlap_ms = [r["total"] for r in overlap]
    s_med, o_med = statistics.median(serial_ms), statistics.median(overlap_ms)
    c_med, k_med = statistics.median(copy_alone), statistics.median(compute_alone)
    intersect = [max(r["copy_start"], r["compute_start"]) < min(r["copy_end"], r["compute_end"]) for r in overlap]
    typical = sorted(overlap, key=lambda r: r["total"])[len(overlap) // 2]
    return {
        "copy_alone_ms": c_med, "compute_alone_ms": k_med,
        "serial_median_ms": s_med, "serial_p95_ms": percentile(serial_ms, 95),
        "overlap_median_ms": o_med, "overlap_p95_ms": percentile(overlap_ms, 95),
        "latency_ratio": o_med / s_med, "hidden_ms": max(s_med - o_med, 0.0),
        "predicted_serial_ms": c_med + k_med,
        # Step 2's model: compute, plus the part of the copy that compute does not cover.
        "predicted_overlap_ms": k_med + max(c_med - k_med, 0.0),
        "intersect_fraction": sum(intersect) / len(intersect),
        "timeline": {k: typical[k] for k in ("copy_start", "copy_end", "compute_start", "compute_end", "total")},
    }


def _calibrated_count(copy_ms: float, unit_ms: float) -> int:
    return max(1, round(copy_ms / max(unit_ms, 1e-6)))


# ----------------------------------------------------------------------------- CPU analogue

def _run_cpu(result: dict, progress: bool) -> None:
    import torch

    wl = result["workload"]
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)  # leave a core for the copy thread
    try:
        gen = torch.Generator().manual_seed(wl["seed"])
        fixed_n = max(16, wl["matrix_size"] // CPU_FIXED_DIVISOR)
        operands = {
            "fixed": (torch.randn(fixed_n, fixed_n, generator=gen), torch.randn(fixed_n, fixed_n, generator=gen)),
            "calibrated": (torch.randn(CPU_BLOCK, CPU_BLOCK, generator=gen), torch.randn(CPU_BLOCK, CPU_BLOCK, generator=gen)),
        }
        wl.update({"device": "cpu", "dtype": "float32", "cpu_fixed_matrix_size": fixed_n, "cpu_block": CPU_BLOCK,
                   "intra_op_threads": 1})
        result["hardware"].update({"device": "cpu", "processor": platform.processor() or platform.machine(),
                                   "logical_cpus": _cpu_count()})
        unit_ms = _median_ms(lambda: torch.mm(*operands["calibrated"]), 20)
        steps = len(wl["payload_mib"]) * 2 * (wl["warmup_steps"] + 2 * wl["repeat_steps"])
        with _progress(steps, progress, "CPU timelines") as bar:
            for payload in wl["payload_mib"]:
                n = int(payload * MiB) // 4
                src = torch.randn(n, generator=gen)
                dst = torch.empty_like(src)
                copy_alone = [_timed(lambda: dst.copy_(src)) for _ in range(wl["repeat_steps"])]
                counts = {"fixed": 1, "calibrated": _calibrated_count(statistics.median(copy_alone), unit_ms)}
                for window in ("fixed", "calibrated"):
                    left, right = operands[window]
                    product = torch.empty(left.shape[0], right.shape[1])
                    count = counts[window]
                    compute_alone = _cpu_compute_alone(left, right, product, count, wl["repeat_steps"])
                    if window == "calibrated":  # one refinement: scale the count by copy / compute
                        count = max(1, round(count * statistics.median(copy_alone) / statistics.median(compute_alone)))
                        compute_alone = _cpu_compute_alone(left, right, product, count, wl["repeat_steps"])
                    reference = torch.mm(left, right)
                    for _ in range(wl["warmup_steps"]):
                        _cpu_timeline(src, dst, left, right, product, count, True)
                        bar.update(1)
                    serial, overlap = [], []
                    for _ in range(wl["repeat_steps"]):  # interleaved, so drift hits both alike
                        serial.append(_cpu_timeline(src, dst, left, right, product, count, False))
                        overlap.append(_cpu_timeline(src, dst, left, right, product, count, True))
                        bar.update(2)
                    stats = _summarize(serial, overlap, copy_alone, compute_alone)
                    dst.zero_()  # so that the checks below see what one overlapped run wrote
                    product.zero_()
                    _cpu_timeline(src, dst, left, right, product, count, True)
                    evidence = {
                        "distinct_workers": all(r["copy_worker"] != r["compute_worker"] for r in overlap),
                        "pinned_source": None,
                        "intervals_intersect": stats["intersect_fraction"] >= 0.5,
                    }
                    result["cases"].append({
                        "payload_mib": payload, "window": window, "matrix_size": left.shape[0], "matmul_count": count,
                        **stats,
                        "copy_gbytes_per_s": payload * MiB / (stats["copy_alone_ms"] / 1e3) / 1e9,
                        "copy_correct": bool(torch.equal(dst, src)),
                        "compute_correct": bool(torch.allclose(product, reference, rtol=1e-5, atol=1e-5)),
                        "path_evidence": evidence,
                        "path_confirmed": evidence["distinct_workers"] and evidence["intervals_intersect"],
                    })
    finally:
        torch.set_num_threads(threads_before)


def _cpu_compute_alone(left, right, product, count: int, repeats: int) -> list[float]:
    import torch

    return [_timed(lambda: [torch.mm(left, right, out=product) for _ in range(count)]) for _ in range(repeats)]


def _cpu_count() -> int:
    import os

    return os.cpu_count() or 1


def _timed(fn: Callable[[], Any]) -> float:
    begin = time.perf_counter()
    fn()
    return (time.perf_counter() - begin) * 1e3


def _median_ms(fn: Callable[[], Any], repeats: int) -> float:
    fn()
    return statistics.median(_timed(fn) for _ in range(repeats))


def _cpu_timeline(src, dst, left, right, product, count: int, overlap: bool) -> dict:
    """One timeline on the CPU. Times in ms from its start."""
    import torch

    marks: dict[str, float] = {}
    begin = time.perf_counter()

    def copy() -> None:
        marks["copy_start"] = time.perf_counter()
        dst.copy_(src)  # releases the GIL; memory-bound
        marks["copy_end"] = time.perf_counter()
        marks["copy_worker"] = threading.get_ident()

    def compute() -> None:
        marks["compute_start"] = time.perf_counter()
        for _ in range(count):
            torch.mm(left, right, out=product)  # releases the GIL; compute-bound
        marks["compute_end"] = time.perf_counter()
        marks["compute_worker"] = threading.get_ident()

    if overlap:
        worker = threading.Thread(target=copy)
        worker.start()
        compute()
        worker.join()
    else:
        copy()
        compute()
    end = time.perf_counter()
    out = {k: (v - begin) * 1e3 for k, v in marks.items() if not k.endswith("worker")}
    out.update(total=(end - begin) * 1e3, copy_worker=marks["copy_worker"], compute_worker=marks["compute_worker"])
    return out


# ----------------------------------------------------------------------------- GPU

def _run_gpu(result: dict, progress: bool) -> None:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("RUN_MODE='real_gpu' but CUDA is not available on this machine "
                           "(use 'real_cpu' for the CPU analogue, or run on a machine with an NVIDIA GPU)")
    wl = result["workload"]
    props = torch.cuda.get_device_properties(0)
    result["hardware"].update({
        "device": torch.cuda.get_device_name(0), "cuda": torch.version.cuda,
        "async_engine_count": getattr(props, "async_engine_count", None),
        "total_memory_gib": round(props.total_memory / 2**30, 1),
        **_pcie_link(),
    })
    wl.update({"device": "cuda", "dtype": "bfloat16"})
    torch.manual_seed(wl["seed"])
    n = wl["matrix_size"]
    left = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    right = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    product = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    reference = left.float() @ right.float()  # fp32 reference for the bf16 products
    tolerance = 1e-2 * float(reference.abs().max()) + 1e-2  # bf16 output rounding, with margin
    streams = (torch.cuda.Stream(), torch.cuda.Stream())
    default = torch.cuda.default_stream()
    unit_ms = _gpu_median(lambda: torch.mm(left, right, out=product), 50)
    steps = len(wl["payload_mib"]) * 2 * (wl["warmup_steps"] + 2 * wl["repeat_steps"])
    best_gbps = 0.0
    with _progress(steps, progress, "GPU timelines") as bar:
        for payload in wl["payload_mib"]:
            elements = int(payload * MiB) // 2
            host = torch.randn(elements, dtype=torch.bfloat16).pin_memory()  # pinned once, outside the timed loop
            dev = torch.empty_like(host, device="cuda")
            copy_alone = [_gpu_elapsed(lambda: dev.copy_(host, non_blocking=True), streams[0]) for _ in range(wl["repeat_steps"] + 2)][2:]
            counts = {"fixed": 1, "calibrated": _calibrated_count(statistics.median(copy_alone), unit_ms)}
            for window in ("fixed", "calibrated"):
                count = counts[window]
                compute_alone = _gpu_compute_alone(left, right, product, count, wl["repeat_steps"], streams[1])
                if window == "calibrated":  # one refinement: scale the count by copy / compute
                    count = max(1, round(count * statistics.median(copy_alone) / statistics.median(compute_alone)))
                    compute_alone = _gpu_compute_alone(left, right, product, count, wl["repeat_steps"], streams[1])
                for _ in range(wl["warmup_steps"]):
                    _gpu_timeline(host, dev, left, right, product, count, True, streams)
                    bar.update(1)
                serial, overlap = [], []
                for _ in range(wl["repeat_steps"]):
                    serial.append(_gpu_timeline(host, dev, left, right, product, count, False, streams))
                    overlap.append(_gpu_timeline(host, dev, left, right, product, count, True, streams))
                    bar.update(2)
                stats = _summarize(serial, overlap, copy_alone, compute_alone)
                _gpu_timeline(host, dev, left, right, product, count, False, streams)
                serial_product = product.clone()
                dev.zero_()  # so that the checks below see what the overlapped run wrote
                product.zero_()
                _gpu_timeline(host, dev, left, right, product, count, True, streams)
                torch.cuda.synchronize()
                diff = max(float((serial_product.float() - reference).abs().max()), float((product.float() - reference).abs().max()))
                evidence = {
                    "distinct_workers": streams[0] != streams[1] and all(s.cuda_stream != default.cuda_stream for s in streams),
                    "pinned_source": bool(host.is_pinned()),
                    "intervals_intersect": stats["intersect_fraction"] >= 0.5,
                }
                gbps = payload * MiB / (stats["copy_alone_ms"] / 1e3) / 1e9
                best_gbps = max(best_gbps, gbps)
                result["cases"].append({
                    "payload_mib": payload, "window": window, "matrix_size": n, "matmul_count": count, **stats,
                    "copy_gbytes_per_s": gbps,
                    "copy_correct": bool(torch.equal(dev.cpu(), host)),  # the overlapped copy, after zeroing the target
                    "compute_correct": diff <= tolerance and bool(torch.allclose(product, serial_product, rtol=2e-2, atol=tolerance)),
                    "compute_max_abs_diff": diff,
                    "path_evidence": evidence,
                    "path_confirmed": evidence["distinct_workers"] and evidence["pinned_source"] and evidence["intervals_intersect"],
                })
    result["hardware"]["pinned_h2d_gbytes_per_s"] = best_gbps


def _gpu_elapsed(fn: Callable[[], Any], stream) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        start.record()
        fn()
        end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _gpu_compute_alone(left, right, product, count: int, repeats: int, stream) -> list[float]:
    import torch

    return [_gpu_elapsed(lambda: [torch.mm(left, right, out=product) for _ in range(count)], stream) for _ in range(repeats)]


def _gpu_median(fn: Callable[[], Any], repeats: int) -> float:
    import torch

    stream = torch.cuda.Stream()
    _gpu_elapsed(fn, stream)
    return statistics.median(_gpu_elapsed(fn, stream) for _ in range(repeats))


def _gpu_timeline(host, dev, left, right, product, count: int, overlap: bool, streams) -> dict:
    """One timeline on the GPU, timed with CUDA events. Times in ms from its start."""
    import torch

    copy_stream, compute_stream = streams
    names = ("start", "copy_start", "copy_end", "compute_start", "compute_end", "end")
    ev = {k: torch.cuda.Event(enable_timing=True) for k in names}
    main = torch.cuda.current_stream()
    torch.cuda.synchronize()
    ev["start"].record(main)
    if overlap:
        copy_stream.wait_event(ev["start"])
        compute_stream.wait_event(ev["start"])
        with torch.cuda.stream(copy_stream):
            ev["copy_start"].record()
            dev.copy_(host, non_blocking=True)
            ev["copy_end"].record()
        with torch.cuda.stream(compute_stream):
            ev["compute_start"].record()
            for _ in range(count):
                torch.mm(left, right, out=product)
            ev["compute_end"].record()
        main.wait_event(ev["copy_end"])
        main.wait_event(ev["compute_end"])
    else:
        copy_stream.wait_event(ev["start"])
        with torch.cuda.stream(copy_stream):  # the same stream for both: strictly one after the other
            ev["copy_start"].record()
            dev.copy_(host, non_blocking=True)
            ev["copy_end"].record()
            ev["compute_start"].record()
            for _ in range(count):
                torch.mm(left, right, out=product)
            ev["compute_end"].record()
        main.wait_event(ev["compute_end"])
    ev["end"].record(main)
    ev["end"].synchronize()
    out = {k: ev["start"].elapsed_time(ev[k]) for k in names[1:-1]}
    out["total"] = ev["start"].elapsed_time(ev["end"])
    return out


def _pcie_link() -> dict:
    """The GPU's current PCIe link and its nominal throughput, from nvidia-smi when present."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {}
    try:
        text = subprocess.run([smi, "--query-gpu=pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10).stdout
        gen, width, gen_max = (int(x) for x in text.strip().splitlines()[0].split(","))
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return {}
    nominal = PCIE_GBYTES_PER_LANE.get(max(gen, gen_max), 0) * width
    return {"pcie_gen_current": gen, "pcie_gen_max": gen_max, "pcie_width": width, "pcie_nominal_gbytes_per_s": round(nominal, 1)}
