"""Log compaction for cleanup.policy=compact, following Kafka's LogCleaner.

Only closed segments below the first uncleanable offset are cleaned (the active segment, the
last stable offset and min.compaction.lag.ms bound it). The latest record per key wins,
offsets keep their gaps, records of aborted transactions go, and tombstones survive one
delete.retention.ms: the first pass that keeps a tombstone stamps the batch's delete horizon
(KIP-534: attribute bit 6, base timestamp = horizon) and a later pass past it drops them.
Rewritten batches keep their base offset, last offset delta, producer fields and codec.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from devbroker import batches
from devbroker.batches import BatchInfo
from devbroker.log import PartitionLog, Segment

if TYPE_CHECKING:
    from devbroker.broker import Broker
    from devbroker.topics import Topic

log = logging.getLogger(__name__)


def first_uncleanable_offset(partition_log: PartitionLog, now: int, *, lag_ms: int) -> int:
    """Kafka's bound: the active segment, the first unstable offset and min.compaction.lag.ms."""
    bound = min(partition_log.segments[-1].base_offset, partition_log.last_stable_offset)
    if lag_ms > 0:
        for _segment, _i, info in partition_log.iter_batches(partition_log.log_start_offset, bound):
            if info.max_timestamp > now - lag_ms:
                return min(bound, info.base_offset)
    return bound


def _cleanable_segments(partition_log: PartitionLog, upper: int) -> int:
    """How many leading closed segments lie entirely below `upper` (the next one starts at or
    before it)."""
    count = 0
    for following in partition_log.segments[1:]:
        if following.base_offset > upper:
            break
        count += 1
    return count


def dirty_ratio(partition_log: PartitionLog, count: int) -> float:
    total = sum(s.size for s in partition_log.segments[:count])
    if not total:
        return 0.0
    dirty = sum(
        s.size for s in partition_log.segments[:count] if (s.next_offset or 0) > partition_log.dirty_from
    )
    return dirty / total


def clean_eligible(broker: Broker, now: int) -> None:
    """One cleaner pass: every compacted partition whose dirty ratio reached its threshold."""
    for topic, partition_log in broker.topics.all_logs():
        if not topic.compacted:
            continue
        upper = first_uncleanable_offset(partition_log, now, lag_ms=int(topic.view["min.compaction.lag.ms"]))
        count = _cleanable_segments(partition_log, upper)
        if not count:
            continue
        max_lag = int(topic.view["max.compaction.lag.ms"])
        overdue = any(
            s.next_offset is not None
            and s.next_offset > partition_log.dirty_from
            and now - s.created_ms > max_lag
            for s in partition_log.segments[:count]
        )
        if overdue or dirty_ratio(partition_log, count) >= float(topic.view["min.cleanable.dirty.ratio"]):
            clean(topic, partition_log, count, now)


def compact_now(broker: Broker, target: str, now: int) -> list[str]:
    """Roll and clean the compacted topics named by `target` (`*` = all); returns their names."""
    done = []
    for topic in list(broker.topics.topics.values()):
        if not topic.compacted or (target != "*" and topic.name != target):
            continue
        for partition_log in topic.logs:
            partition_log.roll()
            upper = first_uncleanable_offset(
                partition_log, now, lag_ms=int(topic.view["min.compaction.lag.ms"])
            )
            count = _cleanable_segments(partition_log, upper)
            if count:
                clean(topic, partition_log, count, now)
        done.append(topic.name)
    return done


def _aborted_ranges(partition_log: PartitionLog) -> dict[int, list[tuple[int, int]]]:
    ranges: dict[int, list[tuple[int, int]]] = {}
    for txn in partition_log.aborted:
        ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return ranges


def _in_aborted(ranges: dict[int, list[tuple[int, int]]], info: BatchInfo) -> bool:
    return any(first <= info.base_offset < last for first, last in ranges.get(info.producer_id, ()))


def clean(topic: Topic, partition_log: PartitionLog, count: int, now: int) -> None:
    """Compact the first `count` segments of a partition against everything below the bound."""
    segments = partition_log.segments[:count]
    end_offset = max(s.next_offset or s.base_offset for s in segments)
    latest: dict[bytes, int] = {}
    aborted = _aborted_ranges(partition_log)
    for segment in segments:
        for i, info in enumerate(segment.infos):
            if info.is_control or (info.is_transactional and _in_aborted(aborted, info)):
                continue
            for record in batches.iter_records(segment.batch_bytes(i)):
                if record.key is not None:
                    latest[record.key] = info.base_offset + record.offset_delta
    horizon = now + int(topic.view["delete.retention.ms"])
    before = sum(s.size for s in segments)
    for segment in segments:
        cleaned = _clean_segment(segment, latest, aborted, now, horizon)
        partition_log.replace_segments_at(partition_log.segments.index(segment), cleaned)
    partition_log.dirty_from = max(partition_log.dirty_from, end_offset)
    after = sum(s.size for s in partition_log.segments if s.base_offset < end_offset)
    log.info(
        "compacted %s-%d below offset %d: %d -> %d bytes",
        topic.name,
        partition_log.partition,
        end_offset,
        before,
        after,
    )


def _clean_segment(
    segment: Segment,
    latest: dict[bytes, int],
    aborted: dict[int, list[tuple[int, int]]],
    now: int,
    horizon: int,
) -> list[tuple[bytes, BatchInfo]]:
    out: list[tuple[bytes, BatchInfo]] = []
    for i, info in enumerate(segment.infos):
        data = segment.batch_bytes(i)
        if info.is_control:
            out.append((data, info))
            continue
        if info.is_transactional and _in_aborted(aborted, info):
            continue
        has_horizon = bool(info.attributes & batches.DELETE_HORIZON_BIT)
        records = list(batches.iter_records(data))
        kept = []
        tombstones = False
        for record in records:
            offset = info.base_offset + record.offset_delta
            if record.key is not None and latest.get(record.key, offset) > offset:
                continue
            if record.value is None:
                if has_horizon and now >= info.base_timestamp:
                    continue
                tombstones = True
            kept.append(record)
        if not kept:
            continue
        stamp = tombstones and not has_horizon
        if len(kept) == len(records) and not stamp:
            out.append((data, info))
            continue
        out.append(_rebuild(data, info, kept, horizon if stamp else None))
    return out


def _rebuild(
    data: bytes, info: BatchInfo, kept: list[batches.Record], horizon: int | None
) -> tuple[bytes, BatchInfo]:
    attributes = info.attributes
    base_timestamp = info.base_timestamp
    if horizon is not None:
        for record in kept:
            record.timestamp_delta = info.base_timestamp + record.timestamp_delta - horizon
        attributes |= batches.DELETE_HORIZON_BIT
        base_timestamp = horizon
    xerial = info.codec == batches.SNAPPY and batches.is_xerial(data[batches.HEADER_SIZE :])
    if info.log_append_time:
        max_timestamp = info.max_timestamp
    else:
        max_timestamp = max(base_timestamp + r.timestamp_delta for r in kept)
    rebuilt = batches.build_batch(
        base_offset=info.base_offset,
        records=kept,
        attributes=attributes,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=info.producer_id,
        producer_epoch=info.producer_epoch,
        base_sequence=info.base_sequence,
        last_offset_delta=info.last_offset - info.base_offset,
        xerial=xerial,
    )
    return rebuilt, batches.parse_header(rebuilt)
