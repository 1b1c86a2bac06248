"""Step 5's CPU analogue: a memcpy thread against a matmul thread.

The copy runs on a worker thread (``Tensor.copy_`` releases the GIL and is memory-bound), the
matmuls on the calling thread (compute-bound), torch limited to ``intra_op_threads`` (1 by
default) so that a core is left for the copy. The worker is started once and handed one copy per
run, as a copy engine is always there: starting a thread per run cost 0.3-0.4 ms on the course's
two-core machine (about an eighth of a 16 MiB copy). Each run is gated: its timed region opens when
the copy's first slice starts (compute waits for that moment) and closes at the last completion
mark, so the thread's wake-up lag before the gate and its join after the end stay out of it, as
host launch latency does on a GPU; the wake-up lag is reported apart as ``launch_overhead_ms``.

The calibrated window's matmuls are 128x128 float32: their three operands (192 KiB) fit in one
core's L2 cache (512 KiB on the course's machine), so a copy streaming through the shared L3 does
not evict them. With 256x256 (768 KiB, more than L2) a concurrent copy slowed the matmuls by
8-16% on that machine, against 2-3% for 128x128. A memcpy thread is not a DMA engine: it uses a
core and shares the memory bus with the matmuls, so it shows the *shape* of overlap (two
engines, one waiting on neither) but none of a GPU's conditions (copy engines, pinned memory,
streams, ``non_blocking``).

Every timeline records the completion time of each copy chunk and of each matmul, which is
what ``overlap_evidence`` reads. Two negative controls run by default, issued in the real
order (copy first, then compute): ``one_thread`` (both on the calling thread) and
``joined_thread`` (the copy on its own thread, joined before compute starts: distinct workers,
still serial). Each must come out not confirmed.
"""

from __future__ import annotations

import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from ..i18n import tr
from ..presets import MiB
from .evidence import (
    BOUND_FACTOR_CPU,
    MAX_COPY_SLOWDOWN_CPU,
    negative_controls,
    overlap_evidence,
    preconditions_met,
    summarize,
)
from .load import OtherCpuMeter, load_average

# the fixed window: one (MATRIX_SIZE / 4)-sized matmul (a 2048 matmul takes ~0.3 s on one core)
CPU_FIXED_DIVISOR = 4
# calibrated window: repeated 128x128 float32 matmuls (operands 192 KiB: they stay in L2)
CPU_BLOCK = 128
COPY_CHUNKS = 8  # the copy is issued as 8 consecutive slices, each timed at its completion
BALANCE_TOLERANCE = 0.05  # calibrate until compute / copy is within 5%
CALIBRATION_ROUNDS = 5


def timed_ms(fn: Callable[[], Any]) -> float:
    begin = time.perf_counter()
    fn()
    return (time.perf_counter() - begin) * 1e3


def _chunks(src, dst, parts: int) -> list[tuple[Any, Any]]:
    flat_src, flat_dst = src.view(-1), dst.view(-1)
    step = -(-flat_src.numel() // parts)
    return [
        (flat_src[i : i + step], flat_dst[i : i + step]) for i in range(0, flat_src.numel(), step)
    ]


class CopyWorker:
    """A persistent thread that runs one submitted job at a time (the copy side of every run).

    ``submit(job)`` hands it a job and returns at once; ``wait()`` blocks until the job is done and
    re-raises what it raised. ``close()`` ends the thread.
    """

    def __init__(self) -> None:
        self._go, self._done = threading.Event(), threading.Event()
        self._job: Callable[[], None] | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="overlap-copy", daemon=True)
        self._thread.start()

    @property
    def ident(self) -> int | None:
        return self._thread.ident

    def _loop(self) -> None:
        while True:
            self._go.wait()
            self._go.clear()
            if self._closed:
                return
            try:
                self._job()
            except BaseException as exc:  # handed to the submitting thread by wait()
                self._error = exc
            finally:
                self._done.set()

    def submit(self, job: Callable[[], None]) -> None:
        if self._closed:
            raise RuntimeError("the copy worker is closed")
        self._done.clear()
        self._job, self._error = job, None
        self._go.set()

    def wait(self) -> None:
        self._done.wait()
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        self._closed = True
        self._go.set()
        self._thread.join()


