"""A stand-in for ``torch.cuda``, for tests only: every line of the GPU engine
(``tools/overlap/gpu.py``, the GPU sweep and bandwidth curve, ``benchmarks/gpu_check.py``) runs on a
machine without a GPU, and nothing it produces can pass for a measurement.

It is a deterministic *timing model*, not a GPU. Time is virtual (ms), for the device and the host
alike, so a test never depends on how fast or busy this machine is:

- each launch (kernel or copy) costs the host ``launch_ms``; work starts when its stream is free,
  its engine is free (one copy engine per direction, the SMs for every kernel) and the host has
  launched it. So work on distinct streams overlaps when the engines differ, and work on one stream
  serialises;
- a copy lasts ``copy_latency_ms + bytes / bandwidth`` (pinned or pageable, H2D or D2H); one from or
  to pageable memory, or with ``non_blocking=False``, holds the host until it is done (as CUDA
  does);
- a matmul lasts ``kernel_ms + 2 m k n / FLOP rate``; any other kernel ``kernel_ms``;
  ``torch.cuda._sleep(cycles)`` lasts ``cycles / clock_khz`` ms;
- events complete when their stream reaches them; ``elapsed_time`` refuses events that are not
  recorded, not timing, or not yet complete as the host sees it (a missing synchronize fails here as
  it does on a device); a Python value read from a device tensor (``float(t)``) waits for its
  stream;
- a data race raises ``DataRace``: work that touches bytes which work on another stream (or a copy,
  for the host touching pinned memory) writes, or writes bytes it reads, and is not ordered after
  it. The model only sees races that its own schedule exposes (it never reports a correct program).

The data are real: device tensors are CPU tensors, tagged by storage, that torch computes on as it
would on the device (a ``TorchFunctionMode`` routes ``device='cuda'``, ``pin_memory``, ``copy_``,
``mm`` and the rest through the model, and refuses to mix host and device tensors in one kernel).

The engine reaches it through its one seam, ``tools.overlap.gpu.STAND_IN``:
``installed(monkeypatch)`` puts it there for one test. What it reports says so: the device is named
``stand-in ...``, the driver facts' source is the stand-in and ``provenance`` is ``'stand_in'``."""

from __future__ import annotations

import itertools
import json
import types
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from tools.overlap import gpu as overlap_gpu
from tools.overlap.device import DriverError

NAME = "stand-in for torch.cuda (a timing model, not a GPU)"
MATMULS = ("mm", "matmul", "__matmul__")
METADATA = {
    "numel", "nelement", "element_size", "dim", "ndimension", "size", "stride", "storage_offset",
    "is_contiguous", "is_floating_point", "data_ptr", "untyped_storage", "get_device", "__len__",
    "__hash__",
}  # fmt: skip


@dataclass
class Model:
    """The model's rates: a small device with round numbers (GB/s are 1e9 bytes per second)."""

    h2d_pinned_gbps: float = 20.0
    h2d_pageable_gbps: float = 5.0
    d2h_pinned_gbps: float = 20.0
    d2h_pageable_gbps: float = 5.0
    copy_latency_ms: float = 0.010
    matmul_tflops: float = 10.0
    kernel_ms: float = 0.004  # any kernel's fixed cost, a matmul's included
    launch_ms: float = 0.005  # host time to launch one kernel or copy
    clock_khz: int = 1_000_000
    # one per direction; 1: both directions share it; 0: copies run on the SMs
    copy_engines: int = 2

    def copy_ms(self, nbytes: int, direction: str, pinned: bool) -> float:
        gbps = getattr(self, f"{direction}_{'pinned' if pinned else 'pageable'}_gbps")
        return self.copy_latency_ms + nbytes / (gbps * 1e6)

    def matmul_ms(self, flop: float) -> float:
        return self.kernel_ms + flop / (self.matmul_tflops * 1e9)

    def engine(self, direction: str) -> str:
        return {0: "sm", 1: "copy"}.get(self.copy_engines, direction)


