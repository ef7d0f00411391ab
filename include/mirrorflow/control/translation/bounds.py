"""Where a pass's partitions start and end, and how many records a group has left in them.

Both are measured once per pass in batched calls (one ListOffsets per spec, one read for all
partitions), never per partition: a pass over 20,000 partitions must not cost 20,000 round trips.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from mirrorflow.kafka import POLL_S, TIMEOUT_S, admin_client, reader
from mirrorflow.kafka_offsets import list_offsets


def partition_bounds(
    admin_config: Mapping[str, Any], parts: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], tuple[int, int]]:
    """(log start, last stable offset) of each partition that exists; missing ones are left out."""
    return measure_bounds(admin_client(admin_config), parts)


def measure_bounds(
    admin: AdminClient, parts: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], tuple[int, int]]:
    """partition_bounds through an admin client the caller keeps (a pass asks it more)."""
    wanted = sorted(set(parts))
    if not wanted:
        return {}
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    existing = [
        (t, p) for t, p in wanted if t in topics and topics[t].error is None and p in topics[t].partitions
    ]
    earliest = list_offsets(admin, existing, OffsetSpec.earliest())
    stable = list_offsets(admin, existing, OffsetSpec.latest(), read_committed=True)
    return {tp: (earliest[tp], stable[tp]) for tp in existing}


# Records left for a group are counted by reading the partition when the stretch is short: the
# offset difference also counts transaction markers (a group that read everything of an
# exactly-once copy would show 1 left) and aborted records. Longer stretches, or more than the
# budget in one call, keep the offset difference.
RECORDS_LEFT_SPAN = 1_000
RECORDS_LEFT_BUDGET = 1_000_000


def records_left(
    consumer_config: Mapping[str, Any],
    positions: Iterable[tuple[str, int, int]],
    bounds: Mapping[tuple[str, int], tuple[int, int]],
    *,
    span_limit: int = RECORDS_LEFT_SPAN,
    budget: int = RECORDS_LEFT_BUDGET,
    timeout_s: float = TIMEOUT_S,
) -> dict[tuple[str, int, int], int]:
    """How many records a read_committed consumer at each (topic, partition, offset) reads before
    the partition's last stable offset in `bounds`: exact, markers and aborted records not
    counted. Positions at or past the end are 0 without a read. The rest is counted from one
    read per partition, from its lowest position, with one consumer for all partitions, for
    stretches of at most `span_limit` offsets and `budget` offsets in all; positions left out of
    the answer are the caller's to estimate (the offset difference)."""
    wanted: dict[tuple[str, int], set[int]] = {}
    for topic, partition, offset in positions:
        if (topic, partition) in bounds:
            wanted.setdefault((topic, partition), set()).add(offset)
    out: dict[tuple[str, int, int], int] = {}
    plans: dict[tuple[str, int], tuple[int, list[int]]] = {}
    spent = 0
    for tp in sorted(wanted):
        low, end = bounds[tp]
        pending = []
        for offset in sorted(wanted[tp]):
            if max(offset, low) >= end:
                out[(*tp, offset)] = 0
            else:
                pending.append(offset)
        if not pending:
            continue
        start = max(pending[0], low)
        if end - start > span_limit or spent + end - start > budget:
            continue
        spent += end - start
        plans[tp] = (start, pending)
    if not plans:
        return out
    # counts[tp][i]: records at offsets from pending[i] up to the next position.
    counts = {tp: [0] * len(pending) for tp, (_, pending) in plans.items()}
    open_parts = set(plans)
    consumer = reader(consumer_config)
    try:
        consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in plans.items()])
        deadline = time.monotonic() + timeout_s
        while open_parts and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=POLL_S):
                tp = (message.topic(), message.partition())
                if tp not in open_parts:
                    continue
                end = bounds[tp][1]
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF and message.offset() >= end:
                        open_parts.discard(tp)
                    continue
                if message.offset() >= end:
                    open_parts.discard(tp)
                    continue
                pending = plans[tp][1]
                at = bisect_right(pending, message.offset()) - 1
                if at >= 0:
                    counts[tp][at] += 1
                if message.offset() + 1 >= end:
                    open_parts.discard(tp)
    finally:
        consumer.close()
    for tp, (_, pending) in plans.items():
        if tp in open_parts:
            continue  # not read to its end in time: left to the caller's estimate
        left = 0
        for i in range(len(pending) - 1, -1, -1):
            left += counts[tp][i]
            out[(*tp, pending[i])] = left
    return out
