"""How busy the machine was while Step 5 measured on the CPU, without counting the run itself.

The CPU analogue needs a core for the copy thread and one per intra-op thread of the matmuls;
another program on those cores makes them take turns, and the times then measure the queue for
a core. Two measures, both blind to the run's own threads:

- ``load_average()``: the 1-minute load average, sampled *before* the run starts (once the run
  is going, its own threads count in the load average: two of them on two cores read as "busy").
  It is a decaying average, so it still remembers the last minute's work, including a previous run.
- ``OtherCpuMeter``: the CPU time other processes used *during* the run, from ``/proc/stat``
  (the whole machine's busy time, steal included) minus this process's own CPU time (all its
  threads), over the wall time: the average number of cores other programs kept busy. Linux
  only; elsewhere it reads ``None``.

``busy_machine`` prefers the second (a direct measurement over the run) and falls back on the
first.
"""

from __future__ import annotations

import os
import time

from ..i18n import Message

# Busy when other programs took more than a quarter of a core beyond the cores the run leaves free.
BUSY_MARGIN_CORES = 0.25
# /proc/stat's cpu line: user nice system idle iowait irq softirq steal ...; busy = all but idle and
# iowait
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)


def load_average() -> float | None:
    """The 1-minute load average, rounded to 0.01 (None where the system has none)."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def _machine_busy_s(path: str = "/proc/stat") -> float | None:
    """Seconds of CPU time the whole machine has spent busy since boot, or None without
    ``/proc/stat``."""
    try:
        with open(path, encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(v) for v in fields[1:]]
    return sum(ticks[i] for i in _BUSY_FIELDS if i < len(ticks)) / os.sysconf("SC_CLK_TCK")


class OtherCpuMeter:
    """Context manager: ``other_cores`` is the average number of cores that *other* processes kept
    busy between enter and exit (None where ``/proc/stat`` cannot be read).

    /proc/stat counts in clock ticks (10 ms), so over a run shorter than about a second the figure
    is coarse; it is clipped at 0 (rounding can make it slightly negative).
    """

    def __init__(self, stat_path: str = "/proc/stat"):
        self.stat_path = stat_path
        self.other_cores: float | None = None

    def __enter__(self) -> OtherCpuMeter:
        self._busy = _machine_busy_s(self.stat_path)
        self._own = time.process_time()  # this process, all threads
        self._wall = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        busy = _machine_busy_s(self.stat_path)
        wall = time.perf_counter() - self._wall
        if busy is None or self._busy is None or wall <= 0:
            return
        own = time.process_time() - self._own
        self.other_cores = round(max(0.0, (busy - self._busy - own) / wall), 2)


def busy_machine(
    load: float | None, cpus: int | None, other_cores: float | None = None, threads: int = 2
) -> bool:
    """True when other programs took cores the run needed.

    ``other_cores``: cores other processes kept busy during the run (``OtherCpuMeter``), used when
    known; otherwise ``load``, the 1-minute load average sampled before the run. ``threads``: the
    run's own threads (the copy thread and the intra-op threads), which leave ``cpus - threads``
    cores free for others. Busy when the others exceed those free cores by more than
    ``BUSY_MARGIN_CORES``.
    """
    measure = other_cores if other_cores is not None else load
    if measure is None or not cpus:
        return False
    return measure > max(0, cpus - threads) + BUSY_MARGIN_CORES


def describe_load(load: float | None, cpus: int | None, other_cores: float | None) -> Message:
    """'other programs kept 0.91 of 2 CPUs busy during the run (load average 1.3 before it)', a
    Message (shown in the learner's language, recorded in English)."""
    others = None if other_cores is None else format(other_cores, "g")
    average = None if load is None else format(load, "g")
    if others is not None and average is not None:
        return Message(
            "other programs kept {cores} of {cpus} CPUs busy during the run (load average "
            "{load} before it)",
            cores=others,
            cpus=cpus,
            load=average,
        )
    if others is not None:
        return Message(
            "other programs kept {cores} of {cpus} CPUs busy during the run",
            cores=others,
            cpus=cpus,
        )
    if average is not None:
        return Message("load average {load} on {cpus} CPUs before the run", load=average, cpus=cpus)
    return Message("load not measured")