class DataRace(RuntimeError):
    """Two pieces of work touch the same bytes, one of them writing, with nothing ordering them."""


@dataclass
class Op:
    """One piece of device work, as the model scheduled it."""

    name: str
    stream: int | None  # None: the host
    start: float
    end: float
    engine: str | None


def _span(tensor) -> tuple[int, int] | None:
    """The bytes ``tensor`` covers, as [first, last + 1) addresses (None when it is empty)."""
    if not tensor.numel():
        return None
    extent = (
        sum((size - 1) * abs(stride) for size, stride in zip(tensor.shape, tensor.stride())) + 1
    )
    return tensor.data_ptr(), tensor.data_ptr() + extent * tensor.element_size()


class Device:
    """The simulated device: streams' tails, engines' next free time, the host's clock, the log."""

    def __init__(self, model: Model):
        self.model = model
        self.host_ms = 0.0
        self.handles = itertools.count(0x1000, 0x10)
        self.default = Stream(self, handle=0)
        self.streams = [self.default]
        self.stack: list[Stream] = []
        self.free: dict[str, float] = {}
        # storage address -> ('device' | 'pinned', the storage, kept alive)
        self.tags: dict[int, tuple[str, object]] = {}
        self.ops: list[Op] = []
        self.profiles: list[Profile] = []
        # (first, end, written, op) of work the host has not seen end
        self.touched: list[tuple[int, int, bool, Op]] = []

    def current(self) -> Stream:
        return self.stack[-1] if self.stack else self.default

    def launch(
        self,
        name: str,
        duration: float,
        engine: str | None,
        blocking: bool = False,
        reads=(),
        writes=(),
    ) -> Op:
        stream = self.current()
        begin = self.host_ms
        self.host_ms += self.model.launch_ms
        start = max(stream.tail, self.host_ms, self.free.get(engine, 0.0) if engine else 0.0)
        op = Op(name, stream.cuda_stream, start, start + duration, engine)
        self.check(op, reads, writes)
        stream.tail = op.end
        if engine:
            self.free[engine] = op.end
        self.ops.append(op)
        for profile in self.profiles:
            profile.record(op, begin, self.host_ms)
        if blocking:
            self.host_ms = max(self.host_ms, op.end)
        return op

    def synchronize(self) -> None:
        self.host_ms = max([self.host_ms] + [s.tail for s in self.streams])

    def check(self, op: Op, reads, writes) -> None:
        """Raise ``DataRace`` when ``op`` (the host's, when its stream is None) overlaps unordered
        work on the same bytes."""
        # what the host saw end cannot race
        self.touched = [t for t in self.touched if t[3].end > self.host_ms]
        accesses = [(span, False) for span in map(_span, reads) if span] + [
            (span, True) for span in map(_span, writes) if span
        ]
        for (first, end), written in accesses:
            for other_first, other_end, other_written, other in self.touched:
                unordered = other.stream != op.stream and op.start < other.end
                if (
                    unordered
                    and (written or other_written)
                    and first < other_end
                    and other_first < end
                ):
                    raise DataRace(
                        f"{op.name} on stream {op.stream} races {other.name} on stream "
                        f"{other.stream}: nothing orders them"
                    )
        if op.stream is not None:
            self.touched += [(first, end, written, op) for (first, end), written in accesses]

    # ---------------------------------------------------------------- tensors, tagged by storage

    def kind(self, tensor) -> str | None:
        if tensor.numel() == 0:
            return None
        tag = self.tags.get(tensor.untyped_storage().data_ptr())
        return tag[0] if tag else None

    def on_device(self, tensor) -> bool:
        return self.kind(tensor) == "device"

    def tag(self, tensor, kind: str) -> None:
        if tensor.numel():
            storage = tensor.untyped_storage()
            self.tags[storage.data_ptr()] = (kind, storage)

    def copy(self, dst, src, non_blocking: bool):
        out = dst.copy_(src)
        to_dev, from_dev = self.on_device(dst), self.on_device(src)
        if not (to_dev or from_dev):
            self.host_access([src], [dst])  # host to host: no device work
            return out
        nbytes, touched = src.numel() * src.element_size(), {"reads": [src], "writes": [dst]}
        if to_dev and from_dev:
            self.launch(
                "Memcpy DtoD (Device -> Device)",
                self.model.copy_ms(nbytes, "d2h", True),
                "sm",
                **touched,
            )
            return out
        direction = "h2d" if to_dev else "d2h"
        pinned = self.kind(src if to_dev else dst) == "pinned"
        memory = "Pinned" if pinned else "Pageable"
        name = (
            f"Memcpy HtoD ({memory} -> Device)" if to_dev else (f"Memcpy DtoH (Device -> {memory})")
        )
        blocking = not (pinned and non_blocking)
        self.launch(
            name,
            self.model.copy_ms(nbytes, direction, pinned),
            self.model.engine(direction),
            blocking,
            **touched,
        )
        return out

    def host_access(self, reads, writes) -> None:
        """The host reads or writes pinned memory now: no copy may still be using those bytes."""
        pinned = lambda tensors: [t for t in tensors if self.kind(t) == "pinned"]
        if pinned(reads) or pinned(writes):
            self.check(
                Op("host access", None, self.host_ms, self.host_ms, None),
                pinned(reads),
                pinned(writes),
            )

    def moved(self, tensor, to_dev: bool, non_blocking: bool = False):
        """``.cuda()``, ``.cpu()``, ``.to(...)``: a copy into new memory on the other side, or the
        tensor itself."""
        if self.on_device(tensor) == to_dev:
            return tensor
        out = torch.empty_like(tensor)
        if to_dev:
            self.tag(out, "device")
        return self.copy(out, tensor, non_blocking)


