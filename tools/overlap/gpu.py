"""Step 5 on a GPU: a pinned host tensor copied on one CUDA stream while bf16 matmuls run on
another.

Honest timing:

- every timed run starts behind a **gate**: ``torch.cuda._sleep`` on the current stream, which
  both work streams wait on, so all launches are queued before the GPU starts, and host launch
  latency stays out of the timed region (it is reported apart, as ``launch_overhead_ms``, with
  the share of runs whose launches all fitted inside the gate);
- both programs (serial and overlapped) are warmed on the exact streams they use (cuBLAS sets up
  a workspace per stream), and their order alternates from one repeat to the next;
- the calibrated window is resized until compute / copy is within 5%; the achieved balance is
  recorded;
- a CUDA event after each matmul and after the copy gives the completion times that
  ``overlap_evidence`` reads; start events are never trusted.

Negative controls (run by default, copy issued first as in the real case): a pageable source,
copy and compute on one stream, and ``non_blocking=False``. Each must come out not confirmed.

This path needs a CUDA machine; it is written to the same timeline format as the CPU analogue.
Everything it touches of the device goes through one ``Runtime`` (torch, the host clock, the
driver's facts). Tests put a stand-in there (``tests/fake_cuda.py``: a deterministic timing model of
streams, copy engines and matmuls) so that every line runs without a GPU; what it produces says so
(``hardware.provenance`` ``'stand_in'``, evidence level ``'stand_in_timing_model'``), the schema
keeps it from passing for a measurement, and ``write_result`` refuses to write it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..i18n import N_, tr
from ..presets import MiB
from .device import DriverError, driver_facts, nvml_facts
from .evidence import (
    BOUND_FACTOR_GPU,
    MAX_COPY_SLOWDOWN_GPU,
    negative_controls,
    overlap_evidence,
    preconditions_met,
    spans_overlap_ms,
    summarize,
)

BALANCE_TOLERANCE = 0.05
CALIBRATION_ROUNDS = 6
GATE_MIN_MS = 1.0  # the gate holds the GPU at least this long while the host queues the run
GATE_PER_LAUNCH_MS = 0.02  # ... plus this much per launch (a generous host launch cost)

GPU_CONTROLS = {
    "pageable_source": "copy from pageable (not pinned) memory, then compute on the other stream",
    "one_stream": "copy, then compute, on one stream",
    "blocking_copy": "pinned copy with non_blocking=False, then compute on the other stream",
}


@dataclass(frozen=True)
class Runtime:
    """What the engine drives: ``torch``, the host clock launch latency is read from (seconds),
    the driver's device facts and NVML's, and where they came from (``provenance``)."""

    torch: Any
    clock: Callable[[], float]
    driver_facts: Callable[[int], dict]
    nvml_facts: Callable[[str], dict | None]
    driver_version: Callable[[], str]
    facts_source: str = "cuDeviceGetAttribute (libcuda)"
    provenance: str = "device"  # 'device', or 'stand_in' (a timing model: never a measurement)


STAND_IN: Runtime | None = None  # set only by tests (tests/fake_cuda.py); None in every real run


def runtime() -> Runtime:
    """The real CUDA runtime (torch imported here), or the stand-in a test installed."""
    if STAND_IN is not None:
        return STAND_IN
    import torch

    return Runtime(torch, time.perf_counter, driver_facts, nvml_facts, _driver_version_text)


class GpuPlan:
    """One case's tensors and streams, and the runs made from them."""

    def __init__(self, host, dev, left, right, product, count: int, streams, clock_khz: int):
        rt = runtime()
        self.host, self.dev, self.left, self.right, self.product = host, dev, left, right, product
        self.count = count
        self.copy_stream, self.compute_stream = streams
        self.clock_khz = clock_khz
        self.gate_ms = GATE_MIN_MS
        self._pageable = None
        self.torch, self.clock = rt.torch, rt.clock

    @property
    def pageable(self):
        if self._pageable is None:
            # ordinary (pageable) memory
            self._pageable = self.torch.empty(self.host.shape, dtype=self.host.dtype)
            self._pageable.copy_(self.host)
        return self._pageable

    def run(self, kind: str) -> dict:
        """One gated run. ``kind``: 'serial' (= the 'one_stream' control), 'overlap',
        'pageable_source', 'blocking_copy'."""
        torch = self.torch
        event = lambda: torch.cuda.Event(enable_timing=True)
        source = self.pageable if kind == "pageable_source" else self.host
        non_blocking = kind != "blocking_copy"
        compute_stream = (
            self.copy_stream if kind in ("serial", "one_stream") else self.compute_stream
        )
        begin, gate, copy_start, copy_end, end = event(), event(), event(), event(), event()
        units = [event() for _ in range(self.count)]
        main = torch.cuda.current_stream()
        torch.cuda.synchronize()
        begin.record(main)
        torch.cuda._sleep(int(self.gate_ms * self.clock_khz))  # cycles = ms * kHz
        gate.record(main)
        host_begin = self.clock()
        self.copy_stream.wait_event(gate)
        compute_stream.wait_event(gate)
        with torch.cuda.stream(self.copy_stream):
            copy_start.record()
            self.dev.copy_(source, non_blocking=non_blocking)
            copy_end.record()
        with torch.cuda.stream(compute_stream):
            for unit in units:
                torch.mm(self.left, self.right, out=self.product)
                unit.record()
        launch_ms = (self.clock() - host_begin) * 1e3
        main.wait_stream(self.copy_stream)
        main.wait_stream(compute_stream)
        end.record(main)
        end.synchronize()
        gate_ms = begin.elapsed_time(gate)
        return {
            "copy_start": gate.elapsed_time(copy_start),
            "copy_ends": [gate.elapsed_time(copy_end)],
            "unit_ends": [gate.elapsed_time(u) for u in units],
            "total": gate.elapsed_time(end),
            "launch_ms": launch_ms,
            "gate_held": launch_ms < gate_ms,
        }

    def size_gate(self) -> None:
        self.gate_ms = gate_length_ms(self.count)

    def copy_alone(self) -> float:
        return _elapsed(
            self.torch,
            lambda: self.dev.copy_(self.host, non_blocking=True),
            self.copy_stream,
            _gate_cycles(1, self.clock_khz),
        )

    def compute_alone(self) -> float:
        def work():
            for _ in range(self.count):
                self.torch.mm(self.left, self.right, out=self.product)

        return _elapsed(
            self.torch, work, self.compute_stream, _gate_cycles(self.count, self.clock_khz)
        )


