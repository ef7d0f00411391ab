"""Reading the source for the transactions of one slot: the partitions of a transaction with one
assignment, so each fetch brings records of all of them, each partition's records handed to its
PartitionCopy as they come.

The assignment is kept from one transaction to the next while it still fits (the same partitions,
each continuing where the last transaction stopped), so a large partition copied chunk after
chunk keeps the consumer's prefetched records. Records read past a transaction's bound wait in
`leftover` for the next transaction of their partition. A partition read to its end is paused: the
consumer would otherwise keep fetching its end every fetch.wait.max.ms while the transaction
flushes and commits.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from mirrorflow.kafka import ClusterWatch, watermarks
from mirrorflow.replicate.copy.calls import topic_metadata
from mirrorflow.replicate.copy.chunk import Chunk, PartitionCopy
from mirrorflow.replicate.copy.clients import CONSUME_BATCH, PooledConsumer
from mirrorflow.replicate.copy.job import CopyError, CopyJob

CONSUME_TIMEOUT_S = 0.1

Where = tuple[str, int]


class SourceReader:
    """One pooled consumer, reading for one slot's transactions one after another."""

    def __init__(self, pooled: PooledConsumer, watch: ClusterWatch) -> None:
        self.pooled, self.watch = pooled, watch
        self.consumer = pooled.consumer
        self.positions: dict[Where, int] = {}
        """Each assigned partition's next offset as the copies see it."""
        self.paused: set[Where] = set()
        self.leftover: dict[Where, list[Message]] = {}

    def _assign(self, wanted: dict[Where, int], *, again: bool = False) -> None:
        if wanted == self.positions and not again:
            return
        consumer = self.consumer
        if self.paused:
            # librdkafka keeps an application's pause through a new assignment.
            consumer.resume([TopicPartition(t, p) for t, p in self.paused])
            self.paused.clear()
        for topic in sorted({t for t, _ in wanted} - self.pooled.topics):
            # A consumer assigned a partition of a topic it has no metadata for finds the leader
            # on librdkafka's timers (measured: about 0.9 s); asking first takes one request.
            topic_metadata(consumer, topic, self.watch)
            self.pooled.topics.add(topic)
        consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in wanted.items()])
        self.positions = dict(wanted)
        self.leftover.clear()

    def fill(
        self,
        job: CopyJob,
        chunks: Sequence[tuple[PartitionCopy, Chunk]],
        producer: Producer,
        target_watch: ClusterWatch,
        deadline: float,
    ) -> None:
        """Read every copy of `chunks` from its position and produce its records into its chunk,
        until each is read to its end or the transaction's bounds (max_records, max_bytes, and
        `deadline` once something was read) are reached."""
        copies = {(c.span.topic, c.span.partition): (c, chunk) for c, chunk in chunks}
        self._assign({where: c.position for where, (c, _) in copies.items()})
        unread = set(copies)
        for where in sorted(unread):
            waiting = self.leftover.pop(where, None)
            if waiting:
                self._hand(where, waiting, copies, unread, producer, target_watch)
        idle_since = time.monotonic()
        while unread:
            processed = sum(chunk.processed for _, chunk in copies.values())
            read_bytes = sum(chunk.bytes for _, chunk in copies.values())
            if processed >= job.max_records or read_bytes >= job.max_bytes:
                break
            if processed and time.monotonic() > deadline:
                break
            # consume() returns before its timeout only once it has as many messages as asked
            # for (an EOF event counts), so never ask for more than the offsets left.
            left = sum(copies[w][0].end - copies[w][1].last_processed - 1 for w in unread)
            batch = self.consumer.consume(
                max(1, min(CONSUME_BATCH, job.max_records - processed, left)), CONSUME_TIMEOUT_S
            )
            if not batch:
                self.watch.check()
                if time.monotonic() - idle_since > job.stall_timeout_s:
                    copy, chunk = copies[min(unread)]
                    raise CopyError(
                        f"{copy.span.topic}-{copy.span.partition} returned nothing for {job.stall_timeout_s:.0f}s "
                        f"at offset {chunk.last_processed + 1} before reaching {copy.span.end}"
                    )
                continue
            idle_since = time.monotonic()
            self.watch.alive()
            by_partition: dict[Where, list[Message]] = {}
            for message in batch:
                topic = message.topic()
                if topic is None:
                    error = message.error()
                    if error is not None:
                        raise KafkaException(error)
                    continue
                by_partition.setdefault((topic, message.partition()), []).append(message)
            for where, messages in by_partition.items():
                if where not in unread:
                    continue  # read to its end already, or left from the consumer's last assignment
                if sum(chunk.bytes for _, chunk in copies.values()) >= job.max_bytes:
                    self.leftover.setdefault(where, []).extend(messages)
                    continue
                self._hand(where, messages, copies, unread, producer, target_watch)
        for copy, chunk in copies.values():
            if chunk.reached_end:
                chunk.last_processed = max(chunk.last_processed, copy.end - 1)

    def _hand(
        self,
        where: Where,
        messages: list[Message],
        copies: dict[Where, tuple[PartitionCopy, Chunk]],
        unread: set[Where],
        producer: Producer,
        target_watch: ClusterWatch,
    ) -> None:
        copy, chunk = copies[where]
        expected = chunk.last_processed + 1
        if messages[0].offset() < expected and messages[0].error() is None:
            messages = [m for m in messages if m.offset() >= expected or m.error() is not None]
        for index, message in enumerate(messages):
            error = message.error()
            if error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET:
                if index:
                    copy.take(chunk, messages[:index], producer, target_watch)
                offset = message.offset() if message.offset() >= 0 else chunk.last_processed + 1
                self._skip_deleted(copy, chunk, offset)
                break
        else:
            if messages:
                copy.take(chunk, messages, producer, target_watch)
        self.positions[where] = chunk.last_processed + 1
        if chunk.reached_end or chunk.refused is not None:
            unread.discard(where)
            if chunk.reached_end:
                self.consumer.pause([TopicPartition(*where)])
                self.paused.add(where)

    def _skip_deleted(self, copy: PartitionCopy, chunk: Chunk, position: int) -> None:
        """The source no longer has `position`. If retention (or DeleteRecords) removed it, count
        what is gone up to the partition's earliest offset and read on from there; anything else
        (the partition now ends below it: a recreated topic) fails the partition."""
        span = copy.span
        low, high = watermarks(self.consumer, span.topic, span.partition)
        if position >= low:
            raise CopyError(
                f"{span.topic}-{span.partition}: offset {position} is out of range on the source, whose "
                f"offsets now run from {low} to {high}; the partition was truncated or the topic "
                "recreated, so the copy stops rather than guess where to go on"
            )
        resume = min(low, copy.end)
        copy.result.count_lost(position, resume)
        chunk.last_processed = resume - 1
        if resume >= copy.end:
            chunk.reached_end = True
            return
        # After the reset error librdkafka stops fetching the partition and refuses a seek
        # (_STATE): only a new assignment starts it again. The others go on from where they are.
        where = (span.topic, span.partition)
        self._assign({**self.positions, where: resume}, again=True)
