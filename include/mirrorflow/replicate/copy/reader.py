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
from collections.abc import Iterable, Sequence

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from mirrorflow.kafka import ClusterWatch
from mirrorflow.kafka_offsets import watermarks
from mirrorflow.replicate.copy.calls import topic_metadata
from mirrorflow.replicate.copy.chunk import Chunk, PartitionCopy
from mirrorflow.replicate.copy.clients import CONSUME_BATCH, PooledConsumer, Throttle
from mirrorflow.replicate.copy.job import CopyError, CopyJob

CONSUME_TIMEOUT_S = 0.1

Where = tuple[str, int]


class SourceReader:
    """One pooled consumer, reading for one slot's transactions one after another."""

    def __init__(self, pooled: PooledConsumer, watch: ClusterWatch, throttle: Throttle) -> None:
        self.pooled, self.watch, self.throttle = pooled, watch, throttle
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
        ended: list[Where] = []
        for where in sorted(unread):
            waiting = self.leftover.pop(where, None)
            if waiting:
                self._hand(where, waiting, copies, unread, producer, target_watch, ended)
        self._pause(ended)
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
                target_watch.check()
                if time.monotonic() - idle_since > job.stall_timeout_s:
                    copy, chunk = copies[min(unread)]
                    raise CopyError(
                        f"{copy.span.topic}-{copy.span.partition} returned nothing for {job.stall_timeout_s:.0f}s "
                        f"at offset {chunk.last_processed + 1} before reaching {copy.span.end}"
                    )
                continue
            idle_since = time.monotonic()
            self.watch.alive()
            before, ended = read_bytes, []
            for where, messages in self._by_partition(batch, copies):
                if where not in unread:
                    continue  # read to its end already, or left from the consumer's last assignment
                if read_bytes >= job.max_bytes:
                    self.leftover.setdefault(where, []).extend(messages)
                    continue
                chunk = copies[where][1]
                had = chunk.bytes
                self._hand(where, messages, copies, unread, producer, target_watch, ended)
                read_bytes += chunk.bytes - had
            self._pause(ended)
            self.throttle.take(read_bytes - before)
            # The target's errors and delivery reports come only when its producer is served: a
            # chunk read slowly (a byte-rate cap) would notice a lost target only at its flush,
            # tens of seconds after the limit.
            producer.poll(0)
            target_watch.check()
        for copy, chunk in copies.values():
            if chunk.reached_end:
                chunk.last_processed = max(chunk.last_processed, copy.end - 1)

    @staticmethod
    def _by_partition(
        batch: list[Message], copies: dict[Where, object]
    ) -> Iterable[tuple[Where, list[Message]]]:
        """The batch's messages per partition, in order. A transaction of one partition (a large
        one, chunk after chunk) gets its batch as it is when its first and last message are that
        partition's: the consumer reads nothing else, so nothing between them is another's."""
        first, last = batch[0], batch[-1]
        if len(copies) == 1 and first.topic() is not None:
            where = (first.topic(), first.partition())
            if where in copies and (last.topic(), last.partition()) == where:
                return [(where, batch)]
        by_partition: dict[Where, list[Message]] = {}
        for message in batch:
            topic = message.topic()
            if topic is None:
                error = message.error()
                if error is not None:
                    raise KafkaException(error)
                continue
            by_partition.setdefault((topic, message.partition()), []).append(message)
        return by_partition.items()

    def _hand(
        self,
        where: Where,
        messages: list[Message],
        copies: dict[Where, tuple[PartitionCopy, Chunk]],
        unread: set[Where],
        producer: Producer,
        target_watch: ClusterWatch,
        ended: list[Where],
    ) -> None:
        """Give `messages` to the partition's copy; a partition read to its end goes into `ended`."""
        copy, chunk = copies[where]
        expected = chunk.last_processed + 1
        if messages[0].offset() < expected and messages[0].error() is None:
            messages = [m for m in messages if m.offset() >= expected or m.error() is not None]
        # A partition whose next offset is gone ends its fetching with the reset error: it can
        # only be the last of the partition's messages.
        tail = messages[-1] if messages else None
        reset = (
            tail is not None
            and tail.error() is not None
            and tail.error().code() == KafkaError._AUTO_OFFSET_RESET
        )
        taken = messages[:-1] if reset else messages
        if taken:
            copy.take(chunk, taken, producer, target_watch)
        if reset:
            assert tail is not None
            self._skip_deleted(copy, chunk, tail.offset() if tail.offset() >= 0 else chunk.last_processed + 1)
        self.positions[where] = chunk.last_processed + 1
        if chunk.reached_end or chunk.refused is not None:
            unread.discard(where)
            if chunk.reached_end:
                ended.append(where)

    def _pause(self, ended: list[Where]) -> None:
        """Pause the partitions read to their end, in one call (each call takes the consumer's
        locks: about 0.2 ms, once per partition and batch in a window over 1,000 partitions)."""
        if ended:
            self.consumer.pause([TopicPartition(*where) for where in ended])
            self.paused.update(ended)

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
