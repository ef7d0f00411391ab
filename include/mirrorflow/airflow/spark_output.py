"""spark-submit's output in the task log at the level each line was written at.

SparkSubmitHook logs every line spark-submit prints at INFO, so Spark's WARN lines, the JVM's
warnings and the driver's own ERROR lines all read as INFO and no log filter or colour picks
them out. Each line here keeps its own level: log4j's and Python logging's `<date> <time> LEVEL`,
the JVM's `WARNING:` and Python's `...Warning:` lines; a line that continues the one before (a
stack frame, a traceback's lines, a wrapped message) keeps that line's level. The last ERROR
lines are kept, so a failed job can be told by what its driver said, and so is the job's
sentence for a cluster it lost (spark/outcome.py), which then is the task's whole error.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from typing import Any

from mirrorflow.spark.outcome import lost_sentence

_STAMPED = re.compile(r"^\S+ \S+ (TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL)\b")
_PREFIXED = re.compile(r"^(WARN|WARNING|ERROR|FATAL)\b:?")
_PY_WARNING = re.compile(r"^\S+:\d+: \w*Warning: ")
_CONTINUED = re.compile(r"^(\s|at |Caused by|Traceback|\.\.\. \d+ more|[A-Za-z_.]*(Error|Exception)\b)")
LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
}
ERRORS_KEPT = 5


def line_level(line: str, previous: int = logging.INFO) -> int:
    """The level a line of spark-submit's output was written at; `previous` for a continuation."""
    stamped = _STAMPED.match(line) or _PREFIXED.match(line)
    if stamped:
        return LEVELS[stamped.group(1)]
    if _PY_WARNING.match(line):
        return logging.WARNING
    if line and _CONTINUED.match(line) and previous > logging.INFO:
        return previous
    return logging.INFO


class SparkOutputLog:
    """Stands in for a SparkSubmitHook's logger: the hook's own messages (they come with
    arguments) pass through; each bare output line is logged at its own level."""

    def __init__(self, log: Any) -> None:
        self._log = log
        self._level = logging.INFO
        self.errors: deque[str] = deque(maxlen=ERRORS_KEPT)
        self.lost: str | None = None
        """The job's sentence for a cluster it lost (spark/outcome.py), if it said one."""

    def info(self, message: Any, *args: Any, **kwargs: Any) -> None:
        if args or kwargs or not isinstance(message, str):
            self._log.info(message, *args, **kwargs)
            return
        self._level = level = line_level(message, self._level)
        lost = lost_sentence(message)
        if lost is not None:
            self.lost = lost
        if level >= logging.ERROR:
            self.errors.append(message)
            self._log.error("%s", message)
        elif level >= logging.WARNING:
            self._log.warning("%s", message)
        elif level <= logging.DEBUG:
            self._log.debug("%s", message)
        else:
            self._log.info("%s", message)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


def failure_text(exc: BaseException, errors: list[str]) -> str:
    """A failed spark-submit in words: its exit code (SparkSubmitHook's message holds the whole
    command line and a log tail; the code is what counts) and the driver's last ERROR lines."""
    code = re.search(r"Error code is: (-?\d+)", str(exc))
    head = f"spark-submit exited with code {code.group(1)}" if code else f"spark-submit failed: {exc}"
    return head + ("; the job's last errors: " + " | ".join(errors) if errors else "; see the lines above")
