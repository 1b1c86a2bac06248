"""Step 5 tied to Step 2: a pipeline sweep and a bandwidth curve.

**Pipeline sweep.** The payload is split into ``chunks`` pieces; chunk i+1 is copied while chunk
i is computed on (compute on a chunk needs that chunk: a real pipeline dependency). One chunk is
the serial case. The measured *exposed* time (total minus compute alone) is set against Step 2's
layer-wise model with a fixed cost per chunk added (Step 2 pays its one latency once),
``exposed(n) = copy / n + n * per_chunk_cost``: the last chunk's copy cannot be hidden, and every
chunk pays a fixed cost (a wait, a launch). More chunks pay until the fixed cost outgrows the
shrinking last chunk; ``best_chunks`` is where that happens here.

**Bandwidth curve.** Copy time against size, fitted to ``time = t0 + bytes / bandwidth``: ``t0``
is the fixed cost of one copy, the reason small copies never reach the link's bandwidth. On a
GPU: pinned and pageable host memory, host-to-device and device-to-host.

**On the CPU** both are timed with one intra-op thread (torch's setting is restored after): with
more, a copy above torch's grain size is split across OpenMP threads, and on a busy machine each
copy then waits for every thread to get a core (a 4 MiB copy measured 6.1 ms instead of 0.5 ms).
Each time is the *minimum* over the repeats, the least disturbed run: other programs only ever add
time. Each result carries ``warnings`` (a busy machine, a fit that does not hold) that the plots
print before they draw, so that a misleading figure is never shown silently. A busy machine is
judged by the cores other processes kept busy during the measurement
(``overlap_load.OtherCpuMeter``: the sweep's own threads do not count), or, where that cannot be
read, by the load average before it."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Sequence

from ..i18n import Message, tr
from ..presets import KiB, MiB
from .load import OtherCpuMeter, busy_machine, describe_load, load_average

CHUNK_COUNTS = (1, 2, 4, 8, 16, 32, 64)
# the one-chunk run may expose at most this times the copy alone (a thread start, a wake-up)
SERIAL_SLACK = 2.0
WIDTHS = (4, 8, 16, 32, 64)  # compute on a chunk: (elements / width, width) @ (width, width)
# the CPU curve's smallest copy: one call's fixed cost (~2 µs) is most of it
CPU_CURVE_START = 4 * KiB
GPU_CURVE_START = 64 * KiB
MIN_FIT_R2 = 0.7  # below this, time = t0 + bytes / bandwidth does not describe the measured copies


def fit_line(
    xs: Sequence[float], ys: Sequence[float], weights: Sequence[float] | None = None
) -> tuple[float, float]:
    """Weighted least squares ``y = a + b x``; returns (a, b)."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError("fit_line needs two or more (x, y) pairs")
    w = list(weights) if weights is not None else [1.0] * len(xs)
    sw = sum(w)
    mx = sum(wi * x for wi, x in zip(w, xs)) / sw
    my = sum(wi * y for wi, y in zip(w, ys)) / sw
    sxx = sum(wi * (x - mx) ** 2 for wi, x in zip(w, xs))
    if sxx == 0:
        raise ValueError("fit_line needs at least two distinct x values")
    b = sum(wi * (x - mx) * (y - my) for wi, x, y in zip(w, xs, ys)) / sxx
    return my - b * mx, b


def fit_bandwidth(sizes_bytes: Sequence[float], times_ms: Sequence[float]) -> dict:
    """Fit ``time_ms = t0_ms + bytes / bandwidth``; bandwidth in GB/s (1e9 bytes/s).

    Weighted by 1 / time^2 (relative error), so that the small copies, which carry ``t0``, count
    as much as the large ones, which carry the bandwidth.
    """
    if any(t <= 0 for t in times_ms):
        raise ValueError(tr("copy times must be > 0"))
    weights = [1 / t**2 for t in times_ms]
    t0, slope = fit_line(sizes_bytes, times_ms, weights)  # slope: ms per byte
    if t0 < 0:  # a negative fixed cost is noise: fit through the origin instead
        t0 = 0.0
        slope = sum(w * x * y for w, x, y in zip(weights, sizes_bytes, times_ms)) / sum(
            w * x * x for w, x in zip(weights, sizes_bytes)
        )
    if slope <= 0:
        raise ValueError(tr("copy time does not grow with size: no bandwidth can be fitted"))
    return {
        "t0_ms": t0,
        "gbytes_per_s": 1 / slope / 1e6,
        "r2": _weighted_r2(sizes_bytes, times_ms, weights, t0, slope),
    }


