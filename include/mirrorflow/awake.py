"""The process's awake time: monotonic time less the time the whole process was stopped
(SIGSTOP, a suspended VM or laptop).

Every wait for a cluster's answer (a request's timeout, how long a cluster has been out of reach)
is measured on this clock. On time.monotonic() a process stopped for longer than a wait found,
when it woke, that the wait had run out while nothing in it could hear an answer, and took a
cluster that was up all along for lost (a run frozen inside a copy gave its source up the moment
it woke, "unreachable for 15s").

A daemon thread ticks every TICK_S; a tick that comes more than PAUSED_AFTER_S after the last one
means the process did not run in between, and that gap is taken off. Until the thread has ticked
after a pause, a reader counts the ongoing gap the same way, so the clock never jumps. A thread
starved of the CPU for that long would be taken for a pause too; that only lengthens a wait.
"""

from __future__ import annotations

import os
import threading
import time

TICK_S = 0.2
PAUSED_AFTER_S = 1.0


class _Clock:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid = -1
        self.last = time.monotonic()
        self.paused = 0.0

    def ensure_ticking(self) -> None:
        if self.pid == os.getpid():
            return
        with self.lock:
            if self.pid == os.getpid():
                return
            # A new process (or a forked child, which has none of its parent's threads).
            self.pid, self.last, self.paused = os.getpid(), time.monotonic(), 0.0
            threading.Thread(target=self._tick, name="mirrorflow-awake-clock", daemon=True).start()

    def _tick(self) -> None:
        pid = os.getpid()
        while self.pid == pid:
            time.sleep(TICK_S)
            now = time.monotonic()
            with self.lock:
                self.paused += self._gap(now)
                self.last = now

    def _gap(self, now: float) -> float:
        gap = now - self.last
        return gap - TICK_S if gap > PAUSED_AFTER_S else 0.0

    def now(self) -> float:
        self.ensure_ticking()
        now = time.monotonic()
        with self.lock:
            return now - self.paused - self._gap(now)


_CLOCK = _Clock()


def monotonic() -> float:
    """Seconds on a monotonic clock that stands still while the process is stopped."""
    return _CLOCK.now()