class CpuPlan:
    """One case's tensors: a chunked copy and ``count`` matmuls; the copy thread is ``worker``."""

    def __init__(self, src, dst, left, right, product, count: int, worker: CopyWorker):
        self.pieces = _chunks(src, dst, COPY_CHUNKS)
        self.src, self.dst, self.left, self.right, self.product, self.count = (
            src,
            dst,
            left,
            right,
            product,
            count,
        )
        self.worker = worker

    def copy(self, marks: list, t0: float) -> None:
        for piece_src, piece_dst in self.pieces:
            piece_dst.copy_(piece_src)  # releases the GIL; memory-bound
            marks.append((time.perf_counter() - t0) * 1e3)

    def compute(self, marks: list, t0: float) -> None:
        import torch

        for _ in range(self.count):
            torch.mm(self.left, self.right, out=self.product)  # releases the GIL; compute-bound
            marks.append((time.perf_counter() - t0) * 1e3)

    def timeline(self, kind: str) -> dict:
        """One run. ``kind``: 'serial', 'overlap', 'one_thread', 'joined_thread'.

        The timed region opens when the copy's first slice starts (the gate) and closes at the
        last completion mark of either side, so the copy thread's wake-up before the gate and
        the join after the last mark stay out of it, as launch latency stays out of the GPU's
        gated timing. Times are ms from the gate (so ``copy_start`` is 0); ``launch_ms`` is the
        wake-up lag, from the hand-over to the gate (about 0 when the calling thread copies). In
        'overlap' the compute thread waits for the gate, then computes while the copy runs."""
        copy_ends: list[float] = []
        unit_ends: list[float] = []
        workers: dict[str, int] = {}
        started = threading.Event()
        gate: list[float] = []
        handed = time.perf_counter()

        def copy_job() -> None:
            workers["copy"] = threading.get_ident()
            gate.append(time.perf_counter())
            started.set()
            self.copy(copy_ends, gate[0])

        # the serial reference and the one-thread control are the same program
        if kind in ("serial", "one_thread"):
            copy_job()
        else:
            self.worker.submit(copy_job)
            if kind == "joined_thread":  # distinct workers, but compute waits for the copy
                self.worker.wait()
            else:
                started.wait()
        workers["compute"] = threading.get_ident()
        self.compute(unit_ends, gate[0])
        if kind == "overlap":
            self.worker.wait()
        return {
            "copy_start": 0.0,
            "launch_ms": (gate[0] - handed) * 1e3,
            "copy_ends": copy_ends,
            "unit_ends": unit_ends,
            "total": max(copy_ends[-1], unit_ends[-1]),
            "distinct_workers": workers["copy"] != workers["compute"],
        }

    def copy_alone(self) -> float:
        return timed_ms(lambda: self.copy([], time.perf_counter()))

    def compute_alone(self) -> float:
        return timed_ms(lambda: self.compute([], time.perf_counter()))


