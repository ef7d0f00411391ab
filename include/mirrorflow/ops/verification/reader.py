"""Reading a partition's records in offset ranges, read_committed, one reusable consumer per
side for all the partitions of a worker."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from itertools import chain
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from mirrorflow.kafka import KafkaCallError
from mirrorflow.replicate.copy import CONSUMER_DEFAULTS

BATCH = 5000
FETCH_BYTES = 1 << 20  # per partition and fetch (see PartitionReader)
FETCH_WAIT_MS = 10  # how long the broker may hold a fetch that finds no new record
POLL_S = 0.05
IDLE_TIMEOUT_S = 30.0
_ERROR = Message.error


class PartitionReader:
    """One reusable read_committed consumer that reads offset ranges of one partition at a time
    (a worker verifies many partitions; a consumer per partition would cost a connection each)."""

    def __init__(self, config: Mapping[str, Any], what: str, group_id: str) -> None:
        # The copy's client settings; the group id is the one the ACL table grants. An offset
        # retention removed after the plan is an error event, never a silent jump.
        # Fetches differ from the copy's. A verification moves its consumer from range to
        # range (partition after partition, probe after probe, stretch after stretch), and each
        # move waited for the fetch under way: up to max.partition.fetch.bytes (the copy's
        # 8 MiB) read to be thrown away, or, at a partition's end, up to fetch.wait.max.ms
        # (500 ms) for records that were not coming, as no range reaches past a last stable
        # offset the plan saw. 1 MiB fetches stream a partition as fast as 8 MiB ones.
        self.consumer = Consumer(
            {
                **CONSUMER_DEFAULTS,
                **config,
                "max.partition.fetch.bytes": FETCH_BYTES,
                "fetch.wait.max.ms": FETCH_WAIT_MS,
                "group.id": group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "auto.offset.reset": "error",
            }
        )
        self.what = what

    def close(self) -> None:
        self.consumer.close()

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[Message]:
        """Records at offsets [start, end) in order; `end` must not be past the last stable
        offset (records there may never become readable)."""
        return chain.from_iterable(self._batches(BATCH, topic, partition, start, end))

    def peek(self, topic: str, partition: int, start: int, end: int) -> Iterator[Message]:
        """read()'s records one at a time, for a caller that wants only the first one or few (a
        binary search's probe), without turning a fetch's worth of records into messages."""
        return chain.from_iterable(self._batches(1, topic, partition, start, end))

    def first(self, topic: str, partition: int, start: int, end: int) -> Message | None:
        """The first record at or after `start` (before `end`), or None."""
        for message in self.peek(topic, partition, start, end):
            return message
        return None

    def _batches(
        self, most: int, topic: str, partition: int, start: int, end: int
    ) -> Iterator[list[Message]]:
        """The records at [start, end) in batches of at most `most`. A batch with no error
        event that ends before `end` (nearly all of them) passes as consume() returned it;
        the others are checked record by record."""
        if start >= end:
            return
        consumer = self.consumer
        consumer.assign([TopicPartition(topic, partition, start)])
        try:
            last_seen = time.monotonic()
            position = start  # offsets below this were read
            while True:
                # consume() waits out its timeout unless it gets as many messages as asked for
                # (an EOF event counts), so it is never asked for more than the offsets left.
                batch = consumer.consume(min(most, end - position), timeout=POLL_S)
                if not batch:
                    if time.monotonic() - last_seen > IDLE_TIMEOUT_S:
                        raise KafkaCallError(
                            f"reading {topic}-{partition} on the {self.what}: nothing arrived for "
                            f"{IDLE_TIMEOUT_S:.0f}s before offset {end}"
                        )
                    continue
                last_seen = time.monotonic()
                last = batch[-1]
                if last.error() is None and last.offset() + 1 < end and not any(map(_ERROR, batch)):
                    position = last.offset() + 1
                    yield batch
                    continue
                records: list[Message] = []
                done = False
                failure = None
                for message in batch:
                    error = message.error()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            failure = KafkaException(error)
                            break
                        if message.offset() >= end:
                            done = True
                            break
                        continue
                    offset = message.offset()
                    if offset >= end:
                        done = True
                        break
                    records.append(message)
                    position = offset + 1
                    if position >= end:
                        done = True
                        break
                if records:
                    yield records  # the records before a failure are compared, as they were read
                if failure is not None:
                    raise failure
                if done:
                    return
        finally:
            consumer.unassign()