class Stream:
    def __init__(self, device: Device, handle: int | None = None):
        self.device = device
        self.cuda_stream = next(device.handles) if handle is None else handle
        self.tail = 0.0
        if handle is None:
            device.streams.append(self)

    def wait_event(self, event: Event) -> None:
        if event.time is not None:  # CUDA: waiting on an event never recorded does not wait
            self.tail = max(self.tail, event.time)

    def wait_stream(self, stream: Stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        event = event or Event(self.device)
        event.record(self)
        return event

    def synchronize(self) -> None:
        self.device.host_ms = max(self.device.host_ms, self.tail)

    def query(self) -> bool:
        return self.tail <= self.device.host_ms

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and other.cuda_stream == self.cuda_stream

    def __hash__(self) -> int:
        return self.cuda_stream


class Event:
    def __init__(
        self,
        device: Device,
        enable_timing: bool = False,
        blocking: bool = False,
        interprocess: bool = False,
    ):
        self.device, self.enable_timing, self.time = device, enable_timing, None

    def record(self, stream: Stream | None = None) -> None:
        stream = stream or self.device.current()
        self.time = stream.tail = max(stream.tail, self.device.host_ms)

    def wait(self, stream: Stream | None = None) -> None:
        (stream or self.device.current()).wait_event(self)

    def query(self) -> bool:
        return self.time is None or self.time <= self.device.host_ms

    def synchronize(self) -> None:
        if self.time is not None:
            self.device.host_ms = max(self.device.host_ms, self.time)

    def elapsed_time(self, end: Event) -> float:
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'")
        if self.time is None or end.time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time")
        if not (self.query() and end.query()):
            raise RuntimeError(
                "CUDA error: device not ready (an event has not completed: synchronize first)"
            )
        return end.time - self.time


class Cuda:
    """The part of ``torch.cuda`` the engine uses, on the model."""

    def __init__(self, device: Device, available: bool = True):
        self.device, self.available = device, available

    def is_available(self) -> bool:
        return self.available

    def device_count(self) -> int:
        return int(self.available)

    def current_device(self) -> int:
        return 0

    def get_device_properties(self, index: int = 0):
        return types.SimpleNamespace(
            name=NAME, total_memory=8 * 2**30, major=0, minor=0, multi_processor_count=1
        )

    def get_device_name(self, index: int | None = None) -> str:
        return NAME

    def Stream(self, device=None, priority: int = 0) -> Stream:  # noqa: N802 (torch's name)
        return Stream(self.device)

    def Event(
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> Event:  # noqa: N802
        return Event(self.device, enable_timing)

    def current_stream(self, device=None) -> Stream:
        return self.device.current()

    def default_stream(self, device=None) -> Stream:
        return self.device.default

    @contextmanager
    def stream(self, stream: Stream | None):
        if stream is None:
            yield
            return
        self.device.stack.append(stream)
        try:
            yield
        finally:
            self.device.stack.pop()

    def synchronize(self, device=None) -> None:
        self.device.synchronize()

    def _sleep(self, cycles: int) -> None:
        self.device.launch("spin_kernel(long)", cycles / self.device.model.clock_khz, None)


class Profile:
    """``torch.profiler.profile``: the device's work while it is open, as kineto reports it."""

    def __init__(self, device: Device):
        self.device, self.spans = device, []

    def __enter__(self) -> Profile:
        self.device.profiles.append(self)
        return self

    def __exit__(self, *exc) -> None:
        self.device.profiles.remove(self)

    def record(self, op: Op, host_begin: float, host_end: float) -> None:
        self.spans.append(
            (f"cudaLaunch ({op.name})", torch.autograd.DeviceType.CPU, host_begin, host_end)
        )
        self.spans.append((op.name, torch.autograd.DeviceType.CUDA, op.start, op.end))

    def events(self) -> list:
        ms_to_us = 1e3
        return [
            types.SimpleNamespace(
                name=name,
                device_type=kind,
                time_range=types.SimpleNamespace(start=a * ms_to_us, end=b * ms_to_us),
            )
            for name, kind, a, b in self.spans
        ]

    def export_chrome_trace(self, path: str) -> None:
        events = [
            {
                "name": name,
                "ph": "X",
                "ts": a * 1e3,
                "dur": (b - a) * 1e3,
                "pid": 0,
                "tid": str(kind),
                "cat": "stand-in",
            }
            for name, kind, a, b in self.spans
        ]
        with open(path, "w", encoding="utf-8") as out:
            json.dump({"traceEvents": events, "otherData": {"device": NAME}}, out)


class Profiler:
    ProfilerActivity = torch.profiler.ProfilerActivity

    def __init__(self, device: Device):
        self.device = device

    def profile(self, activities=None, **options) -> Profile:
        return Profile(self.device)


class FakeTorch:
    """torch itself, but for ``cuda``, ``profiler`` and ``version.cuda``."""

    def __init__(self, cuda: Cuda, profiler: Profiler):
        self.cuda, self.profiler = cuda, profiler
        self.version = types.SimpleNamespace(cuda="stand-in", __version__=torch.__version__)

    def __getattr__(self, name: str):
        return getattr(torch, name)


def _is_cuda(device) -> bool:
    return device is not None and torch.device(device).type == "cuda"


def _target(args, kwargs):
    """The device a ``.to(...)`` call names (None when it only changes the dtype)."""
    first = args[1] if len(args) > 1 else None
    return kwargs.get("device", first if isinstance(first, (str, torch.device)) else None)


class Tensors(TorchFunctionMode):
    """Every torch call while the stand-in is installed: device tensors and their work go to the
    model."""

    def __init__(self, device: Device):
        super().__init__()
        self.device = device

    def __torch_function__(self, func, classes, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        d = self.device
        if name == "__get__" or name in METADATA:
            return func(*args, **kwargs)
        if name == "pin_memory":
            out = args[0].clone()
            d.tag(out, "pinned")
            return out
        if name == "is_pinned":
            return d.kind(args[0]) == "pinned"
        if name == "copy_":
            return d.copy(
                args[0], args[1], kwargs.get("non_blocking", args[2] if len(args) > 2 else False)
            )
        if name in ("cpu", "cuda") or (name == "to" and _target(args, kwargs) is not None):
            return self._moved(name, args, kwargs)
        to_dev = _is_cuda(kwargs.get("device"))
        if to_dev:
            kwargs["device"] = "cpu"
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        held = {t.untyped_storage().data_ptr() for t in tensors if t.numel()}
        on_dev = [d.on_device(t) for t in tensors]
        if any(on_dev) and not all(
            dev or t.dim() == 0 or not t.numel() for t, dev in zip(tensors, on_dev)
        ):
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least "
                "two devices, cuda:0 and cpu!"
            )
        result = func(*args, **kwargs)
        outputs = [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)]
        in_place = name.endswith("_") and not name.startswith("__")
        written = (
            [args[0]]
            if in_place
            else [kwargs["out"]]
            if isinstance(kwargs.get("out"), torch.Tensor)
            else outputs
        )
        if not (to_dev or any(on_dev)):
            d.host_access(tensors, written if in_place or "out" in kwargs else [])
            return result
        fresh = [t for t in outputs if t.numel() and t.untyped_storage().data_ptr() not in held]
        for t in fresh:
            d.tag(t, "device")
        if not outputs:  # a Python value read from the device: waits for the stream
            d.current().synchronize()
        elif name in MATMULS:
            a, b = args[0], args[1]
            d.launch(
                f"gemm ({name})",
                d.model.matmul_ms(2 * a.numel() * b.shape[-1]),
                "sm",
                reads=[a, b],
                writes=written,
            )
        elif (fresh and not name.startswith("empty")) or in_place:
            d.launch(
                f"elementwise_kernel ({name})",
                d.model.kernel_ms,
                "sm",
                reads=tensors,
                writes=written,
            )
        return result

    def _moved(self, name: str, args, kwargs):
        to_dev = name == "cuda" or (name == "to" and _is_cuda(_target(args, kwargs)))
        return self.device.moved(args[0], to_dev, kwargs.get("non_blocking", False))


@dataclass
class StandIn:
    """One installed stand-in: its model, its device, and the runtime the engine was given."""

    model: Model = field(default_factory=Model)
    available: bool = True
    nvml: dict | None = None  # NVML's facts, or None (no NVML)
    driver_error: bool = False  # the driver cannot be read

    def __post_init__(self):
        self.device = Device(self.model)
        self.cuda = Cuda(self.device, self.available)
        self.torch = FakeTorch(self.cuda, Profiler(self.device))
        self.runtime = overlap_gpu.Runtime(
            torch=self.torch,
            clock=lambda: self.device.host_ms / 1e3,
            driver_facts=self.driver_facts,
            nvml_facts=lambda bus_id: dict(self.nvml) if self.nvml is not None else None,
            driver_version=lambda: "stand-in",
            facts_source="stand-in timing model (no driver read)",
            provenance="stand_in",
        )

    def driver_facts(self, index: int) -> dict:
        if self.driver_error:
            raise DriverError("libcuda not found: no NVIDIA driver on this machine")
        return {
            "async_engine_count": self.model.copy_engines,
            "concurrent_kernels": True,
            "compute_capability": "0.0",
            "sm_count": 1,
            "clock_rate_khz": self.model.clock_khz,
            "pci_bus_id": "00000000:00:00.0",
            "cuda_driver_version": "stand-in",
        }


@contextmanager
def installed(monkeypatch, **options):
    """The stand-in as the engine's runtime (and its tensor mode) for the ``with`` block."""
    stand_in = StandIn(**options)
    monkeypatch.setattr(overlap_gpu, "STAND_IN", stand_in.runtime)
    with Tensors(stand_in.device):
        yield stand_in
    monkeypatch.setattr(overlap_gpu, "STAND_IN", None)