def _median(fn: Callable[[], float], repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def calibrate(plans: list[CpuPlan], samples: int) -> dict[int, float]:
    """Scale each plan's matmul count until compute / copy is within 5% (or the rounds run out).

    Each round measures every plan not yet balanced, copy alone and compute alone alternating
    (``samples`` of each), so that a machine whose speed drifts moves both sides of the balance
    alike; the matmuls' speed did drift on the course's machine (55 µs per matmul for a few
    seconds, then 70). Returns each plan's last measured balance (compute / copy, medians), keyed
    by ``id(plan)``.
    """
    balances: dict[int, float] = {}
    pending = list(plans)
    for _ in range(CALIBRATION_ROUNDS):
        still = []
        for plan in pending:
            copy_ms, compute_ms = [], []
            for _ in range(samples):
                copy_ms.append(plan.copy_alone())
                compute_ms.append(plan.compute_alone())
            balance = statistics.median(compute_ms) / statistics.median(copy_ms)
            balances[id(plan)] = balance
            new_count = max(1, round(plan.count / balance))
            if abs(balance - 1) > BALANCE_TOLERANCE and new_count != plan.count:
                plan.count = new_count
                still.append(plan)
        if not still:
            break
        pending = still
    return balances


def _cpu_operands(gen, matrix_size: int) -> tuple[int, dict]:
    """The matmul operands of both windows: the fixed window's size and, per window, the pair."""
    import torch

    fixed_n = max(16, matrix_size // CPU_FIXED_DIVISOR)
    operands = {
        "fixed": (
            torch.randn(fixed_n, fixed_n, generator=gen),
            torch.randn(fixed_n, fixed_n, generator=gen),
        ),
        "calibrated": (
            torch.randn(CPU_BLOCK, CPU_BLOCK, generator=gen),
            torch.randn(CPU_BLOCK, CPU_BLOCK, generator=gen),
        ),
    }
    return fixed_n, operands


def _record_cpu_setup(result: dict, fixed_n: int, intra_op_threads: int) -> None:
    """Write the CPU workload's settings and the machine's facts into ``result``."""
    result["workload"].update(
        {
            "device": "cpu",
            "dtype": "float32",
            "cpu_fixed_matrix_size": fixed_n,
            "cpu_block": CPU_BLOCK,
            "intra_op_threads": intra_op_threads,
            "copy_chunks": COPY_CHUNKS,
            "interleaved_cases": True,
        }
    )
    result["hardware"].update(
        {
            "device": "cpu",
            "processor": platform.processor() or platform.machine(),
            "logical_cpus": os.cpu_count() or 1,
        }
    )


def _build_cpu_plans(
    payloads: list, elements: list[int], operands: dict, src_all, dst_all, worker: CopyWorker
) -> list[tuple]:
    """One plan per payload and window, each copying a prefix of ``src_all`` into ``dst_all``.

    The calibrated window gets a first matmul count from copy alone / compute alone (refined by
    ``calibrate``). Returns ``(payload, window, plan, samples)`` tuples."""
    import torch

    plans = []
    for payload, n in zip(payloads, elements):
        for window in ("fixed", "calibrated"):
            left, right = operands[window]
            plan = CpuPlan(
                src_all[:n],
                dst_all[:n],
                left,
                right,
                torch.empty(left.shape[0], right.shape[1]),
                1,
                worker,
            )
            plan.copy_alone()  # first touch of dst
            if window == "calibrated":  # a first size from the copy alone, refined below
                plan.count = max(
                    1, round(_median(plan.copy_alone, 3) / _median(plan.compute_alone, 3))
                )
            plans.append((payload, window, plan, CaseSamples(plan)))
    return plans


def _measure_cpu_rounds(plans: list[tuple], warmup: int, repeats: int, bar) -> None:
    """Warm every case, then take ``repeats`` interleaved rounds (the cases' order rotating)."""
    for *_, samples in plans:
        samples.warm(warmup)
        bar.update(2 * warmup)
    for i in range(repeats):  # interleaved rounds, the order of the cases rotating
        k = i % len(plans)
        for *_, samples in plans[k:] + plans[:k]:
            samples.measure_once(i)
            bar.update(2)


def _append_cpu_cases(result: dict, plans: list[tuple]) -> None:
    """Finish every case (correctness, evidence) and append it to ``result['cases']``."""
    for payload, window, plan, samples in plans:
        case = samples.finish()
        # the balance achieved in the measured repeats, not the calibration's estimate
        balance = statistics.median(samples.compute_alone) / statistics.median(samples.copy_alone)
        result["cases"].append(
            {
                "payload_mib": payload,
                "window": window,
                "matrix_size": plan.left.shape[0],
                "compute_copy_balance": balance,
                **case,
            }
        )


def _record_cpu_load(result: dict, load_before: float | None, meter: OtherCpuMeter) -> None:
    """How busy the machine was, the run's own threads not counted: other programs take the copy
    thread's core."""
    if load_before is not None:
        result["hardware"]["load_average_1m"] = load_before
    if meter.other_cores is not None:
        result["hardware"]["other_cpu_cores"] = meter.other_cores


def run_cpu(
    result: dict, progress_factory: Callable, intra_op_threads: int = 1, controls: bool = True
) -> None:
    """Measure every case (and the controls) of a ``real_cpu`` result in place.

    Every case is built and calibrated first, then measured in interleaved rounds (round i times
    each case once, in rotating order), so that a spell in which the machine runs two threads
    slowly (on the course's machine, one lasted most of a second every few seconds) costs every
    case a few repeats instead of costing one case all of them."""
    import torch

    wl = result["workload"]
    # before the run: once it runs, its own threads count in the load average
    load_before = load_average()
    threads_before = torch.get_num_threads()
    torch.set_num_threads(intra_op_threads)
    worker, meter = CopyWorker(), OtherCpuMeter()
    try:
        gen = torch.Generator().manual_seed(wl["seed"])
        fixed_n, operands = _cpu_operands(gen, wl["matrix_size"])
        _record_cpu_setup(result, fixed_n, intra_op_threads)
        repeats, warmup = wl["repeat_steps"], wl["warmup_steps"]
        # one source and one destination, sized for the largest payload; each payload copies a
        # prefix of them
        elements = [int(payload * MiB) // 4 for payload in wl["payload_mib"]]
        src_all = torch.randn(max(elements), generator=gen)
        dst_all = torch.empty_like(src_all)
        steps = len(elements) * 2 * (2 * warmup + 2 * repeats)
        with progress_factory(steps, tr("CPU timelines")) as bar, meter:
            plans = _build_cpu_plans(
                wl["payload_mib"], elements, operands, src_all, dst_all, worker
            )
            calibrate(
                [plan for _, window, plan, _ in plans if window == "calibrated"],
                max(3, repeats // 4),
            )
            _measure_cpu_rounds(plans, warmup, repeats, bar)
            _append_cpu_cases(result, plans)
            calibrated = [
                (payload, plan, samples)
                for payload, window, plan, samples in plans
                if window == "calibrated"
            ]
            if controls and calibrated:
                payload, plan, samples = calibrated[-1]
                result["controls"] = run_cpu_controls(
                    payload, plan, samples.copy_alone, samples.compute_alone, repeats
                )
        _record_cpu_load(result, load_before, meter)
    finally:
        worker.close()
        torch.set_num_threads(threads_before)


class CaseSamples:
    """One case's measurements: copy alone, compute alone, serial and overlapped timelines.

    ``measure_once(i)`` takes one sample of each, in an order rotating with ``i``, so that a machine
    whose speed drifts shifts all four alike; ``finish()`` adds correctness and evidence."""

    def __init__(self, plan: CpuPlan):
        self.plan = plan
        self.serial: list[dict] = []
        self.overlap: list[dict] = []
        self.copy_alone: list[float] = []
        self.compute_alone: list[float] = []

    def warm(self, warmup: int) -> None:
        for _ in range(warmup):  # warm both programs, not only the overlapped one
            self.plan.timeline("serial")
            self.plan.timeline("overlap")

    def measure_once(self, i: int) -> None:
        steps = [
            lambda: self.copy_alone.append(self.plan.copy_alone()),
            lambda: self.compute_alone.append(self.plan.compute_alone()),
            lambda: self.serial.append(self.plan.timeline("serial")),
            lambda: self.overlap.append(self.plan.timeline("overlap")),
        ]
        for step in steps[i % 4 :] + steps[: i % 4]:
            step()

    def finish(self) -> dict:
        import torch

        plan = self.plan
        stats = summarize(self.serial, self.overlap, self.copy_alone, self.compute_alone)
        reference = torch.mm(plan.left, plan.right)
        plan.dst.zero_()  # so that the checks below see what one overlapped run wrote
        plan.product.zero_()
        plan.timeline("overlap")
        unit_ms = stats["compute_alone_ms"] / plan.count
        evidence = overlap_evidence(
            self.overlap, unit_ms, stats["copy_alone_ms"], MAX_COPY_SLOWDOWN_CPU
        )
        pre = {
            "distinct_workers": all(r["distinct_workers"] for r in self.overlap),
            "pinned_source": None,
            "non_blocking": None,
        }
        met = preconditions_met(pre)
        return {
            "matmul_count": plan.count,
            **stats,
            "bound_factor": BOUND_FACTOR_CPU,
            # the copy thread's wake-up lag: from the hand-over to the copy's first slice (outside
            # the timed region)
            "launch_overhead_ms": statistics.median(r["launch_ms"] for r in self.overlap),
            "copy_gbytes_per_s": plan.src.numel() * 4 / (stats["copy_alone_ms"] / 1e3) / 1e9,
            "copy_correct": bool(torch.equal(plan.dst, plan.src)),
            "compute_correct": bool(torch.allclose(plan.product, reference, rtol=1e-5, atol=1e-5)),
            "preconditions": pre,
            "preconditions_met": met,
            "overlap_evidence": evidence,
            "overlap_confirmed": evidence["confirmed"],
            "path_confirmed": met and evidence["confirmed"],
        }


CPU_CONTROLS = {
    "one_thread": "copy, then compute, on the calling thread",
    "joined_thread": "copy on its own thread, joined before compute starts (distinct workers, "
    "still serial)",
}


def run_cpu_controls(
    payload: float, plan: CpuPlan, copy_alone: list[float], compute_alone: list[float], repeats: int
) -> list[dict]:
    """Each control against the serial program, alternating order, on the calibrated case."""
    return negative_controls(
        CPU_CONTROLS,
        plan.timeline,
        repeats,
        compute_alone,
        plan.count,
        copy_alone,
        MAX_COPY_SLOWDOWN_CPU,
        payload,
    )
