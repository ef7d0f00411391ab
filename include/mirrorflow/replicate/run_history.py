"""A flow's newest run records of chosen kinds, for the status (last run, verifications,
migrations) and for a run's report (the last run that copied anything); and the reader of
several small partitions' ranges both use.

The run-records topic keeps a month of plans and reports, so it is read backwards from its
end in widening windows instead of from the beginning, once for all the kinds wanted, and only
until each has as many records as asked for (or the topic's start is reached).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from mirrorflow.kafka import KafkaCallError, reader
from mirrorflow.kafka_offsets import watermarks
from mirrorflow.replicate.run_reading import parse_key, read_run_record_at
from mirrorflow.replicate.runs import CHUNK_HEADER, RUNS_TOPIC, RunRecordMissing

log = logging.getLogger("mirrorflow.status")

TIMEOUT_S = 15.0
FIRST_SCAN = 64  # run records read back from the end before widening the search
STATUS_FETCH_WAIT_MS = 20

Found = list[tuple[dict[str, Any], int]]  # (body, when written in ms), newest first


def runs_bounds(consumer_config: dict[str, Any], timeout_s: float) -> tuple[int, int] | None:
    """(low, high) watermarks of the run-records topic; None when the cluster does not have it."""
    consumer = reader(consumer_config)
    try:
        meta = consumer.list_topics(RUNS_TOPIC, timeout=timeout_s).topics.get(RUNS_TOPIC)
        if meta is None or meta.error is not None:
            return None
        return watermarks(consumer, RUNS_TOPIC, 0, timeout_s=timeout_s)
    finally:
        consumer.close()


def read_ranges(
    consumer_config: dict[str, Any], ranges: dict[tuple[str, int], tuple[int, int]], idle_timeout_s: float
) -> Iterator[Message]:
    """Records of several partitions, each from its start up to its end (exclusive), with one
    consumer: status reads many tiny topics, and a consumer per partition costs a fetch wait each."""
    pending = {tp for tp, (start, end) in ranges.items() if start < end}
    if not pending:
        return
    # The reads are short and end at known offsets: an empty fetch held for the default 500 ms
    # would only delay the end-of-partition signal.
    consumer = reader({**consumer_config, "fetch.wait.max.ms": STATUS_FETCH_WAIT_MS})
    try:
        consumer.assign([TopicPartition(t, p, ranges[(t, p)][0]) for t, p in sorted(pending)])
        last_seen = time.monotonic()
        while pending:
            message = consumer.poll(0.2)
            if message is None:
                if time.monotonic() - last_seen > idle_timeout_s:
                    names = ", ".join(f"{t}-{p}" for t, p in sorted(pending))
                    raise KafkaCallError(f"{names} stopped before the offsets to read up to")
                continue
            last_seen = time.monotonic()
            tp = (message.topic(), message.partition())
            error = message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise KafkaException(error)
            end = ranges[tp][1]
            if error is None and message.offset() < end:
                yield message
            if message.offset() + (0 if error is not None else 1) >= end:
                pending.discard(tp)
    finally:
        consumer.close()


def newest_run_records(
    consumer_config: dict[str, Any],
    flow: str,
    wanted: Mapping[str, int],
    *,
    timeout_s: float = TIMEOUT_S,
) -> dict[str, Found]:
    """Up to `wanted[kind]` of the newest whole run records of each kind of `flow`, newest first,
    with when each was written; a kind with none is left out.

    Summaries are small enough to be single records (old and new alike); one stored in chunks is
    put together from its first chunk, and one that cannot be (its writer stopped mid-way) is
    passed over for the one before."""
    newest: dict[str, Found] = {}
    bounds = runs_bounds(consumer_config, timeout_s)
    if bounds is None:
        return newest
    low, high = bounds

    def missing() -> bool:
        return any(len(newest.get(kind, ())) < count for kind, count in wanted.items())

    window = FIRST_SCAN
    end = high
    while end > low and missing():
        start = max(low, end - window)
        # (offset, kind, body or None for a chunked one to put together, timestamp), oldest first
        found: list[tuple[int, str, str | None, int]] = []
        for message in read_ranges(consumer_config, {(RUNS_TOPIC, 0): (start, end)}, timeout_s):
            name, _, kind, chunked = parse_key(message)
            if name != flow or kind not in wanted:
                continue
            if not chunked:
                found.append((message.offset(), kind, message.value().decode(), message.timestamp()[1]))
            elif dict(message.headers() or ()).get(CHUNK_HEADER) == b"0":
                found.append((message.offset(), kind, None, message.timestamp()[1]))
        for offset, kind, body, timestamp_ms in reversed(found):
            kept = newest.setdefault(kind, [])
            if len(kept) >= wanted[kind]:
                continue
            if body is None:
                try:
                    body = read_run_record_at(consumer_config, offset).body
                except RunRecordMissing as exc:
                    log.warning("%s", exc)
                    continue
            kept.append((json.loads(body), timestamp_ms))
        end = start
        window *= 4
    return {kind: found for kind, found in newest.items() if found}
