"""Produce: validate each partition's batch as Kafka's log layer does, then append it.

Order of checks follows Kafka (ReplicaManager, UnifiedLog, LogValidator, ProducerStateManager):
unknown partition, required acks vs min.insync.replicas, batch framing and CRC, size, control
batches from clients, transaction membership, timestamps, keys on compacted topics,
recompression to the topic's codec, then the producer's epoch and sequence.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from devbroker import batches
from devbroker.batches import CorruptBatch
from devbroker.configs import LONG_MAX
from devbroker.log import now_ms
from devbroker.producers import ProduceError
from devbroker.registry import RequestContext, handles
from devbroker.topics import Topic

log = logging.getLogger(__name__)


@handles(0, 3, 11)
async def produce(ctx: RequestContext, request: Any) -> dict | None:
    acks = request.acks
    now = now_ms()
    responses = []
    for topic_data in request.topic_data:
        topic = ctx.broker.topics.topics.get(topic_data.name)
        parts = []
        for partition_data in topic_data.partition_data:
            if acks not in (0, 1, -1):
                result = _error(partition_data.index, ErrorCode.invalid_required_acks)
            else:
                result = _append(
                    ctx,
                    topic,
                    partition_data.index,
                    partition_data.records,
                    acks,
                    request.transactional_id,
                    now,
                )
            parts.append(result)
        responses.append({"name": topic_data.name, "partition_responses": parts})
    if acks == 0:
        return None
    return {"responses": responses}


def _error(
    index: int, code: ErrorCode, message: str | None = None, record_errors: list | None = None
) -> dict:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        "error_message": message,
        "record_errors": record_errors or [],
    }


def _append(
    ctx: RequestContext,
    topic: Topic | None,
    index: int,
    records: bytes | None,
    acks: int,
    transactional_id: str | None,
    now: int,
) -> dict:
    if topic is None or not 0 <= index < topic.partition_count:
        return _error(index, ErrorCode.unknown_topic_or_partition)
    partition_log = topic.logs[index]
    view = topic.view
    if acks == -1 and int(view["min.insync.replicas"]) > 1:
        return _error(
            index,
            ErrorCode.not_enough_replicas,
            f"The size of the current ISR 1 is insufficient to satisfy the min.isr requirement of"
            f" {view['min.insync.replicas']} for partition {topic.name}-{index}",
        )
    data = records or b""
    try:
        spans = batches.split_batches(data)
    except CorruptBatch as exc:
        return _error(index, ErrorCode.corrupt_message, str(exc))
    if len(spans) != 1:
        return _error(
            index,
            ErrorCode.invalid_record,
            "Produce requests with version 3 and above must contain exactly one record batch per partition",
        )
    batch = bytes(data) if len(data) == spans[0][1] else bytes(data[: spans[0][1]])
    max_bytes = int(view["max.message.bytes"])
    if len(batch) > max_bytes:
        return _error(
            index,
            ErrorCode.message_too_large,
            f"The batch size of {len(batch)} bytes exceeds max.message.bytes={max_bytes} of {topic.name}",
        )
    try:
        info = batches.validate(batch)
    except CorruptBatch as exc:
        return _error(index, ErrorCode.corrupt_message, str(exc))
    if info.is_control:
        return _error(index, ErrorCode.invalid_record, "Clients are not allowed to write control records")
    if info.is_transactional:
        code = ctx.broker.transactions.verify_partition(
            transactional_id, info.producer_id, info.producer_epoch, topic.name, index
        )
        if code != ErrorCode.none:
            return _error(index, code)
    error = _check_timestamps(view, info, now, topic.name, index)
    if error is not None:
        return error
    target_codec = view["compression.type"]
    try:
        if topic.compacted:
            for n, record in enumerate(batches.iter_records(batch)):
                if record.key is None:
                    return _error(
                        index,
                        ErrorCode.invalid_record,
                        f"Compacted topic cannot accept message without key in topic partition {topic.name}-{index}.",
                        [{"batch_index": n, "batch_index_error_message": None}],
                    )
        if target_codec != "producer" and batches.CODEC_BY_TOPIC_CONFIG[target_codec] != info.codec:
            batch = batches.recompress(batch, batches.CODEC_BY_TOPIC_CONFIG[target_codec])
            info = batches.parse_header(batch)
    except CorruptBatch as exc:
        return _error(index, ErrorCode.corrupt_message, str(exc))
    append_time = -1
    if view["message.timestamp.type"] == "LogAppendTime":
        batch = batches.set_log_append_time(batch, now)
        info = batches.parse_header(batch)
        append_time = now
    try:
        duplicate = partition_log.producers.check(info)
    except ProduceError as exc:
        return _error(index, exc.code, exc.message)
    base = duplicate.first_offset if duplicate is not None else partition_log.append(batch, info, now)
    return {
        "index": index,
        "error_code": ErrorCode.none,
        "base_offset": base,
        "log_append_time": append_time,
        "log_start_offset": partition_log.log_start_offset,
    }


def _check_timestamps(view: Any, info: batches.BatchInfo, now: int, topic: str, index: int) -> dict | None:
    if view["message.timestamp.type"] != "CreateTime":
        return None
    before = int(view["message.timestamp.before.max.ms"])
    after = int(view["message.timestamp.after.max.ms"])
    difference = int(view["message.timestamp.difference.max.ms"])
    if difference != LONG_MAX:
        before = min(before, difference)
        after = min(after, difference)
    for ts in (info.base_timestamp, info.max_timestamp):
        if ts < 0:
            continue
        if (before != LONG_MAX and ts < now - before) or (after != LONG_MAX and ts > now + after):
            return _error(
                index,
                ErrorCode.invalid_timestamp,
                f"Timestamp {ts} of message is out of range. The timestamp should be within [{now - before},"
                f" {now + after}] for topic partition {topic}-{index}",
                [{"batch_index": 0, "batch_index_error_message": None}],
            )
    return None
