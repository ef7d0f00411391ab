"""Probes of a remote partition: which of this flow's records lie at or after a target offset.

A probe assigns one read_committed consumer at an offset and reads until it meets a record this
flow copied (provenance: the path ends with the flow's source alias, source topic and partition
match), the search limit, or the partition end. Everything a fetch returns is kept, with the
offset interval it covers, so later probes inside a covered interval are answered from memory:
1,000 groups on one partition cost the fetches of one binary search, not 1,000.

Aborted records and transaction markers are invisible to the consumer, and records of other
writers (aggregation, identity active/active) are read but never match, so covered intervals
hold no flow record other than the ones kept (coverage.py, which also notes where they are out
of source order).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from mirrorflow.control.translation.coverage import Covered, Origin
from mirrorflow.control.translation.rule import FlowRecord
from mirrorflow.kafka import KafkaCallError

BATCH = 500
DRAIN = 20_000
BACKFILL = 1_000
POLL_S = 0.1
PROBE_TIMEOUT_S = 60.0
# warm(): records read ahead per partition, and partitions assigned to the consumer at a time
# (bounding what one batched read holds: at most WARM_PARTITIONS fetch buffers).
WARM_SPAN = 64
WARM_PARTITIONS = 1000
WARM_GAP = 256  # points closer than this share one read-ahead (what lies between is read and kept)


def _warm_spans(offsets: list[int], end: int) -> list[tuple[int, int]]:
    """Stretches to read ahead for probe points `offsets` (sorted) of a partition ending at `end`:
    WARM_SPAN offsets from each point, merged where they lie at most WARM_GAP apart, so nearby
    points share one read and far ones do not pull in everything between them."""
    spans: list[tuple[int, int]] = []
    for offset in offsets:
        stop = min(end, offset + WARM_SPAN)
        if spans and offset - spans[-1][1] <= WARM_GAP:
            spans[-1] = (spans[-1][0], max(spans[-1][1], stop))
        else:
            spans.append((offset, stop))
    return spans


def _batches(consumer: Consumer, stalled: Callable[[str], str]) -> Iterator[list[Message]]:
    """The consumer's batches, for as long as the caller reads them; once nothing has come for
    PROBE_TIMEOUT_S, a KafkaCallError saying what `stalled` makes of "returned nothing for ..."."""
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    while True:
        batch = consumer.consume(BATCH, timeout=POLL_S)
        if batch:
            deadline = time.monotonic() + PROBE_TIMEOUT_S
            yield batch
        elif time.monotonic() > deadline:
            silent = f"returned nothing for {PROBE_TIMEOUT_S:.0f}s"
            raise KafkaCallError(f"{stalled(silent)}; is the cluster reachable?")


@dataclass
class _Warming:
    """One partition's read-ahead in Prober.warm: [start, stop), the last offset seen, and the
    flow records found."""

    origin: Origin
    start: int
    stop: int
    last: int = -1
    records: list[FlowRecord] = field(default_factory=list)


class Prober:
    """Cached probes of one cluster's partitions; one consumer, closed with the prober."""

    def __init__(self, consumer_config: Mapping[str, Any]) -> None:
        self._config = {
            **consumer_config,
            "group.id": consumer_config.get("group.id", "mirrorflow-translate"),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 10,
        }
        self._consumer: Consumer | None = None
        self._covered: dict[tuple[str, int, Origin], Covered] = {}
        self._first_owned: dict[tuple[str, int, Origin, int], bool | None] = {}
        self.fetches = 0
        self.lookups = 0

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __enter__(self) -> Prober:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def first(
        self, topic: str, partition: int, origin: Origin, offset: int, limit: int, end: int | None = None
    ) -> FlowRecord | None:
        """The first record of `origin` in `topic`-`partition` at offset >= `offset` and < `limit`.

        `end` (the partition end the caller measured, >= `limit`) lets a fetch keep reading past
        `limit` into the cache, so the next probes of the partition need no fetch.
        """
        self.lookups += 1
        horizon = limit if end is None else max(limit, end)
        covered = self._covered.setdefault((topic, partition, origin), Covered())
        while offset < limit:
            at = covered.interval_at(offset)
            if at is not None:
                covered_end = covered.ends[at]
                record = covered.first_record(offset, min(covered_end, limit))
                if record is not None:
                    return record
                offset = covered_end
                continue
            following = covered.next_start(offset)
            stop = horizon if following is None else min(horizon, following)
            # Read a little before the probe too: groups spread over a partition then cost a
            # few fetches in all instead of one for every new lowest offset.
            start = max(0, covered.end_before(offset), offset - BACKFILL)
            read_end, records = self._read(topic, partition, origin, start, stop)
            covered.add(start, read_end, records)
        return None

    def warm(self, probes: Iterable[tuple[str, int, Origin, int, int]]) -> None:
        """Read ahead, for many partitions at once, what the coming probes will ask: each
        (topic, partition, origin, offset, end) reads [offset, offset + WARM_SPAN) (at most to
        `end`, the partition end the caller measured) into the cache `first` answers from.

        One consumer assigned to up to WARM_PARTITIONS partitions fetches them together, a few
        requests per broker, where probing them one by one costs a round trip each (about
        100 ms): a checkpoint pass over 2,000 partitions spent most of its 200 s there."""
        # Every probe point of a partition, not only the first: groups at different offsets of one
        # partition each probe near their own offset-sync, and a point the read-ahead missed costs
        # a round trip of its own later (a checkpoint pass at 2,000 partitions spent half its
        # time on such reads).
        points: dict[tuple[str, int], tuple[Origin, int, set[int]]] = {}
        for topic, partition, origin, offset, end in probes:
            covered = self._covered.setdefault((topic, partition, origin), Covered())
            if covered.interval_at(offset) is not None or offset >= end:
                continue
            entry = points.setdefault((topic, partition), (origin, end, set()))
            entry[2].add(offset)
        rounds: list[dict[tuple[str, int], _Warming]] = []
        for key, (origin, end, offsets) in points.items():
            covered = self._covered[(key[0], key[1], origin)]
            for index, (start, stop) in enumerate(_warm_spans(sorted(offsets), end)):
                following = covered.next_start(start)
                if following is not None:
                    stop = min(stop, following)
                if start < stop:
                    while len(rounds) <= index:
                        rounds.append({})
                    rounds[index][key] = _Warming(origin, start, stop, last=start - 1)
        # One consumer reads up to WARM_PARTITIONS partitions at a time; a partition whose points
        # lie far apart is read in one more round per stretch.
        for wanted in rounds:
            keys = sorted(wanted)
            for first in range(0, len(keys), WARM_PARTITIONS):
                self._warm_chunk({key: wanted[key] for key in keys[first : first + WARM_PARTITIONS]})

    def _warm_chunk(self, wanted: dict[tuple[str, int], _Warming]) -> None:
        consumer = self._fetch_from([TopicPartition(t, p, w.start) for (t, p), w in wanted.items()])
        pending = set(wanted)

        def stalled(silent: str) -> str:
            return f"{len(pending)} partition(s) {silent} (first: {'-'.join(map(str, min(pending)))})"

        for batch in _batches(consumer, stalled):
            for message in batch:
                key = (message.topic(), message.partition())
                if key not in pending:
                    continue
                warming = wanted[key]
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    if message.offset() > warming.last:
                        pending.discard(key)  # nothing visible between the last record and the end
                    continue
                offset = message.offset()
                if offset < warming.start:
                    continue
                if offset < warming.stop:
                    warming.last = offset
                    source_offset = warming.origin.owns(message)
                    if source_offset is not None:
                        warming.records.append(FlowRecord(offset, source_offset))
                if offset + 1 >= warming.stop:
                    pending.discard(key)
            if not pending:
                break
        for (topic, partition), warming in wanted.items():
            covered = self._covered[(topic, partition, warming.origin)]
            covered.add(warming.start, warming.stop, warming.records)

    def _fetch_from(self, partitions: list[TopicPartition]) -> Consumer:
        """The prober's consumer, assigned to read `partitions` from their offsets: one fetch."""
        self.fetches += 1
        if self._consumer is None:
            self._consumer = Consumer(self._config)
        self._consumer.assign(partitions)
        return self._consumer

    def inverted_at(self, topic: str, partition: int, origin: Origin) -> int:
        """Highest target offset of a flow record read so far that a later one does not rise
        above in source offset; -1 if every record read so far was in order."""
        covered = self._covered.get((topic, partition, origin))
        return -1 if covered is None else covered.inverted_at

    def scan(self, topic: str, partition: int, origin: Origin, start: int, end: int) -> Iterator[FlowRecord]:
        """Every flow record in [start, end), in target order: one sequential read, nothing kept."""
        if start >= end:
            return
        consumer = self._fetch_from([TopicPartition(topic, partition, start)])
        last = start - 1

        def stalled(silent: str) -> str:
            return f"{topic}-{partition} {silent} at offset {last + 1} (reading it through to {end})"

        for batch in _batches(consumer, stalled):
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    if message.partition() == partition and message.offset() > last:
                        return  # nothing visible between the last record and the end
                    continue
                offset = message.offset()
                if offset < start or message.topic() != topic or message.partition() != partition:
                    continue
                if offset >= end:
                    return
                last = offset
                source_offset = origin.owns(message)
                if source_offset is not None:
                    yield FlowRecord(offset, source_offset)
            if last + 1 >= end:
                return

    def copied_by(self, topic: str, partition: int, origin: Origin, offset: int, end: int) -> bool | None:
        """Whether the first record at or after `offset` (before `end`) was copied by `origin`'s
        flow; None if no record is visible there.

        Translation asks this of the record an offset-sync points to. mirrorflow's syncs point to
        records it stamped with provenance; MirrorMaker 2's point to records it copied as they
        were, without one. The exact search only sees stamped records, so on a partition MM2
        copied it would take MM2's records for another writer's and skip them.
        """
        if self.first(topic, partition, origin, offset, offset + 1) is not None:
            return True  # usually answered from what earlier probes read
        key = (topic, partition, origin, offset)
        if key not in self._first_owned:
            self._first_owned[key] = self._first_visible_copied_by(topic, partition, origin, offset, end)
        return self._first_owned[key]

    def _first_visible_copied_by(
        self, topic: str, partition: int, origin: Origin, offset: int, end: int
    ) -> bool | None:
        """The record at `offset` was not the flow's (or is gone): look at the first visible one."""
        if offset >= end:
            return None
        consumer = self._fetch_from([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        while True:
            message = consumer.poll(POLL_S)
            if message is None:
                if time.monotonic() > deadline:
                    raise KafkaCallError(
                        f"{topic}-{partition} returned nothing for {PROBE_TIMEOUT_S:.0f}s at offset {offset}; "
                        "is the cluster reachable?"
                    )
                continue
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                if message.partition() == partition and message.offset() >= offset:
                    return None
                continue
            if message.topic() != topic or message.partition() != partition or message.offset() < offset:
                continue
            if message.offset() >= end:
                return None
            return origin.owns(message) is not None

    def _read(
        self, topic: str, partition: int, origin: Origin, start: int, stop: int
    ) -> tuple[int, list[FlowRecord]]:
        """Read from `start` until a flow record, `stop` or the partition end; the covered end and records.

        Once a flow record is found, whatever the consumer has already fetched is kept too (it
        costs no round trip), up to `DRAIN` records, so neighbouring probes hit the cache.
        """
        consumer = self._fetch_from([TopicPartition(topic, partition, start)])
        records: list[FlowRecord] = []
        last = start - 1
        read = 0
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        while True:
            if records:
                batch = consumer.consume(BATCH, timeout=0)
                if not batch or read >= DRAIN:
                    return last + 1, records
            else:
                first = consumer.poll(POLL_S)
                if first is None:
                    if time.monotonic() > deadline:
                        raise KafkaCallError(
                            f"{topic}-{partition} returned nothing for {PROBE_TIMEOUT_S:.0f}s at offset "
                            f"{last + 1} (reading toward {stop}); is the cluster reachable?"
                        )
                    continue
                batch = [first, *consumer.consume(BATCH, timeout=0)]
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    if message.partition() == partition and message.offset() > last:
                        # Nothing visible between the last record and the end (the pass's
                        # limits never lie past the end it measured).
                        return stop, records
                    continue
                offset = message.offset()
                if offset < start or message.topic() != topic or message.partition() != partition:
                    continue
                if offset >= stop:
                    return stop, records
                last = offset
                read += 1
                source_offset = origin.owns(message)
                if source_offset is not None:
                    records.append(FlowRecord(offset, source_offset))
            if last + 1 >= stop:
                return stop, records
