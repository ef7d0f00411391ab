"""The load benchmarks/lag.py writes and how it reads each record's lag on the target.

A measurement's source topics (`Layout`) get one record in every partition before the
replicator starts, then a steady rate spread evenly over the partitions chosen to be active;
one read_committed consumer assigned every partition of every remote topic notes when each
record became readable and when every partition had its first record (the window start). Lags
are kept in arrays of integers, not per-record objects, so a long run over 10,000 partitions
stays within a few bytes a record.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid
from array import array
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from localkafka import LocalKafka


@dataclass(frozen=True)
class Layout:
    """One measurement's source topics: `topics` topics of `partitions` partitions named
    `<prefix>-00000`..., of which a share `active` of all partitions, evenly spread, gets the
    load."""

    prefix: str
    topics: int
    partitions: int
    active: float = 1.0

    @property
    def names(self) -> list[str]:
        return [f"{self.prefix}-{i:05d}" for i in range(self.topics)]

    @property
    def pattern(self) -> str:
        """The regex that names these topics and no other measurement's (for `topics =`)."""
        return f"{self.prefix}-.*"

    @property
    def total(self) -> int:
        return self.topics * self.partitions

    def every(self) -> list[tuple[str, int]]:
        return [(name, p) for name in self.names for p in range(self.partitions)]

    def loaded(self) -> list[tuple[str, int]]:
        """The active partitions: evenly spaced over all of them, topic by topic."""
        every = self.every()
        count = max(1, min(len(every), round(self.active * len(every))))
        return [every[i * len(every) // count] for i in range(count)]


def producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})


def one_each(writer: Producer, targets: list[tuple[str, int]], size: int) -> int:
    """One record in every partition (what the window start waits for); the producer learns
    every leader on the way, so the rate after it does not begin with a burst."""
    value = os.urandom(max(0, size - 16))
    for index, (topic, partition) in enumerate(targets):
        while True:
            try:
                writer.produce(topic, key=b"%016d" % index, value=value, partition=partition)
                break
            except BufferError:
                writer.poll(0.05)
    if writer.flush(120):
        raise SystemExit("the source did not take the first record of every partition")
    return len(targets)


class RateProducer(threading.Thread):
    """Writes `rate` records a second, round-robin over `targets` (topic, partition), until
    `seconds` are up."""

    def __init__(
        self, writer: Producer, targets: list[tuple[str, int]], rate: float, seconds: float, size: int
    ) -> None:
        super().__init__(name="rate-producer", daemon=True)
        self.producer, self.targets, self.rate, self.seconds = writer, targets, rate, seconds
        self.value = os.urandom(max(0, size - 16))
        self.sent = 0
        self.behind_s = 0.0  # how far the producer itself fell behind its schedule, at most

    def run(self) -> None:
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < self.seconds:
            due = int(elapsed * self.rate)
            self.behind_s = max(self.behind_s, (due - self.sent) / self.rate)
            while self.sent < due:
                topic, partition = self.targets[self.sent % len(self.targets)]
                try:
                    self.producer.produce(
                        topic,
                        key=b"%016d" % self.sent,
                        value=self.value,
                        partition=partition,
                        timestamp=int(time.time() * 1000),
                    )
                    self.sent += 1
                except BufferError:
                    self.producer.poll(0.01)
            self.producer.poll(0)
            time.sleep(0.002)
        assert self.producer.flush(60) == 0, "the source did not take every record"


class LagReader(threading.Thread):
    """Reads every remote topic read_committed as it fills, with one consumer; each record's lag
    is the time it is seen minus its timestamp. A remote topic is assigned as soon as the target
    knows it with all its partitions."""

    def __init__(self, bootstrap: str, remotes: list[str], partitions: int) -> None:
        super().__init__(name="lag-reader", daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"lag-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                # librdkafka names every assigned partition in each fetch: at thousands of
                # partitions an empty fetch every 10 ms would load the target more than the copy.
                # A fetch waiting on the broker is answered as soon as records become readable,
                # so the wait adds nothing to a lag.
                "fetch.wait.max.ms": 10 if len(remotes) * partitions <= 100 else 100,
                "log_level": 3,
            }
        )
        self.partitions = partitions
        self.first = {name: i * partitions for i, name in enumerate(remotes)}
        self.seen = bytearray(len(remotes) * partitions)
        self.covered = 0
        self.covered_at: float | None = None
        """time.monotonic() when every partition had shown its first record."""
        self.stamps, self.lags = array("q"), array("l")
        self.halt = threading.Event()

    def _assign_known(self, waiting: set[str]) -> None:
        topics = self.consumer.list_topics(timeout=30).topics
        known = [
            name
            for name in waiting
            if (meta := topics.get(name)) is not None
            and meta.error is None
            and len(meta.partitions) == self.partitions
        ]
        if known:
            self.consumer.incremental_assign(
                [TopicPartition(name, p, 0) for name in known for p in range(self.partitions)]
            )
            waiting.difference_update(known)

    def run(self) -> None:
        waiting, look_at = set(self.first), 0.0
        while not self.halt.is_set():
            if waiting and time.monotonic() >= look_at:
                self._assign_known(waiting)
                look_at = time.monotonic() + 0.2
            if len(waiting) == len(self.first):
                time.sleep(0.1)
                continue
            messages = self.consumer.consume(1000, timeout=0.1)
            now_ms = int(time.time() * 1000)
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(error.str())
                    continue
                stamp = message.timestamp()[1]
                self.stamps.append(stamp)
                self.lags.append(now_ms - stamp)
                index = self.first[message.topic()] + message.partition()
                if not self.seen[index]:
                    self.seen[index] = 1
                    self.covered += 1
                    if self.covered == len(self.seen):
                        self.covered_at = time.monotonic()
        self.consumer.close()


@dataclass
class Context:
    """One run of the benchmark: its options, the two clusters, a scratch directory, and the
    topics of the measurement under way."""

    args: argparse.Namespace
    source: LocalKafka
    target: LocalKafka
    tmp: Path
    layout: Layout | None = None
    counter: int = 0