def gate_length_ms(launches: int) -> float:
    """A gate long enough for the host to queue ``launches`` launches (and a few events) behind
    it."""
    return GATE_MIN_MS + GATE_PER_LAUNCH_MS * (launches + 4)


def _gate_cycles(launches: int, clock_khz: int) -> int:
    return int(gate_length_ms(launches) * clock_khz)  # cycles = ms * kHz


def _elapsed(torch, fn: Callable[[], object], stream, gate_cycles: int) -> float:
    """ms on the GPU from the gate's end to ``fn``'s last work on ``stream``: the stream first
    sleeps for ``gate_cycles`` while the host queues ``fn``, so host launch latency is not timed
    (as in ``GpuPlan.run``); otherwise copy alone and compute alone would each include one launch
    delay that the gated serial and overlapped runs do not."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(gate_cycles)
        start.record()
        fn()
        end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _driver_version_text(path: Path = Path("/proc/driver/nvidia/version")) -> str:
    try:
        text = path.read_text()
    except OSError:
        return "unknown"
    for word in text.split():
        if word.count(".") >= 1 and word.replace(".", "").isdigit():
            return word
    return "unknown"


def device_facts(rt: Runtime, index: int) -> dict:
    props = rt.torch.cuda.get_device_properties(index)
    try:
        facts = rt.driver_facts(index)
    except (DriverError, AttributeError) as exc:
        raise RuntimeError(
            N_("cannot read device facts from the CUDA driver: {error}").format(error=exc)
        ) from exc
    return {
        "device": props.name,
        "cuda": str(rt.torch.version.cuda),
        "total_memory_gib": round(props.total_memory / 2**30, 1),
        "driver_version": rt.driver_version(),
        **facts,
        "device_facts_source": rt.facts_source,
        "provenance": rt.provenance,
    }


def _require_cuda(torch) -> None:
    """Refuse to run the GPU path where CUDA is not available."""
    if not torch.cuda.is_available():
        raise RuntimeError(
            N_(
                "RUN_MODE='real_gpu' but CUDA is not available on this machine "
                "(use 'real_cpu' for the CPU analogue, or run on a machine with an NVIDIA GPU)"
            )
        )


def _gpu_operands(torch, n: int) -> tuple:
    """The bf16 matmul operands and output on the GPU, an fp32 reference product and the
    tolerance the bf16 products are checked against."""
    left = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    right = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    product = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    reference = left.float() @ right.float()  # fp32 reference for the bf16 products
    tolerance = 1e-2 * float(reference.abs().max()) + 1e-2  # bf16 output rounding, with margin
    return left, right, product, reference, tolerance


def _work_streams(torch) -> tuple[tuple, bool]:
    """The copy stream and the compute stream, and whether they are distinct from each other
    and from the default stream."""
    streams = (torch.cuda.Stream(), torch.cuda.Stream())
    default = torch.cuda.default_stream()
    distinct = streams[0].cuda_stream != streams[1].cuda_stream and all(
        s.cuda_stream != default.cuda_stream for s in streams
    )
    return streams, distinct


def _calibrate_matmul_count(plan: GpuPlan, copy_med_ms: float) -> None:
    """Resize the plan's matmul count until compute / copy is within 5% (or the rounds run out)."""
    plan.count = max(
        1,
        round(copy_med_ms / statistics.median(plan.compute_alone() for _ in range(5))),
    )
    for _ in range(CALIBRATION_ROUNDS):
        balance = statistics.median(plan.compute_alone() for _ in range(5)) / copy_med_ms
        new_count = max(1, round(plan.count / balance))
        if abs(balance - 1) <= BALANCE_TOLERANCE or new_count == plan.count:
            break
        plan.count = new_count


