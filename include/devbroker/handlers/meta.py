"""ApiVersions, Metadata, DescribeCluster, OffsetForLeaderEpoch: what clients learn first.

This node leads every partition with leader epoch 0 (it never changes leadership), is the
only replica and the controller.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from devbroker.registry import HANDLERS, RequestContext, handles
from devbroker.topics import TopicError, validate_name

LEADER_EPOCH = 0
_ZERO_UUID = uuid.UUID(int=0)


@handles(18, 0, 4)
async def api_versions(ctx: RequestContext, request: Any) -> dict:
    keys = [
        {"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
        for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
    ]
    return {"error_code": ErrorCode.none, "api_keys": keys}


def broker_list(ctx: RequestContext, id_field: str = "node_id") -> list[dict]:
    settings = ctx.broker.config
    return [{id_field: settings.node_id, "host": settings.host, "port": settings.port, "rack": None}]


def partition_metadata(ctx: RequestContext, count: int) -> list[dict]:
    node = ctx.broker.config.node_id
    return [
        {
            "error_code": ErrorCode.none,
            "partition_index": p,
            "leader_id": node,
            "leader_epoch": LEADER_EPOCH,
            "replica_nodes": [node],
            "isr_nodes": [node],
            "offline_replicas": [],
        }
        for p in range(count)
    ]


def _topic_entry(ctx: RequestContext, name: str) -> dict:
    topic = ctx.broker.topics.topics[name]
    return {
        "error_code": ErrorCode.none,
        "name": name,
        "topic_id": topic.topic_id,
        "is_internal": False,
        "partitions": partition_metadata(ctx, topic.partition_count),
    }


@handles(3, 0, 12)
async def metadata(ctx: RequestContext, request: Any) -> dict:
    topics = ctx.broker.topics
    wanted = request.topics
    if wanted is None or (ctx.api_version == 0 and not wanted):
        entries = [_topic_entry(ctx, name) for name in sorted(topics.topics)]
    else:
        allow_create = bool(getattr(request, "allow_auto_topic_creation", True)) and bool(
            ctx.broker.config.get("auto.create.topics.enable")
        )
        entries = []
        for item in wanted:
            name = item.name
            topic_id = getattr(item, "topic_id", None)
            if name is None:
                topic = topics.by_id.get(topic_id) if topic_id not in (None, _ZERO_UUID) else None
                if topic is None:
                    entries.append(
                        {
                            "error_code": ErrorCode.unknown_topic_id,
                            "name": None,
                            "topic_id": topic_id,
                            "partitions": [],
                        }
                    )
                else:
                    entries.append(_topic_entry(ctx, topic.name))
                continue
            entries.append(_lookup_or_create(ctx, name, allow_create))
    return {
        "brokers": broker_list(ctx),
        "cluster_id": ctx.broker.config.cluster_id,
        "controller_id": ctx.broker.config.node_id,
        "topics": entries,
    }


def _lookup_or_create(ctx: RequestContext, name: str, allow_create: bool) -> dict:
    topics = ctx.broker.topics
    if name in topics.topics:
        return _topic_entry(ctx, name)
    try:
        validate_name(name)
    except TopicError:
        return {"error_code": ErrorCode.invalid_topic_exception, "name": name, "partitions": []}
    if not allow_create:
        return {"error_code": ErrorCode.unknown_topic_or_partition, "name": name, "partitions": []}
    try:
        partitions, _rf, configs = topics.check_create(name, -1, -1, {})
    except TopicError as exc:
        return {"error_code": exc.code, "name": name, "partitions": []}
    topics.create(name, partitions, configs)
    return _topic_entry(ctx, name)


@handles(60, 0, 1)
async def describe_cluster(ctx: RequestContext, request: Any) -> dict:
    if getattr(request, "endpoint_type", 1) != 1:
        return {
            "error_code": ErrorCode.unsupported_endpoint_type,
            "error_message": "only broker endpoints are served",
            "cluster_id": ctx.broker.config.cluster_id,
        }
    return {
        "error_code": ErrorCode.none,
        "cluster_id": ctx.broker.config.cluster_id,
        "controller_id": ctx.broker.config.node_id,
        "brokers": broker_list(ctx, "broker_id"),
    }


@handles(23, 2, 4)
async def offset_for_leader_epoch(ctx: RequestContext, request: Any) -> dict:
    out = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            partition_log = ctx.broker.topics.get_log(topic.topic, p.partition)
            entry: dict[str, Any] = {"partition": p.partition}
            if partition_log is None:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            elif p.current_leader_epoch > LEADER_EPOCH:
                entry["error_code"] = ErrorCode.unknown_leader_epoch
            elif 0 <= p.current_leader_epoch < LEADER_EPOCH:
                entry["error_code"] = ErrorCode.fenced_leader_epoch
            elif p.leader_epoch > LEADER_EPOCH:
                entry.update(error_code=ErrorCode.none, leader_epoch=-1, end_offset=-1)
            else:
                entry.update(
                    error_code=ErrorCode.none, leader_epoch=LEADER_EPOCH, end_offset=partition_log.next_offset
                )
            parts.append(entry)
        out.append({"topic": topic.topic, "partitions": parts})
    return {"topics": out}


def leader_epoch_error(current_leader_epoch: int) -> ErrorCode:
    """Fetch/ListOffsets check of the epoch a client believes the leader has."""
    if current_leader_epoch > LEADER_EPOCH:
        return ErrorCode.unknown_leader_epoch
    if 0 <= current_leader_epoch < LEADER_EPOCH:
        return ErrorCode.fenced_leader_epoch
    return ErrorCode.none
