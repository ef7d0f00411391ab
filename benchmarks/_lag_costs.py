"""What a replicator spends while benchmarks/lag.py measures it: CPU seconds of its processes,
and for mirrorflow the transactions it committed.

Every mirrorflow transaction writes progress records into the flow's offsets topic whose value
carries `"mirrorflow.commit":"<token>"`, one token per transaction: the distinct tokens among
the committed records appended over a span are the transactions that committed progress in it.
MirrorMaker 2's records carry no such token, so its transactions are not counted here.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable

import psutil
from confluent_kafka import Consumer, IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from vs_mm2 import tree_cpu

from mirrorflow.mm2.connect_offsets import decode_offset_entry


class CpuMeter:
    """CPU seconds of the replicator's processes: those running now (their whole tree) and
    those that ended and were waited for since the meter started (RUSAGE_CHILDREN)."""

    def __init__(self, live: Callable[[], list[int]]) -> None:
        self.live = live
        self.base = self._children()
        self.started = self._running()
        """What the processes running now had used before: their start-up is not the rate's."""

    @staticmethod
    def _children() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def _running(self) -> float:
        running = 0.0
        for pid in self.live():
            try:
                running += tree_cpu(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        return running

    def now(self) -> float:
        return self._children() - self.base + self._running() - self.started


class Commits:
    """Transactions that committed progress into a mirrorflow flow's offsets topic between
    `__init__` and `end()`: the distinct commit tokens of the records in between, read
    read_committed (aborted transactions are not counted). One ListOffsets for all of the
    topic's partitions at each end of the span."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        meta = self.admin.list_topics(topic, timeout=30).topics[topic]
        self.partitions = sorted(meta.partitions)
        self.start = self._stable_ends()
        self.stop: dict[int, int] = {}

    def _stable_ends(self) -> dict[int, int]:
        asked = {TopicPartition(self.topic, p): OffsetSpec.latest() for p in self.partitions}
        answers = self.admin.list_offsets(asked, isolation_level=IsolationLevel.READ_COMMITTED)
        return {tp.partition: future.result(30).offset for tp, future in answers.items()}

    def end(self) -> None:
        self.stop = self._stable_ends()

    def count(self) -> int:
        """Read after the span (the offsets are fixed by then), so the reading costs the
        measured replicator nothing."""
        wanted = {p: end for p, end in self.stop.items() if end > self.start[p]}
        if not wanted:
            return 0
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "lag-commits",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "log_level": 3,
            }
        )
        consumer.assign([TopicPartition(self.topic, p, self.start[p]) for p in wanted])
        tokens: set[str] = set()
        quiet_since, read_any = time.monotonic(), False
        try:
            # A partition whose last record before the end is a transaction marker shows no
            # record at the end: it is read once nothing more comes (for 2 s once records came,
            # for 30 s before the first, which a loaded machine may take to fetch).
            while wanted and time.monotonic() - quiet_since < (2 if read_any else 30):
                messages = consumer.consume(10_000, timeout=0.2)
                if messages:
                    quiet_since, read_any = time.monotonic(), True
                for message in messages:
                    partition = message.partition()
                    if message.error() is not None or partition not in wanted:
                        continue
                    if message.offset() >= wanted[partition]:
                        del wanted[partition]
                        continue
                    commit = decode_offset_entry(message.value()).commit
                    if commit:
                        tokens.add(commit)
                    if message.offset() + 1 >= wanted[partition]:
                        del wanted[partition]
        finally:
            consumer.close()
        return len(tokens)