def _measure_copy_and_size(plan: GpuPlan, window: str, repeats: int) -> list[float]:
    """Warm copy and compute, time the copy alone ``repeats`` times, calibrate the matmul count
    (calibrated window only) and size the gate. Returns the copy-alone times (ms)."""
    for _ in range(2):
        plan.copy_alone()
        plan.compute_alone()
    copy_alone = [plan.copy_alone() for _ in range(repeats)]
    copy_med_ms = statistics.median(copy_alone)
    if window == "calibrated":
        _calibrate_matmul_count(plan, copy_med_ms)
    plan.size_gate()
    return copy_alone


def _record_nvml(rt: Runtime, hardware: dict) -> None:
    """NVML's facts (driver version, nominal PCIe bandwidth) into ``hardware``; read after the
    copies, since an idle link trains down."""
    nvml = rt.nvml_facts(hardware["pci_bus_id"])
    hardware["nvml"] = nvml
    if nvml:
        if nvml.get("driver_version"):
            hardware["driver_version"] = nvml["driver_version"]
        if nvml.get("pcie_nominal_gbytes_per_s"):
            hardware["pcie_nominal_gbytes_per_s"] = nvml["pcie_nominal_gbytes_per_s"]


def run_gpu(
    result: dict, progress_factory: Callable, controls: bool = True, profile_dir: Path | None = None
) -> None:
    """Measure every case (and the controls) of a ``real_gpu`` result in place.

    With ``profile_dir``, also profile one overlapped and one serial run of the largest calibrated
    case with ``torch.profiler``: Chrome traces and ``overlap_profile.json`` go there (beside the
    result, not in it)."""
    rt = runtime()
    torch = rt.torch
    _require_cuda(torch)
    wl = result["workload"]
    index = torch.cuda.current_device()
    result["hardware"].update(cuda_available=True, **device_facts(rt, index))
    clock_khz = result["hardware"]["clock_rate_khz"] or 1_500_000
    wl.update({"device": "cuda", "dtype": "bfloat16"})
    torch.manual_seed(wl["seed"])
    n = wl["matrix_size"]
    left, right, product, reference, tolerance = _gpu_operands(torch, n)
    streams, distinct = _work_streams(torch)
    repeats, warmup = wl["repeat_steps"], wl["warmup_steps"]
    # measure_case warms at least once
    steps = len(wl["payload_mib"]) * 2 * (2 * max(1, warmup) + 2 * repeats)
    best_gbps, last_calibrated = 0.0, None
    with progress_factory(steps, tr("GPU timelines")) as bar:
        for payload in wl["payload_mib"]:
            elements = int(payload * MiB) // 2
            # pinned once, outside the timed loop
            host = torch.randn(elements, dtype=torch.bfloat16).pin_memory()
            dev = torch.empty_like(host, device="cuda")
            for window in ("fixed", "calibrated"):
                plan = GpuPlan(host, dev, left, right, product, 1, streams, clock_khz)
                copy_alone = _measure_copy_and_size(plan, window, repeats)
                compute_alone = [plan.compute_alone() for _ in range(repeats)]
                # the balance achieved in the measured repeats, not the calibration's last estimate
                balance = statistics.median(compute_alone) / statistics.median(copy_alone)
                case = measure_case(
                    plan,
                    copy_alone,
                    compute_alone,
                    warmup,
                    repeats,
                    bar,
                    reference,
                    tolerance,
                    distinct,
                )
                result["cases"].append(
                    {
                        "payload_mib": payload,
                        "window": window,
                        "matrix_size": n,
                        "compute_copy_balance": balance,
                        **case,
                    }
                )
                best_gbps = max(best_gbps, case["copy_gbytes_per_s"])
                if window == "calibrated":
                    last_calibrated = (payload, plan, copy_alone, compute_alone)
    wl["gate_ms"] = last_calibrated[1].gate_ms if last_calibrated else GATE_MIN_MS
    if controls and last_calibrated:
        result["controls"] = run_gpu_controls(*last_calibrated, repeats)
    if profile_dir is not None and last_calibrated:
        _write_profiles(Path(profile_dir), last_calibrated[1])
    result["hardware"]["pinned_h2d_gbytes_per_s"] = best_gbps
    # after the copies: an idle link trains down
    _record_nvml(rt, result["hardware"])


