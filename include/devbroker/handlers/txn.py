"""Idempotence and transactions: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
TxnOffsetCommit, and the admin views DescribeProducers, DescribeTransactions, ListTransactions.

Versions stop before the KIP-890 "transaction version 2" forms (InitProducerId 5, EndTxn 4,
AddPartitionsToTxn 4): clients then use the classic protocol, which this coordinator follows.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from kio.schema.errors import ErrorCode

from devbroker import transactions as txn
from devbroker.log import now_ms
from devbroker.registry import RequestContext, handles
from devbroker.transactions import TxnError
from devbroker.wire import millis

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _timestamp(millis_since_epoch: int) -> datetime.datetime:
    """A datetime for kio's non-nullable timestamp fields, -1 (unknown) included."""
    return _EPOCH + datetime.timedelta(milliseconds=millis_since_epoch)


@handles(22, 0, 4)
async def init_producer_id(ctx: RequestContext, request: Any) -> dict:
    try:
        pid, epoch = ctx.broker.transactions.init_producer_id(
            request.transactional_id,
            millis(request.transaction_timeout),
            getattr(request, "producer_id", -1),
            getattr(request, "producer_epoch", -1),
        )
    except TxnError as exc:
        return {"error_code": exc.code, "producer_id": -1, "producer_epoch": -1}
    return {"error_code": ErrorCode.none, "producer_id": pid, "producer_epoch": epoch}


@handles(24, 0, 3)
async def add_partitions_to_txn(ctx: RequestContext, request: Any) -> dict:
    topics = ctx.broker.topics
    wanted: list[tuple[str, int]] = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    unknown = {tp for tp in wanted if topics.get_log(*tp) is None}
    if unknown:
        codes = {
            tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
            for tp in wanted
        }
    else:
        try:
            ctx.broker.transactions.add_partitions(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                set(wanted),
            )
            code = ErrorCode.none
        except TxnError as exc:
            code = exc.code
        codes = dict.fromkeys(wanted, code)
    by_topic: dict[str, list[dict]] = {}
    for (name, p), code in codes.items():
        by_topic.setdefault(name, []).append({"partition_index": p, "partition_error_code": code})
    return {
        "results_by_topic_v3_and_below": [
            {"name": name, "results_by_partition": parts} for name, parts in by_topic.items()
        ]
    }


@handles(25, 0, 3)
async def add_offsets_to_txn(ctx: RequestContext, request: Any) -> dict:
    try:
        ctx.broker.transactions.add_group(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
        )
    except TxnError as exc:
        return {"error_code": exc.code}
    return {"error_code": ErrorCode.none}


@handles(26, 0, 3)
async def end_txn(ctx: RequestContext, request: Any) -> dict:
    try:
        ctx.broker.transactions.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed)
        )
    except TxnError as exc:
        return {"error_code": exc.code}
    return {"error_code": ErrorCode.none}


@handles(28, 0, 3)
async def txn_offset_commit(ctx: RequestContext, request: Any) -> dict:
    code = ctx.broker.transactions.check_offsets_commit(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
    )
    flat = [(t.name, p) for t in request.topics for p in t.partitions]
    if code == ErrorCode.none:
        offsets = [
            (
                name,
                p.partition_index,
                p.committed_offset,
                getattr(p, "committed_leader_epoch", -1),
                p.committed_metadata,
            )
            for name, p in flat
        ]
        codes = ctx.broker.groups.stage_txn_offsets(
            request.group_id, request.producer_id, request.producer_epoch, offsets
        )
    else:
        codes = [code] * len(flat)
    by_topic: dict[str, list[dict]] = {}
    for (name, p), item_code in zip(flat, codes, strict=True):
        by_topic.setdefault(name, []).append(
            {"partition_index": p.partition_index, "error_code": int(item_code)}
        )
    return {"topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()]}


@handles(61, 0, 0)
async def describe_producers(ctx: RequestContext, request: Any) -> dict:
    out = []
    for topic in request.topics:
        parts = []
        for index in topic.partition_indexes:
            partition_log = ctx.broker.topics.get_log(topic.name, index)
            if partition_log is None:
                parts.append({"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition})
                continue
            producers = [
                {
                    "producer_id": e.producer_id,
                    "producer_epoch": e.epoch,
                    "last_sequence": e.last_seq,
                    "last_timestamp": e.last_timestamp,
                    "coordinator_epoch": e.coordinator_epoch,
                    "current_txn_start_offset": -1 if e.txn_first_offset is None else e.txn_first_offset,
                }
                for e in partition_log.producers.entries.values()
            ]
            parts.append(
                {"partition_index": index, "error_code": ErrorCode.none, "active_producers": producers}
            )
        out.append({"name": topic.name, "partitions": parts})
    return {"topics": out}


@handles(65, 0, 0)
async def describe_transactions(ctx: RequestContext, request: Any) -> dict:
    states = []
    for tid in request.transactional_ids:
        meta = ctx.broker.transactions.txns.get(tid)
        if meta is None:
            states.append(
                {
                    "error_code": ErrorCode.transactional_id_not_found,
                    "transactional_id": tid,
                    "transaction_state": "",
                    "transaction_start_time": _timestamp(-1),
                    "producer_id": -1,
                    "producer_epoch": -1,
                }
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for name, p in sorted(meta.partitions):
            by_topic.setdefault(name, []).append(p)
        states.append(
            {
                "error_code": ErrorCode.none,
                "transactional_id": tid,
                "transaction_state": meta.state,
                "transaction_timeout": meta.timeout_ms,
                "transaction_start_time": _timestamp(meta.start_ms),
                "producer_id": meta.producer_id,
                "producer_epoch": meta.epoch,
                "topics": [{"topic": name, "partitions": parts} for name, parts in by_topic.items()],
            }
        )
    return {"transaction_states": states}


@handles(66, 0, 2)
async def list_transactions(ctx: RequestContext, request: Any) -> dict:
    state_filters = list(request.state_filters or ())
    unknown = [s for s in state_filters if s not in txn.STATES]
    pid_filters = set(request.producer_id_filters or ())
    duration = getattr(request, "duration_filter", -1)
    pattern_text = getattr(request, "transactional_id_pattern", None)
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error as exc:
        return {
            "error_code": ErrorCode.invalid_regular_expression,
            "unknown_state_filters": unknown,
            "transaction_states": [],
            "error_message": f"{pattern_text}: {exc}",
        }
    now = now_ms()
    states = []
    for meta in ctx.broker.transactions.txns.values():
        if state_filters and meta.state not in state_filters:
            continue
        if pid_filters and meta.producer_id not in pid_filters:
            continue
        if duration >= 0 and now - meta.start_ms < duration:
            continue
        if pattern is not None and not pattern.fullmatch(meta.transactional_id):
            continue
        states.append(
            {
                "transactional_id": meta.transactional_id,
                "producer_id": meta.producer_id,
                "transaction_state": meta.state,
            }
        )
    return {"error_code": ErrorCode.none, "unknown_state_filters": unknown, "transaction_states": states}
