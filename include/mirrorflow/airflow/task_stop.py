"""A stop request that Airflow's on_kill can make safely.

Airflow 3 asks a running task to stop by calling its operator's on_kill from the task process's
SIGTERM handler, which runs in the main thread between two of its bytecodes: possibly while that
thread is itself inside `threading.Event.wait` holding the event's (non-reentrant) lock, where an
`Event.set()` from the handler would wait for that lock forever. And on_kill may come before
execute has started anything it could stop; the request must still hold when execute gets there.

`StopRequest` takes no lock to be set: a flag and one byte written into a pipe, which `wait`
watches with select. It is made per execute (an operator is deep-copied, a pipe is not).
"""

from __future__ import annotations

import contextlib
import os
import select
import time


class StopRequest:
    """Set from a signal handler, waited on by the main thread (`threading.Event`'s wait/is_set)."""

    def __init__(self) -> None:
        self._set = False
        self._closed = False
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)

    def set(self) -> None:
        self._set = True
        if self._closed:  # its descriptors' numbers may belong to another file by now
            return
        with contextlib.suppress(OSError):  # the pipe is full: it was set before
            os.write(self._write, b"x")

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        """True once set; False when `timeout` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._set:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            # A signal during select runs its handler and select goes on (PEP 475); a set() from
            # that handler has made the pipe readable.
            select.select([self._read], [], [], left)
        return True

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)
