"""Heartbeats: MM2's proof that a replication path is alive, written as MirrorHeartbeatTask writes them.

The heartbeat job of pair S->T writes Heartbeat(S, T, now) into `heartbeats` on T every
emit.heartbeats.interval.seconds. That topic is then replicated like any other (heartbeat topics
bypass the `topics` list), so T's `heartbeats` becomes `T.heartbeats` on every cluster T feeds, and
`T.heartbeats` becomes `U.T.heartbeats` one hop further. MirrorClient (and `mirrorflow status`)
reads those names to find upstream clusters and hop counts, and the newest timestamp in them to
tell how fresh each path is.

Airflow cannot run a task every second, and a DAG run per minute would write 1,440 runs a day per
pair into Airflow's metadata database. One heartbeat DAG therefore serves every pair of a config
and each of its runs emits for a long window (`mirrorflow.heartbeats.run.seconds`, an hour by
default: 24 runs a day in all): each pair at its own interval, then it exits. `heartbeat_period`
is the DAG schedule that keeps those windows back to back.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.config.airflow_connections import ConnectionExtra
from mirrorflow.kafka import admin_client
from mirrorflow.mm2.formats import Heartbeat
from mirrorflow.ops.acl_check import require_job_acls
from mirrorflow.replicate.topics import COMPACTED, ensure_topic

log = logging.getLogger("mirrorflow.heartbeats")

# Airflow schedules are impractical below a minute (a run costs a scheduler loop and a task
# process); a heartbeat DAG therefore runs at least a minute apart and emits inside each run.
MIN_PERIOD = timedelta(minutes=1)
# MM2 spins with an interval of 0; mirrorflow caps one job at ten heartbeats a second.
MIN_SPACING = timedelta(milliseconds=100)
FLUSH_TIMEOUT_S = 30.0
DELIVERY_TIMEOUT_MS = 30_000


class HeartbeatError(RuntimeError):
    """Heartbeats were not acknowledged by the target cluster; the message says which and why.
    `after_window`: raised at the end of a window that ran (its failures are the run's verdict),
    not before one started (where the window is still ahead and a retry can emit it)."""

    def __init__(self, message: str, *, after_window: bool = False) -> None:
        super().__init__(message)
        self.after_window = after_window


def heartbeat_period(intervals: Sequence[timedelta], run: timedelta = MIN_PERIOD) -> timedelta:
    """The heartbeat DAG's schedule for pairs emitting at `intervals`, each run lasting about `run`.

    The shortest interval repeated a whole number of times to fill at least `run`, a minute and
    the longest interval (run of a minute: 1 s -> 60 s, 7 s -> 63 s, 45 s -> 90 s, 10 min ->
    10 min), so the shortest interval's heartbeats stay evenly spaced across run boundaries and
    every pair emits at least once per run.
    """
    if not intervals:
        raise ValueError("no heartbeat intervals: no pair emits heartbeats")
    spacings = [max(interval, MIN_SPACING) for interval in intervals]
    shortest = min(spacings)
    floor = max(run, MIN_PERIOD, max(spacings))
    return shortest * math.ceil(floor / shortest - 1e-9)


def heartbeat_window(
    intervals: Sequence[timedelta], scheduled_at: datetime, now: datetime, run: timedelta = MIN_PERIOD
) -> float:
    """Seconds a run keeps emitting: until one (shortest) interval before the next run is due, so
    the last heartbeat of this run and the first of the next are one interval apart and runs never
    overlap. A run that starts late shortens its window instead of pushing the next run back."""
    next_run = scheduled_at + heartbeat_period(intervals, run)
    shortest = min(max(interval, MIN_SPACING) for interval in intervals)
    return max(0.0, (next_run - shortest - now).total_seconds())


def heartbeat_schedule(intervals_s: Sequence[float], duration_s: float) -> list[tuple[float, int]]:
    """(seconds after start, emitter index) of every heartbeat, in time order.

    Emitter i sends at 0, interval, 2*interval, ... while that stays within `duration_s`, so
    every emitter sends at least once and the count is fixed before the first send.
    """
    spacing_floor = MIN_SPACING.total_seconds()
    schedule = []
    for index, interval in enumerate(intervals_s):
        spacing = max(interval, spacing_floor)
        count = int(math.floor(max(duration_s, 0.0) / spacing + 1e-9)) + 1
        schedule.extend((k * spacing, index) for k in range(count))
    return sorted(schedule)


@dataclass
class HeartbeatRun:
    """What one flow's heartbeat job wrote in one run (returned to XCom and printed by the CLI)."""

    flow: str
    cluster: str
    topic: str
    emitted: int = 0
    failed: int = 0
    first_ms: int | None = None
    last_ms: int | None = None
    created_topic: bool = False
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Emitter:
    """One flow's producer into its target's heartbeats topic."""

    def __init__(self, flow: FlowConfig, clients: FlowClients) -> None:
        interval = flow.emit_heartbeats_interval
        if interval is None:
            raise ValueError(
                f"heartbeats are disabled for {flow.name} (emit.heartbeats.enabled=false or a negative "
                "emit.heartbeats.interval.seconds); enable them or leave the flow out"
            )
        self.flow = flow
        self.interval_s = interval.total_seconds()
        self.run = HeartbeatRun(flow=flow.name, cluster=flow.target, topic=flow.heartbeats_topic)
        self.run.created_topic = ensure_topic(
            admin_client(clients.target_admin),
            flow.heartbeats_topic,
            1,
            flow.heartbeats_topic_replication_factor,
            COMPACTED,
            what="heartbeats",
            factor_key="heartbeats.topic.replication.factor",
        )
        config = {**clients.target_producer, "acks": "all"}
        config.setdefault("message.timeout.ms", DELIVERY_TIMEOUT_MS)
        self.producer = Producer(config)
        self.pending = 0
        self.finished = False

    def emit(self, now_ms: int) -> None:
        heartbeat = Heartbeat(self.flow.source, self.flow.target, now_ms)
        self.pending += 1
        self.producer.produce(
            self.run.topic,
            key=heartbeat.key_bytes(),
            value=heartbeat.value_bytes(),
            partition=0,
            timestamp=now_ms,
            on_delivery=self._delivered,
        )
        self.producer.poll(0)

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if self.finished:
            return  # a heartbeat purged at the end, counted as failed already
        self.pending -= 1
        if error is not None:
            self.run.failed += 1
            reason = f"{error.name()}: {error.str()}"
            if reason not in self.run.errors:
                # Said at once: a run lasts up to an hour and fails only at its end.
                log.warning(
                    "%s: heartbeat to %s on %s failed: %s",
                    self.flow.name,
                    self.run.topic,
                    self.flow.target,
                    reason,
                )
                self.run.errors.append(reason)
            return
        timestamp = message.timestamp()[1]
        self.run.emitted += 1
        self.run.first_ms = timestamp if self.run.first_ms is None else min(self.run.first_ms, timestamp)
        self.run.last_ms = timestamp if self.run.last_ms is None else max(self.run.last_ms, timestamp)

    def finish(self) -> HeartbeatRun:
        self.producer.flush(FLUSH_TIMEOUT_S)
        if self.pending:
            self.run.failed += self.pending
            self.run.errors.append(
                f"{self.pending} heartbeat(s) not acknowledged by {self.flow.target} within {FLUSH_TIMEOUT_S:.0f} s"
            )
        self.close()
        return self.run

    def close(self) -> None:
        """Let the producer go. Each heartbeat still queued holds this emitter through its
        delivery callback, and the producer holds the heartbeat: unless the purged reports are
        served, neither is ever freed and the producer's threads run on in this process."""
        self.finished = True
        with contextlib.suppress(KafkaException, RuntimeError):
            self.producer.purge()
            self.producer.flush(0)


def not_started_reason(exc: BaseException, target: str) -> str:
    """Why a pair's heartbeats did not start, in words: a bare TimeoutError (a call on the target
    that got no answer in time, such as its ACL check) says nothing by itself."""
    text = str(exc).strip()
    if isinstance(exc, TimeoutError):
        return f"cluster {target} did not answer in time" + (f" ({text})" if text else "")
    return text or f"{type(exc).__name__} while setting up the heartbeats to cluster {target}"


class StopSignal(Protocol):
    """What ends a window early: a threading.Event, or airflow.task_stop.StopRequest (on_kill)."""

    def wait(self, timeout: float | None = None) -> bool: ...


def emit_heartbeats(
    flows: Sequence[FlowConfig],
    *,
    duration_s: float = 0.0,
    connection_extra: ConnectionExtra | None = None,
    stop: StopSignal | None = None,
) -> list[HeartbeatRun]:
    """Emit each flow's heartbeats for `duration_s` (0: one heartbeat each) and return what was
    written; `stop` ends the window early (Airflow asks a task to stop on shutdown, and an
    hour-long window must not hold a worker until it is killed).

    Creates the heartbeats topic on each target first (compacted, one partition,
    heartbeats.topic.replication.factor), as MirrorHeartbeatConnector does. Raises
    HeartbeatError after the window if any heartbeat was not acknowledged.
    """
    emitters: list[_Emitter] = []
    unstarted: list[HeartbeatRun] = []
    for flow in flows:
        # One pair whose target is down or refuses must not stop the others' heartbeats: its
        # failure is kept, reported at the end of the window, and the next run tries it again.
        try:
            clients = FlowClients.resolve(flow, connection_extra)
            require_job_acls(flow, "heartbeats", clients, sides=("target",))
            emitters.append(_Emitter(flow, clients))
        except Exception as exc:  # noqa: BLE001 - reported below, with the pair it belongs to
            if len(flows) == 1:
                raise
            reason = not_started_reason(exc, flow.target)
            log.error("%s: no heartbeats this run: %s", flow.name, reason)
            unstarted.append(
                HeartbeatRun(
                    flow=flow.name, cluster=flow.target, topic=flow.heartbeats_topic, errors=[reason]
                )
            )
    if not emitters:
        raise HeartbeatError(
            "heartbeats failed for every pair:\n"
            + "\n".join(f"  {run.flow}: {run.errors[0]}" for run in unstarted)
        )
    schedule = heartbeat_schedule([e.interval_s for e in emitters], duration_s)
    start = time.monotonic()
    stopping: StopSignal = stop if stop is not None else threading.Event()
    try:
        for offset, index in schedule:
            if stopping.wait(max(0.0, start + offset - time.monotonic())):
                log.info(
                    "heartbeats stopped early, %.0f s into the window: the task was asked to stop",
                    time.monotonic() - start,
                )
                break
            emitters[index].emit(int(time.time() * 1000))
    except BaseException:
        for emitter in emitters:
            emitter.close()
        raise
    runs = [emitter.finish() for emitter in emitters] + unstarted
    for run in runs:
        log.info("%s: %d heartbeat(s) written to %s on %s", run.flow, run.emitted, run.topic, run.cluster)
    failed = [run for run in runs if run.errors]
    if failed:
        raise HeartbeatError(
            "heartbeats failed:\n"
            + "\n".join(
                f"  {run.flow}: {run.failed} of {run.failed + run.emitted} heartbeat(s) to {run.topic} on "
                f"{run.cluster} failed: {'; '.join(run.errors)}"
                for run in failed
            ),
            after_window=True,
        )
    return runs