def _weighted_r2(xs, ys, weights, intercept: float, slope: float) -> float:
    """R² of ``y = intercept + slope x`` with the fit's weights: 1 is a perfect line."""
    sw = sum(weights)
    mean = sum(w * y for w, y in zip(weights, ys)) / sw
    total = sum(w * (y - mean) ** 2 for w, y in zip(weights, ys))
    residual = sum(w * (y - intercept - slope * x) ** 2 for w, x, y in zip(weights, xs, ys))
    return 1 - residual / total if total > 0 else 1.0


def machine_load() -> tuple[float | None, int]:
    """The 1-minute load average before measuring (None where the system has none) and the number of
    logical CPUs."""
    return load_average(), os.cpu_count() or 1


def load_warnings(
    load: float | None, cpus: int, other_cores: float | None = None, threads: int = 2
) -> list[Message]:
    """A warning when other programs took cores the measurement needed (``threads`` of its own),
    else nothing."""
    if not busy_machine(load, cpus, other_cores, threads):
        return []
    return [
        Message(
            "busy machine: {load}. Other programs were running, so these times include "
            "waiting for a core "
            "and wander from run to run. Close them and run this cell again.",
            load=describe_load(load, cpus, other_cores),
        )
    ]


def fit_warnings(name: str, fit: dict) -> list[Message]:
    """Warnings when a copy-time fit does not hold: no fixed cost found, or a line that fits
    poorly."""
    out = []
    if fit["t0_ms"] <= 0:
        out.append(
            Message(
                "{name}: t0 came out 0 µs (the fit's fixed cost was negative and set to "
                "0): the small copies "
                "were not slower per byte than the large ones, which a quiet machine does not do.",
                name=name,
            )
        )
    if fit["r2"] < MIN_FIT_R2:
        out.append(
            Message(
                "{name}: time = t0 + bytes / bandwidth fits poorly (R² {r2} < {limit}): the times "
                "do not grow along a line with size, so neither t0 nor the bandwidth "
                "means much here.",
                name=name,
                r2=format(fit["r2"], ".2f"),
                limit=MIN_FIT_R2,
            )
        )
    return out


def fit_per_chunk_cost(chunks: Sequence[int], exposed_ms: Sequence[float], copy_ms: float) -> float:
    """Least squares ``c`` in ``exposed(n) = copy / n + n * c`` (through the origin), never below
    0."""
    num = sum(n * (e - copy_ms / n) for n, e in zip(chunks, exposed_ms))
    den = sum(n * n for n in chunks)
    return max(0.0, num / den)


def model_exposed_ms(copy_ms: float, chunks: int, per_chunk_ms: float) -> float:
    """Step 2's layer-wise model: the last chunk's copy, plus a fixed cost per chunk."""
    return copy_ms / chunks + chunks * per_chunk_ms


def summarize_sweep(
    chunks: Sequence[int], totals_ms: Sequence[float], copy_ms: float, compute_ms: float
) -> dict:
    exposed = [max(t - compute_ms, 0.0) for t in totals_ms]
    cost = fit_per_chunk_cost(chunks, exposed, copy_ms)
    best = min(range(len(chunks)), key=lambda i: exposed[i])
    return {
        "chunks": list(chunks),
        "total_ms": list(totals_ms),
        "exposed_ms": exposed,
        "model_exposed_ms": [model_exposed_ms(copy_ms, n, cost) for n in chunks],
        "copy_alone_ms": copy_ms,
        "compute_alone_ms": compute_ms,
        "per_chunk_cost_ms": cost,
        "best_chunks": chunks[best],
        "model_best_chunks": max(1, round((copy_ms / cost) ** 0.5)) if cost > 0 else chunks[-1],
    }


# ----------------------------------------------------------------------------- CPU


