"""The last committed records of many partitions, read through one consumer: what a plan reads
of remote partitions that no progress accounts for (found_copies.py), and what a sweep reads of
the remote partitions a hanging progress transaction names (landed.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from mirrorflow.kafka import reader

Where = tuple[str, int]

READ_S = 30.0
"""How long one batched read may take."""
FIRST_WINDOW = 2
"""Offsets read back from a remote partition's last stable offset first: the last record of a
transactional copy sits right before its commit marker."""


@dataclass(frozen=True)
class Candidate:
    topic: str
    partition: int
    remote_topic: str
    remote_low: int
    remote_stable: int


def scan_ranges(
    config: Mapping[str, Any],
    ranges: Mapping[Where, tuple[int, int]],
    take: Callable[[Where, Message], bool],
    *,
    timeout_s: float = READ_S,
) -> set[Where]:
    """Read each partition's [start, end) as a read_committed reader sees it, all partitions
    through one consumer, handing each record to `take` until it says the partition is decided
    (True) or the range's end (or the last stable offset) is reached; returns the partitions
    neither decided nor read to their end in time."""
    pending = {where for where, (start, end) in ranges.items() if end > start}
    if not pending:
        return pending
    consumer = reader(config)
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([TopicPartition(t, p, ranges[(t, p)][0]) for t, p in pending])
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=0.2):
                where = (message.topic(), message.partition())
                if where not in pending:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    pending.discard(where)  # at the last stable offset
                    continue
                end = ranges[where][1]
                if (message.offset() < end and take(where, message)) or message.offset() + 1 >= end:
                    pending.discard(where)
    finally:
        consumer.close()
    return pending


def read_tails(
    config: Mapping[str, Any], ranges: Mapping[Where, tuple[int, int]], *, timeout_s: float = READ_S
) -> tuple[dict[Where, Message], set[Where]]:
    """The last record a read_committed reader sees in each partition's [start, end), all
    partitions through one consumer; and the partitions not read to their end in time. A
    partition whose range holds no committed record is in neither."""
    last: dict[Where, Message] = {}

    def keep(where: Where, message: Message) -> bool:
        last[where] = message
        return False

    return last, scan_ranges(config, ranges, keep, timeout_s=timeout_s)


def last_committed(
    config: Mapping[str, Any], candidates: list[Candidate], *, timeout_s: float = READ_S
) -> tuple[dict[Where, Message], set[Where]]:
    """Each remote partition's last committed record (keyed by its source partition), looked for
    in windows before its last stable offset, each ten times the one before (aborted records and
    markers lie between); and those not read in time. One with none committed is in neither."""
    found: dict[Where, Message] = {}
    unread: set[Where] = set()
    pending = {(c.topic, c.partition): c for c in candidates}
    window = FIRST_WINDOW
    deadline = time.monotonic() + timeout_s
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            unread.update(pending)
            break
        starts = {where: max(c.remote_low, c.remote_stable - window) for where, c in pending.items()}
        tails, late = read_tails(
            config,
            {(c.remote_topic, c.partition): (starts[where], c.remote_stable) for where, c in pending.items()},
            timeout_s=left,
        )
        for where, c in list(pending.items()):
            remote = (c.remote_topic, c.partition)
            if remote in tails:
                found[where] = tails[remote]
            elif remote in late:
                unread.add(where)
            elif starts[where] > c.remote_low:
                continue  # look further back
            del pending[where]
        window *= 10
    return found, unread
