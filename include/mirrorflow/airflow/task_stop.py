"""A stop request that Airflow's on_kill can make safely.

Airflow 3 asks a running task to stop by calling its operator's on_kill from the task process's
SIGTERM handler, which runs in the main thread between two of its bytecodes: possibly while that
thread is itself inside `threading.Event.wait` holding the event's (non-reentrant) lock, where an
`Event.set()` from the handler would wait for that lock forever. And on_kill may come before
execute has started anything it could stop; the request must still hold when execute gets there.

`StopRequest` is a flag: setting it takes no lock, and `wait` looks at it every POLL_S (a stop
is seen within that). It has no lock or descriptor, so an operator can make it in __init__ and
be deep-copied with it.
"""

from __future__ import annotations

import time

POLL_S = 0.1


class StopRequest:
    """Set from a signal handler, waited on by the main thread (`threading.Event`'s wait/is_set)."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        """True once set; False when `timeout` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._set:
            left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
            if left <= 0:
                return False
            time.sleep(left)  # a signal's handler runs during it, and the sleep goes on (PEP 475)
        return True