def pipeline_sweep_cpu(
    payload_mib: float = 16,
    chunk_counts: Sequence[int] = CHUNK_COUNTS,
    repeats: int = 5,
    seed: int = 0,
) -> dict:
    """The sweep on the CPU analogue: a copy thread feeding a compute thread, chunk by chunk.

    One intra-op thread; every time (copy alone, compute alone, each chunk count's total) is the
    minimum over ``repeats``."""
    import torch

    if payload_mib <= 0 or repeats < 1 or not chunk_counts or min(chunk_counts) < 1:
        raise ValueError(tr("payload_mib > 0, repeats >= 1 and chunk counts >= 1 are required"))
    load, cpus = machine_load()  # before measuring: the sweep's own threads must not count
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)
    meter = OtherCpuMeter()
    try:
        with meter:
            gen = torch.Generator().manual_seed(seed)
            quantum = max(WIDTHS) * max(chunk_counts)
            n = max(quantum, int(payload_mib * MiB) // 4 // quantum * quantum)
            src = torch.randn(n, generator=gen)
            dst = torch.empty_like(src)
            dst.copy_(src)
            copy_ms = _best_ms(lambda: dst.copy_(src), repeats)
            width, weight, out = _pick_width(torch, gen, dst, copy_ms)
            compute_ms = _best_ms(lambda: torch.mm(dst.view(-1, width), weight, out=out), repeats)
            totals = []
            for chunks in chunk_counts:
                pieces = list(zip(src.chunk(chunks), dst.chunk(chunks), out.chunk(chunks)))
                # no separate warm-up: the buffers are warm from the timings above, and the minimum
                # drops a cold run
                totals.append(
                    min(_cpu_pipeline(torch, pieces, weight, width) for _ in range(repeats))
                )
        result = summarize_sweep(list(chunk_counts), totals, copy_ms, compute_ms)
        result.update(
            device="cpu",
            payload_mib=n * 4 / MiB,
            width=width,
            repeats=repeats,
            statistic="min",
            intra_op_threads=1,
            load_average_1m=load,
            other_cpu_cores=meter.other_cores,
            logical_cpus=cpus,
            correct=bool(torch.allclose(out, src.view(-1, width) @ weight, rtol=1e-4, atol=1e-4)),
        )
        result["warnings"] = load_warnings(
            load, cpus, meter.other_cores, threads=2
        ) + sweep_warnings(result)
        return result
    finally:
        torch.set_num_threads(threads_before)


def sweep_warnings(sweep: dict) -> list[Message]:
    """A warning when the one-chunk run, which cannot overlap, exposes far more than the copy
    alone."""
    if 1 not in sweep["chunks"]:
        return []
    one = sweep["exposed_ms"][sweep["chunks"].index(1)]
    copy_ms = sweep["copy_alone_ms"]
    if one <= SERIAL_SLACK * copy_ms:
        return []
    return [
        Message(
            "one chunk exposed {one} ms against {copy} ms for the copy alone: with one "
            "chunk nothing overlaps, so the two should be close "
            "(within {slack}x). The extra time is waiting (on the CPU, for a core that "
            "other programs held, to start or wake the copy "
            "thread); the sweep's shape is not trustworthy.",
            one=format(one, ".2f"),
            copy=format(copy_ms, ".2f"),
            slack=format(SERIAL_SLACK, "g"),
        )
    ]


def _pick_width(torch, gen, dst, copy_ms: float):
    """The compute width whose time on the whole payload is closest to the copy's."""
    best = None
    for width in WIDTHS:
        weight = torch.randn(width, width, generator=gen)
        out = torch.empty(dst.numel() // width, width)
        ms = _best_ms(lambda: torch.mm(dst.view(-1, width), weight, out=out), 3)
        if best is None or abs(ms - copy_ms) < abs(best[0] - copy_ms):
            best = (ms, width, weight, out)
    return best[1:]


def _cpu_pipeline(torch, pieces, weight, width: int) -> float:
    ready = [threading.Event() for _ in pieces]

    def copier() -> None:
        for (src, dst, _), event in zip(pieces, ready):
            dst.copy_(src)
            event.set()

    begin = time.perf_counter()
    worker = threading.Thread(target=copier)
    worker.start()
    for (_, dst, out), event in zip(pieces, ready):
        event.wait()
        torch.mm(dst.view(-1, width), weight, out=out.view(-1, width))
    worker.join()
    return (time.perf_counter() - begin) * 1e3


def _best_ms(fn, repeats: int) -> float:
    """ms of ``fn``: one untimed warm-up call, then the minimum over ``repeats`` timed calls."""
    fn()
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        fn()
        times.append((time.perf_counter() - begin) * 1e3)
    return min(times)


def bandwidth_curve_cpu(max_mib: float = 16, repeats: int = 5) -> dict:
    """memcpy time against size on the CPU, 4 KiB to ``max_mib``, fitted: one intra-op thread, the
    minimum over ``repeats`` per size."""
    import torch

    if repeats < 1:
        raise ValueError(tr("repeats must be >= 1, got {repeats}", repeats=repr(repeats)))
    sizes = _sizes(max_mib, CPU_CURVE_START)
    load, cpus = machine_load()
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)
    meter = OtherCpuMeter()
    try:
        times = []
        with meter:
            for size in sizes:
                src = torch.empty(size // 4).fill_(1.0)
                dst = torch.empty_like(src)
                times.append(_best_ms(lambda: dst.copy_(src), repeats))
    finally:
        torch.set_num_threads(threads_before)
    series = {"memcpy": {"bytes": sizes, "ms": times, **fit_bandwidth(sizes, times)}}
    return {
        "device": "cpu",
        "series": series,
        "repeats": repeats,
        "statistic": "min",
        "intra_op_threads": 1,
        "load_average_1m": load,
        "other_cpu_cores": meter.other_cores,
        "logical_cpus": cpus,
        "warnings": load_warnings(load, cpus, meter.other_cores, threads=1)
        + fit_warnings("memcpy", series["memcpy"]),
    }


def _sizes(max_mib: float, start: int = GPU_CURVE_START) -> list[int]:
    sizes, size = [], start
    while size <= max_mib * MiB:
        sizes.append(size)
        size *= 4
    if len(sizes) < 2:
        raise ValueError(
            tr(
                "max_mib must allow at least two sizes from {start} KiB (>= {least} MiB)",
                start=start // KiB,
                least=format(4 * start / MiB, "g"),
            )
        )
    return sizes


# ----------------------------------------------------------------------------- GPU


def bandwidth_curve_gpu(max_mib: float = 512, repeats: int = 5) -> dict:
    """H2D and D2H copy time against size, pinned and pageable host memory, fitted (needs CUDA)."""
    from .gpu import runtime

    torch = runtime().torch

    stream = torch.cuda.Stream()
    series = {}
    sizes = _sizes(max_mib)
    for pinned in (True, False):
        for direction in ("h2d", "d2h"):
            times = []
            for size in sizes:
                host = torch.empty(size, dtype=torch.uint8)
                host = host.pin_memory() if pinned else host
                dev = torch.empty(size, dtype=torch.uint8, device="cuda")
                src, dst = (host, dev) if direction == "h2d" else (dev, host)
                fn = lambda: dst.copy_(src, non_blocking=pinned)
                times.append(_gpu_median(torch, fn, stream, repeats))
                del host, dev, src, dst
            series[f"{direction}_{'pinned' if pinned else 'pageable'}"] = {
                "bytes": sizes,
                "ms": times,
                **fit_bandwidth(sizes, times),
            }
    return {
        "device": torch.cuda.get_device_name(),
        "series": series,
        "warnings": [w for name, s in series.items() for w in fit_warnings(name, s)],
    }


def _gpu_median(torch, fn, stream, repeats: int) -> float:
    times = []
    for i in range(repeats + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        with torch.cuda.stream(stream):
            start.record()
            fn()
            end.record()
        end.synchronize()
        if i:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def pipeline_sweep_gpu(
    payload_mib: float = 64,
    chunk_counts: Sequence[int] = CHUNK_COUNTS,
    repeats: int = 5,
    seed: int = 0,
) -> dict:
    """The sweep on a GPU: chunked pinned H2D copies on one stream, per-chunk matmuls on another."""
    from .gpu import runtime

    torch = runtime().torch

    torch.manual_seed(seed)
    quantum = max(WIDTHS) * max(chunk_counts)
    n = max(quantum, int(payload_mib * MiB) // 2 // quantum * quantum)
    host = torch.randn(n, dtype=torch.bfloat16).pin_memory()
    dev = torch.empty_like(host, device="cuda")
    copy_stream, compute_stream = torch.cuda.Stream(), torch.cuda.Stream()
    copy_ms = _gpu_median(torch, lambda: dev.copy_(host, non_blocking=True), copy_stream, repeats)
    width = 1024  # widen until compute on the whole payload lasts about as long as the copy
    while True:
        weight = torch.randn(width, width, device="cuda", dtype=torch.bfloat16)
        rows = n // width
        out = torch.empty(rows, width, device="cuda", dtype=torch.bfloat16)
        compute_ms = _gpu_median(
            torch,
            lambda: torch.mm(dev[: rows * width].view(rows, width), weight, out=out),
            compute_stream,
            repeats,
        )
        if compute_ms >= copy_ms or width >= 16384 or n // (width * 2) < max(chunk_counts):
            break
        width *= 2
    usable = rows * width
    totals = []
    for chunks in chunk_counts:
        step = usable // chunks // width * width
        bounds = [(i * step, (i + 1) * step if i < chunks - 1 else usable) for i in range(chunks)]

        def run() -> float:
            ready = [torch.cuda.Event() for _ in bounds]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            copy_stream.wait_stream(torch.cuda.current_stream())
            compute_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(copy_stream):
                for (a, b), event in zip(bounds, ready):
                    dev[a:b].copy_(host[a:b], non_blocking=True)
                    event.record()
            with torch.cuda.stream(compute_stream):
                for (a, b), event in zip(bounds, ready):
                    compute_stream.wait_event(event)
                    torch.mm(dev[a:b].view(-1, width), weight, out=out[a // width : b // width])
            torch.cuda.current_stream().wait_stream(compute_stream)
            torch.cuda.current_stream().wait_stream(copy_stream)
            end.record()
            end.synchronize()
            return start.elapsed_time(end)

        run()
        totals.append(statistics.median(run() for _ in range(repeats)))
    result = summarize_sweep(list(chunk_counts), totals, copy_ms, compute_ms)
    result.update(
        device=torch.cuda.get_device_name(), payload_mib=n * 2 / MiB, width=width, repeats=repeats
    )
    result["warnings"] = sweep_warnings(result)
    return result


# ----------------------------------------------------------------- replayed measurements (a dry
# run)

REFERENCE_FILES = {
    "pipeline_sweep": "inf_serving_overlap_cpu_sweep_reference.json",
    "bandwidth_curve": "inf_serving_overlap_cpu_bandwidth_reference.json",
}


def replay(kind: str) -> dict | None:
    """A recorded CPU measurement shipped with the course (``benchmarks/reference/``), for a dry
    run, which measures nothing: the sweep or the bandwidth curve as the course's machine measured
    it, with ``replayed_from`` saying when, where and by which command. None when the file is
    absent."""
    import json

    from ..project_runtime import reference_file

    if kind not in REFERENCE_FILES:
        raise ValueError(f"kind must be one of {sorted(REFERENCE_FILES)}, got {kind!r}")
    path = reference_file(REFERENCE_FILES[kind])
    if not path.is_file():
        return None
    recorded = json.loads(path.read_text(encoding="utf-8"))
    result = dict(recorded["result"])
    result["replayed_from"] = {k: recorded[k] for k in ("created_at", "machine", "command")}
    return result


def machine_text(machine: str) -> str:
    """How benchmarks/record_cpu_curves.py described the machine of a recording ("x86_64, 2 logical
    CPUs"), in the learner's language; another description as it is."""
    import re

    found = re.fullmatch(r"(.+), (\d+) logical CPUs", machine or "")
    return (
        tr("{arch}, {cpus} logical CPUs", arch=found.group(1), cpus=found.group(2))
        if found
        else machine
    )


def replay_note(result: dict) -> str:
    """One line that says a figure is replayed, not measured, and from which measurement."""
    origin = result.get("replayed_from")
    if not origin:
        return ""
    return tr(
        "Replayed, not measured: recorded on {machine} on {date} by `{command}`. Set "
        "RUN_MODE = 'real_cpu' in 5.1 to measure your machine.",
        machine=machine_text(origin["machine"]),
        date=origin["created_at"][:10],
        command=origin["command"],
    )
