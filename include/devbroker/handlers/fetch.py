"""Fetch, ListOffsets and DeleteRecords: reading the logs with Kafka's offset semantics.

Fetch is sessionless (the response's session id is 0, which tells clients that no session was
created, so they keep sending full fetches). It long-polls until min_bytes are available or
max_wait passes, woken by appends and by transaction markers (which move the last stable
offset). Like Kafka, only the first partition with data may return a batch larger than the
limits, and read_committed reads stop at the last stable offset and carry the aborted
transactions of the range returned.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from devbroker.handlers.meta import LEADER_EPOCH, leader_epoch_error
from devbroker.log import PartitionLog
from devbroker.registry import RequestContext, handles
from devbroker.wire import millis

READ_COMMITTED = 1

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


@handles(1, 4, 12)
async def fetch(ctx: RequestContext, request: Any) -> dict:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(millis(request.max_wait), 0) / 1000
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    while True:
        responses, total, errors, logs = _read(ctx, request, committed)
        remaining = deadline - loop.time()
        if total >= request.min_bytes or errors or remaining <= 0 or not logs or ctx.broker.closed:
            return {"error_code": ErrorCode.none, "session_id": 0, "responses": responses}
        waiters = [(partition_log, partition_log.waiter()) for partition_log in logs]
        try:
            await asyncio.wait(
                [w for _l, w in waiters], timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for partition_log, waiter in waiters:
                partition_log.unwait(waiter)


def _read(
    ctx: RequestContext, request: Any, committed: bool
) -> tuple[list[dict], int, bool, list[PartitionLog]]:
    topics = ctx.broker.topics
    budget = request.max_bytes
    total = 0
    errors = False
    min_one = True
    logs: list[PartitionLog] = []
    responses = []
    for topic_request in request.topics:
        parts = []
        for p in topic_request.partitions:
            partition_log = topics.get_log(topic_request.topic, p.partition)
            if partition_log is None:
                errors = True
                parts.append(_partition_error(p.partition, ErrorCode.unknown_topic_or_partition))
                continue
            code = leader_epoch_error(getattr(p, "current_leader_epoch", -1))
            if code != ErrorCode.none:
                errors = True
                parts.append(_partition_error(p.partition, code))
                continue
            hw = partition_log.high_watermark
            lso = partition_log.last_stable_offset
            offset = p.fetch_offset
            if offset < partition_log.log_start_offset or offset > hw:
                errors = True
                entry = _partition_error(p.partition, ErrorCode.offset_out_of_range)
                entry.update(
                    high_watermark=hw, last_stable_offset=lso, log_start_offset=partition_log.log_start_offset
                )
                parts.append(entry)
                continue
            logs.append(partition_log)
            upper = lso if committed else hw
            limit = min(p.partition_max_bytes, max(budget - total, 0))
            data, next_offset = (
                partition_log.read(offset, limit, upper, min_one) if offset < upper else (b"", offset)
            )
            if data:
                min_one = False
                total += len(data)
            aborted = None  # read_uncommitted: Kafka sends null
            if committed:
                in_range = partition_log.aborted_between(offset, next_offset) if data else []
                aborted = [{"producer_id": t.producer_id, "first_offset": t.first_offset} for t in in_range]
            parts.append(
                {
                    "partition_index": p.partition,
                    "error_code": ErrorCode.none,
                    "high_watermark": hw,
                    "last_stable_offset": lso,
                    "log_start_offset": partition_log.log_start_offset,
                    "aborted_transactions": aborted,
                    "preferred_read_replica": -1,
                    "records": data,
                }
            )
        responses.append({"topic": topic_request.topic, "partitions": parts})
    return responses, total, errors, logs


def _partition_error(index: int, code: ErrorCode) -> dict:
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "records": b"",
    }


@handles(2, 1, 10)
async def list_offsets(ctx: RequestContext, request: Any) -> dict:
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    topics_out = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            parts.append(_list_offset(ctx, topic.name, p, committed))
        topics_out.append({"name": topic.name, "partitions": parts})
    return {"topics": topics_out}


def _list_offset(ctx: RequestContext, topic: str, p: Any, committed: bool) -> dict:
    entry: dict[str, Any] = {
        "partition_index": p.partition_index,
        "timestamp": -1,
        "offset": -1,
        "leader_epoch": -1,
    }
    partition_log = ctx.broker.topics.get_log(topic, p.partition_index)
    if partition_log is None:
        entry["error_code"] = ErrorCode.unknown_topic_or_partition
        return entry
    code = leader_epoch_error(getattr(p, "current_leader_epoch", -1))
    if code != ErrorCode.none:
        entry["error_code"] = code
        return entry
    entry["error_code"] = ErrorCode.none
    upper = partition_log.last_stable_offset if committed else partition_log.high_watermark
    target = p.timestamp
    found: tuple[int, int] | None
    if target == LATEST:
        found = (upper, -1)
    elif target in (EARLIEST, EARLIEST_LOCAL):
        found = (partition_log.log_start_offset, -1)
    elif target == LATEST_TIERED:
        found = None
    elif target == MAX_TIMESTAMP:
        found = partition_log.max_timestamp_offset(partition_log.next_offset)
        if found is not None and found[0] >= upper:
            found = None
    elif target < 0:
        entry["error_code"] = ErrorCode.invalid_request
        return entry
    else:
        found = partition_log.offset_for_timestamp(target, upper)
    if found is not None:
        entry.update(offset=found[0], timestamp=found[1], leader_epoch=LEADER_EPOCH)
    return entry


@handles(21, 0, 2)
async def delete_records(ctx: RequestContext, request: Any) -> dict:
    topics = ctx.broker.topics
    out = []
    for topic in request.topics:
        parts = []
        known = topics.topics.get(topic.name)
        for p in topic.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index, "low_watermark": -1}
            partition_log = topics.get_log(topic.name, p.partition_index)
            if partition_log is None or known is None:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            elif not known.deletes:
                entry["error_code"] = ErrorCode.policy_violation
            else:
                offset = partition_log.high_watermark if p.offset == -1 else p.offset
                if offset < 0 or offset > partition_log.high_watermark:
                    entry["error_code"] = ErrorCode.offset_out_of_range
                else:
                    if partition_log.advance_start(offset):
                        topics.record_log_start(topic.name, p.partition_index, offset)
                    entry.update(error_code=ErrorCode.none, low_watermark=partition_log.log_start_offset)
            parts.append(entry)
        out.append({"name": topic.name, "partitions": parts})
    return {"topics": out}
