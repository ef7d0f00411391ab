"""librdkafka's lines about a fenced writer, held until someone who knows why it was fenced says
whether that was expected.

A writer slot's producer that a newer writer with the same transactional.id fenced logs it loudly
(`FATAL ... Fatal error: Local: This instance has been fenced by a newer instance`, at CRITICAL,
with a `TXNERR` line at ERROR and an `ADDPARTS` warning before it). At a micro-batch window's
handover that is the design: the next window's writers fence the previous window's, slot by slot
(replicate/window/task.py). Logged as they come, every normal handover read as a failure.

Every copy producer with a transactional.id logs through a ProducerLog (calls.new_client_config
and calls.producer_config put one in its config, around the config's own `logger`; confluent-kafka
calls its `log(level, msg, *args)` for each line, from the poll that serves it). Its lines pass
through unchanged, except those of a producer that was fenced (the fencing line and every warning
or error after it) while its transactional.id is watched (FENCINGS.watch): those are held. The
window task that watches a slot then tells what the fencing was: a handover (`expected`: the held
lines, and any that come later, go to DEBUG, and the task says the handover in one INFO line) or
not (`unexpected`: they are logged at their own levels, and stay visible as the errors they are).
Lines nobody decides on within HOLD_S are logged at their own levels too. A fencing of an id no
one watches (a batch run's writers, an older id fenced on purpose) is logged as it comes.

The book is per process: a process runs one window's tasks (a local worker process, a Spark
executor's Python worker), never two windows of one flow, whose slots share their ids.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

HOLD_S = 60.0
"""The longest a fencing line is held for a decision before it is logged at its own level."""

HANDOVER_NOTE = " (a handover: the next window's writer fenced this one, as designed)"

_FENCING_WORDS = ("fenced", "old epoch", "invalid_producer_epoch")


def is_fencing_line(text: str) -> bool:
    """Whether a librdkafka line says its producer was fenced (`_FENCED`, `PRODUCER_FENCED`, a
    broker's INVALID_PRODUCER_EPOCH: "Producer attempted an operation with an old epoch")."""
    lowered = text.lower()
    return any(word in lowered for word in _FENCING_WORDS)


@dataclass(frozen=True, slots=True)
class _Line:
    logger: Any
    level: int
    msg: str
    args: tuple[Any, ...]
    at: float

    def emit(self, level: int | None = None, note: str = "") -> None:
        self.logger.log(self.level if level is None else level, self.msg + note, *self.args)


class FencingBook:
    """Which transactional ids have a decider, the lines held for them, and the decisions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, list[_Line]] = {}
        """Watched ids -> their lines waiting for a decision."""
        self._expected: set[str] = set()
        """Ids whose fencing was a handover: their fencing lines go to DEBUG at once."""

    def watch(self, ids: Iterable[str]) -> None:
        with self._lock:
            for tid in ids:
                self._held.setdefault(tid, [])

    def take(self, tid: str, line: _Line) -> int | None:
        """The level to log `line` at now, or None once it is held."""
        with self._lock:
            if tid in self._expected:
                return logging.DEBUG
            held = self._held.get(tid)
            if held is None:
                return line.level
            held.append(line)
            return None

    def expected(self, ids: Iterable[str]) -> int:
        """The fencings of `ids` were a handover: their held lines (and later ones) at DEBUG;
        how many were held."""
        lines = self._decide(ids, expected=True)
        for line in lines:
            line.emit(logging.DEBUG, HANDOVER_NOTE)
        return len(lines)

    def unexpected(self, ids: Iterable[str]) -> int:
        """The fencings of `ids` were no handover: their held lines at their own levels; the ids
        stay watched (the slot is taken back, its next producer may be fenced again)."""
        lines = self._decide(ids, expected=False)
        for line in lines:
            line.emit()
        return len(lines)

    def overdue(self, max_age_s: float = HOLD_S) -> int:
        """Lines held longer than `max_age_s` without a decision, logged at their own levels."""
        now = time.monotonic()
        with self._lock:
            late = [line for held in self._held.values() for line in held if now - line.at > max_age_s]
            for tid, held in self._held.items():
                self._held[tid] = [line for line in held if now - line.at <= max_age_s]
        for line in sorted(late, key=lambda line: line.at):
            line.emit()
        return len(late)

    def forget(self, ids: Iterable[str], *, expected: Iterable[str] = ()) -> None:
        """A task that watched `ids` ends: lines still held are logged, at DEBUG for the ids in
        `expected` (slots a newer window announced), else at their own levels."""
        ids, handed = set(ids), set(expected)
        with self._lock:
            lines = [(tid, line) for tid in ids for line in self._held.pop(tid, [])]
            self._expected -= ids
        for tid, line in sorted(lines, key=lambda item: item[1].at):
            if tid in handed:
                line.emit(logging.DEBUG, HANDOVER_NOTE)
            else:
                line.emit()

    def _decide(self, ids: Iterable[str], *, expected: bool) -> list[_Line]:
        with self._lock:
            lines = []
            for tid in ids:
                if tid in self._held:
                    lines += self._held[tid]
                    self._held[tid] = []
                if expected:
                    self._expected.add(tid)
                    self._held.pop(tid, None)
        return sorted(lines, key=lambda line: line.at)


FENCINGS = FencingBook()


class ProducerLog:
    """The `logger` of one transactional producer (confluent-kafka calls `log(level, msg, *args)`
    with librdkafka's facility, the client's name and the text as args): lines go to `base`, the
    fencing ones by way of FENCINGS. Never raises: it runs inside the producer's poll."""

    __slots__ = ("base", "transactional_id", "fenced")

    def __init__(self, base: Any, transactional_id: str) -> None:
        self.base, self.transactional_id = base, transactional_id
        self.fenced = False

    def log(self, level: int, msg: str, *args: Any) -> None:
        now = level
        if level >= logging.WARNING and (self.fenced or is_fencing_line(" ".join(map(str, args)))):
            self.fenced = True
            now = FENCINGS.take(self.transactional_id, _Line(self.base, level, msg, args, time.monotonic()))
            if now is None:
                return
        note = HANDOVER_NOTE if now < level else ""
        self.base.log(now, msg + note, *args)


def producer_log(base: Any, transactional_id: str | None) -> Any:
    """The logger for a producer's config: `base` itself without a transactional.id, else a
    ProducerLog around it (around the base of one given already: a config copied from another)."""
    if isinstance(base, ProducerLog):
        base = base.base
    return base if transactional_id is None else ProducerLog(base, transactional_id)
