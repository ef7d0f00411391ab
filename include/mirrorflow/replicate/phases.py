"""Where a copy's time goes: wall and CPU seconds per phase, summed over the threads of a process.

The copy engine and the micro-batch task wrap their steps in `phase(name)` (reading the source's
end offsets, opening and fencing writers, checking topic identities, reading and producing,
flushing, committing, offset-syncs, status records). Each phase adds the wall time it took and
the CPU time of the thread that ran it (time.thread_time: librdkafka's own threads are not in it;
their CPU is the process's total minus the phases'). Two clock reads on each side, about a
microsecond: always on. benchmarks/window_profile.py reads `snapshot()` around a window's batches
to say how a batch's time grows with partitions.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class PhaseTotals:
    calls: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0


_lock = threading.Lock()
_totals: dict[str, PhaseTotals] = {}


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Count the block's wall and thread CPU time under `name` (also when it raises)."""
    wall, cpu = time.perf_counter(), time.thread_time()
    try:
        yield
    finally:
        took_wall, took_cpu = time.perf_counter() - wall, time.thread_time() - cpu
        with _lock:
            found = _totals.get(name)
            if found is None:
                found = _totals[name] = PhaseTotals()
            found.calls += 1
            found.wall_s += took_wall
            found.cpu_s += took_cpu


def snapshot() -> dict[str, PhaseTotals]:
    """The totals so far, per phase (a copy: later phases do not change it)."""
    with _lock:
        return {name: PhaseTotals(t.calls, t.wall_s, t.cpu_s) for name, t in _totals.items()}


def since(before: dict[str, PhaseTotals]) -> dict[str, PhaseTotals]:
    """What each phase added after `before` (a snapshot)."""
    now = snapshot()
    out = {}
    for name, total in now.items():
        was = before.get(name, PhaseTotals())
        out[name] = PhaseTotals(total.calls - was.calls, total.wall_s - was.wall_s, total.cpu_s - was.cpu_s)
    return out
