"""How mirrorflow's own processes log: one line per record, with its time, level and logger.

Airflow and Spark set up logging in the processes they start, so the library sets up nothing
there. The `mirrorflow` command does (`configure`), and so do the worker processes it spawns
(`spawned`, given `level()`: a spawned process starts with Python's logging unset, and would
print its warnings as bare sentences that a reader, or a script grepping the output, cannot tell
from the command's own lines).
"""

from __future__ import annotations

import logging
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import TextIO

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LEVEL_ENV = "MIRRORFLOW_LOG_LEVEL"
"""Where the `mirrorflow` command's --log-level can come from instead."""

_configured: str | None = None


class _Stderr(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a record comes: the command's progress bar swaps
    it for a proxy that prints above the bar, and a handler holding the stream it started with
    would write through the bar."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter(LOG_FORMAT))

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def configure(level: str) -> None:
    """Log records of `level` and above to stderr. Called again, it only changes the level."""
    global _configured
    name = level.upper()
    if name not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    root = logging.getLogger()
    if not any(isinstance(h, _Stderr) for h in root.handlers):
        root.addHandler(_Stderr())
    root.setLevel(name)
    _configured = name


def level() -> str | None:
    """The level `configure` set in this process, for the worker processes it spawns; None where
    nothing was set up (Airflow's and Spark's processes)."""
    return _configured


def spawned(level: str | None) -> None:
    """First thing in a spawned worker process: log as the process that spawned it did."""
    if level is not None:
        configure(level)


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """Spawned (not forked: a fork copies whatever locks the parent's librdkafka threads hold)
    worker processes that log as this process does."""
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=get_context("spawn"), initializer=spawned, initargs=(level(),)
    )