def _write_profiles(profile_dir: Path, plan: GpuPlan) -> None:
    """Chrome traces of one overlapped and one serial run, and their overlap figures, into
    ``profile_dir``."""
    import json

    profile_dir.mkdir(parents=True, exist_ok=True)
    profiles = {
        kind: profile_overlap(plan, profile_dir / f"overlap_trace_{kind}.json", kind)
        for kind in ("overlap", "serial")
    }
    (profile_dir / "overlap_profile.json").write_text(
        json.dumps(profiles, indent=2), encoding="utf-8"
    )


def measure_case(
    plan: GpuPlan,
    copy_alone,
    compute_alone,
    warmup: int,
    repeats: int,
    bar,
    reference,
    tolerance: float,
    distinct: bool,
) -> dict:
    torch = plan.torch
    for _ in range(max(1, warmup)):  # warm both programs on their own streams
        plan.run("serial")
        plan.run("overlap")
        bar.update(2)
    serial, overlap = [], []
    for i in range(repeats):
        for kind in ("serial", "overlap") if i % 2 == 0 else ("overlap", "serial"):
            (serial if kind == "serial" else overlap).append(plan.run(kind))
        bar.update(2)
    stats = summarize(serial, overlap, copy_alone, compute_alone)
    plan.run("serial")
    serial_product = plan.product.clone()
    plan.dev.zero_()  # so that the checks below see what the overlapped run wrote
    plan.product.zero_()
    plan.run("overlap")
    torch.cuda.synchronize()
    diff = max(
        float((serial_product.float() - reference).abs().max()),
        float((plan.product.float() - reference).abs().max()),
    )
    evidence = overlap_evidence(
        overlap,
        stats["compute_alone_ms"] / plan.count,
        stats["copy_alone_ms"],
        MAX_COPY_SLOWDOWN_GPU,
    )
    pre = {
        "distinct_workers": distinct,
        "pinned_source": bool(plan.host.is_pinned()),
        "non_blocking": True,
    }
    met = preconditions_met(pre)
    return {
        "matmul_count": plan.count,
        **stats,
        "bound_factor": BOUND_FACTOR_GPU,
        "copy_gbytes_per_s": plan.host.numel()
        * plan.host.element_size()
        / (stats["copy_alone_ms"] / 1e3)
        / 1e9,
        "copy_correct": bool(torch.equal(plan.dev.cpu(), plan.host)),
        "compute_correct": diff <= tolerance
        and bool(torch.allclose(plan.product, serial_product, rtol=2e-2, atol=tolerance)),
        "compute_max_abs_diff": diff,
        "launch_overhead_ms": statistics.median(r["launch_ms"] for r in overlap),
        "gate_held_fraction": sum(r["gate_held"] for r in serial + overlap) / len(serial + overlap),
        "preconditions": pre,
        "preconditions_met": met,
        "overlap_evidence": evidence,
        "overlap_confirmed": evidence["confirmed"],
        "path_confirmed": met and evidence["confirmed"],
    }


