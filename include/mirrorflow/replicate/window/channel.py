"""What a window's driver and tasks tell each other, and the next window, through the run-records
topic (state lives in Kafka: the tasks may run on other machines than their driver).

- `refresh` (driver -> its tasks): the window's plan made again, every
  refresh.topics.interval.seconds, with the new topics and partitions it created on the target;
  each task takes the spans of its slots it did not have (or that a recreated topic changed).
- `takeover` (a task -> older windows): the slots a task is about to copy, written before it
  opens their writers. A task of an older window (or an earlier attempt of the same one) that
  sees a newer takeover of its slots lets them go; a task fenced without one takes its slots back.
- `window` (a task -> its driver, the status page, the metrics): the task's figures every few
  seconds (records, lag in seconds).
- `plan` (the next window's plan, stored before its Spark application is submitted): a task
  that sees a newer plan of its flow knows a successor is starting, and waits for its takeover
  past its own wait if that runs out first (settings.py). Only the record's key is read.

Every record is small (a plan is chunked as any run record); tasks follow the topic with one
consumer each (RunsTail), reading only what was added since their last look.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from mirrorflow.kafka import KafkaCallError, reader, served
from mirrorflow.replicate.copy.clients import close_quietly
from mirrorflow.replicate.run_reading import RunRecordAssembler
from mirrorflow.replicate.runs import RUNS_TOPIC, IncompleteRunRecord, RunRecord, run_key, write_run_record

PLAN = "plan"
REFRESH = "refresh"
TAKEOVER = "takeover"
STATUS = "window"
CONSUME_BATCH = 500

log = logging.getLogger("mirrorflow.window")


def new_attempt() -> str:
    """An id for one attempt of one task (a Spark retry of the task is another attempt)."""
    return uuid.uuid4().hex


def write_takeover(
    producer_config: Mapping[str, Any],
    flow: str,
    run_id: str,
    *,
    plan_offset: int,
    attempt: str,
    slots: Collection[int],
    writer_slots: int,
    timeout_s: float,
) -> int:
    """Store the takeover of `slots` (of `writer_slots`, the flow's count) and return its offset;
    it is acknowledged before the task fences anything, so a fenced older window always finds it."""
    body = json.dumps(
        {"plan_offset": plan_offset, "attempt": attempt, "slots": sorted(slots), "writer_slots": writer_slots}
    )
    return write_run_record(producer_config, flow, run_id, TAKEOVER, body, timeout_s=timeout_s)


class StatusWriter:
    """A task's status records, sent without waiting (a lost one is replaced a few seconds later)."""

    def __init__(self, producer_config: Mapping[str, Any], flow: str, run_id: str) -> None:
        self._producer = Producer(
            {**producer_config, "enable.idempotence": True, "acks": "all", "compression.type": "zstd"}
        )
        self._key = run_key(flow, run_id, STATUS)

    def send(self, body: Mapping[str, Any]) -> None:
        try:
            self._producer.produce(
                RUNS_TOPIC, key=self._key, value=json.dumps(body, separators=(",", ":")), partition=0
            )
            served(self._producer.poll, 0)
        except (BufferError, KafkaException) as exc:
            log.warning("the window's status could not be sent: %s", exc)

    def close(self, timeout_s: float = 2.0) -> None:
        served(self._producer.flush, timeout_s)
        self._producer.purge()


class RunsTailBehind(KafkaCallError):
    """The run-records topic could not be read to its end when a decision needed all of it (a
    writer then writes nothing; its copy is retried as after any failed Kafka call)."""


class RunsTail:
    """The run records of one flow of `kinds` written at or after `start`, as they come; with
    `run_id` (the reader's own run), also the id of the newest plan of another run of the flow
    (`successor`), from its key alone.

    A task reads it from its own thread (poll, catch_up), and its slot writers from the copy's
    threads, each right after its producer was initialised (look): what a look reads is kept and
    handed out again by the next poll or catch_up, so the task still sees every record once, in
    order."""

    def __init__(
        self,
        consumer_config: Mapping[str, Any],
        flow: str,
        kinds: Collection[str],
        *,
        start: int,
        run_id: str | None = None,
    ) -> None:
        self._consumer = reader({**consumer_config, "fetch.wait.max.ms": 100})
        self._consumer.assign([TopicPartition(RUNS_TOPIC, 0, start)])
        self.successor: str | None = None
        """The run id of the newest plan of the flow after `start` that is not `run_id`'s."""

        def wanted(f: str, r: str, k: str) -> bool:
            if f != flow:
                return False
            if k == PLAN and run_id is not None and r != run_id:
                self.successor = r
            return k in kinds

        self._assembler = RunRecordAssembler(wanted)
        self.position = start
        self._lock = threading.Lock()
        self._looked: list[RunRecord] = []
        """Records a look read that the task has not been handed yet."""

    def poll(self) -> list[RunRecord]:
        """What was fetched since the last look (does not wait)."""
        with self._lock:
            found, self._looked = self._looked, []
            self._drain(found)
            return found

    def catch_up(self, timeout_s: float) -> list[RunRecord]:
        """Everything up to the topic's end as of now (at most `timeout_s` of waiting): what a
        task reads before it decides whose a slot is. An end that cannot be read, or is not
        reached in time, leaves what was read (with a warning for the first)."""
        with self._lock:
            found, self._looked = self._looked, []
            try:
                self._read_to_end(timeout_s, found)
            except KafkaException as exc:
                log.warning(
                    "the end of %s could not be read (%s); going on with what was read", RUNS_TOPIC, exc
                )
                self._drain(found)
            except RunsTailBehind:
                pass
            return found

    def look(self, timeout_s: float) -> list[RunRecord]:
        """Every record not handed to the task yet, up to the topic's end as of now: what a slot
        writer reads once its producer is initialised, before it writes. RunsTailBehind when the
        end cannot be read or reached within `timeout_s`: the writer then must not write."""
        with self._lock:
            try:
                self._read_to_end(timeout_s, self._looked)
            except KafkaException as exc:
                raise RunsTailBehind(f"the end of {RUNS_TOPIC} could not be read: {exc}") from exc
            return list(self._looked)

    def _drain(self, found: list[RunRecord]) -> None:
        """What was fetched already, without waiting."""
        while batch := self._consumer.consume(CONSUME_BATCH, timeout=0):
            self._feed(batch, found)

    def _read_to_end(self, timeout_s: float, found: list[RunRecord]) -> None:
        deadline = time.monotonic() + timeout_s
        _, end = self._consumer.get_watermark_offsets(
            TopicPartition(RUNS_TOPIC, 0), timeout=timeout_s, cached=False
        )
        while self.position < end:
            if time.monotonic() >= deadline:
                raise RunsTailBehind(
                    f"{RUNS_TOPIC} was read up to offset {self.position} of {end} within {timeout_s:.0f}s"
                )
            self._feed(self._consumer.consume(CONSUME_BATCH, timeout=0.1), found)

    def _feed(self, batch: list, found: list[RunRecord]) -> None:
        for message in batch:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    self.position = max(self.position, message.offset())
                else:
                    log.debug("reading %s: %s", RUNS_TOPIC, error)
                continue
            self.position = message.offset() + 1
            record = self._assembler.feed(message)
            if isinstance(record, RunRecord):
                found.append(record)
            elif isinstance(record, IncompleteRunRecord):
                log.warning("%s", record.message)

    def probe(self, timeout_s: float) -> None:
        """Ask the cluster for the topic's metadata (raises KafkaException when it does not answer)."""
        self._consumer.list_topics(RUNS_TOPIC, timeout=timeout_s)

    def close(self) -> None:
        close_quietly(self._consumer)