def run_gpu_controls(
    payload: float, plan: GpuPlan, copy_alone, compute_alone, repeats: int
) -> list[dict]:
    """Each control against the serial program, alternating order (one_stream is the serial program
    itself)."""
    return negative_controls(
        GPU_CONTROLS,
        plan.run,
        repeats,
        compute_alone,
        plan.count,
        copy_alone,
        MAX_COPY_SLOWDOWN_GPU,
        payload,
        kind_of=lambda name: "serial" if name == "one_stream" else name,
    )


def profile_overlap(plan: GpuPlan, trace_path: Path | None = None, kind: str = "overlap") -> dict:
    """An independent cross-check from ``torch.profiler``: one run of ``kind``, and how long the
    host-to-device memcpy ran while a compute kernel ran (from the CUDA activity spans, not from
    our events). Saves a Chrome trace at ``trace_path`` when given (open it in Perfetto)."""
    profiler = plan.torch.profiler
    plan.run(kind)  # warm outside the profiler
    with profiler.profile(
        activities=[profiler.ProfilerActivity.CPU, profiler.ProfilerActivity.CUDA]
    ) as prof:
        plan.run(kind)
    if trace_path is not None:
        prof.export_chrome_trace(str(trace_path))
    copies, kernels = [], []
    for event in prof.events():
        if not str(getattr(event, "device_type", "")).endswith("CUDA"):
            continue
        span = (event.time_range.start / 1e3, event.time_range.end / 1e3)  # us -> ms
        name = event.name
        if "Memcpy HtoD" in name:
            copies.append(span)
        # spin_kernel: the gate
        elif not any(word in name for word in ("Memcpy", "Memset", "spin_kernel")):
            kernels.append(span)
    copy_ms = sum(b - a for a, b in copies)
    inside = spans_overlap_ms(copies, kernels)
    return {
        "kind": kind,
        "memcpy_spans": len(copies),
        "kernel_spans": len(kernels),
        "memcpy_ms": copy_ms,
        "kernel_ms_during_memcpy": inside,
        "overlap_fraction": inside / copy_ms if copy_ms > 0 else 0.0,
        "trace": str(trace_path) if trace_path else None,
    }
