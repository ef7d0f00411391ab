"""CreateTopics, DeleteTopics, CreatePartitions with the checks and messages of a one-broker Kafka."""

from __future__ import annotations

import collections
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from devbroker.configs import topic_entries
from devbroker.registry import RequestContext, handles
from devbroker.topics import TopicError

_ZERO_UUID = uuid.UUID(int=0)


@handles(19, 2, 7)
async def create_topics(ctx: RequestContext, request: Any) -> dict:
    topics = ctx.broker.topics
    counts = collections.Counter(t.name for t in request.topics)
    results = []
    for item in request.topics:
        entry: dict[str, Any] = {"name": item.name, "error_code": ErrorCode.none, "error_message": None}
        try:
            if counts[item.name] > 1:
                raise TopicError(
                    ErrorCode.invalid_request,
                    f"Create topics request from client contains duplicate topic {item.name}.",
                )
            partitions, replication = item.num_partitions, item.replication_factor
            if item.assignments:
                partitions, replication = _check_assignments(ctx, item)
            configs = {c.name: c.value for c in item.configs}
            partitions, replication, resolved = topics.check_create(
                item.name, partitions, replication, configs
            )
            if request.validate_only:
                topic_id = _ZERO_UUID
                config_entries = topic_entries(resolved, topics.broker_config, None)
            else:
                topic = topics.create(item.name, partitions, resolved)
                topic_id = topic.topic_id
                config_entries = topic_entries(topic.configs, topics.broker_config, None)
            entry.update(
                topic_id=topic_id,
                num_partitions=partitions,
                replication_factor=replication,
                configs=[
                    {
                        "name": d.name,
                        "value": None if d.sensitive else value,
                        "read_only": False,
                        "config_source": int(source),
                        "is_sensitive": d.sensitive,
                    }
                    for d, value, source, _syn in config_entries
                ],
            )
        except TopicError as exc:
            entry.update(
                error_code=exc.code, error_message=exc.message, num_partitions=-1, replication_factor=-1
            )
        results.append(entry)
    return {"topics": results}


def _check_assignments(ctx: RequestContext, item: Any) -> tuple[int, int]:
    if item.num_partitions != -1 or item.replication_factor != -1:
        raise TopicError(
            ErrorCode.invalid_request,
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the"
            " same time.",
        )
    node = ctx.broker.config.node_id
    indexes = sorted(a.partition_index for a in item.assignments)
    if indexes != list(range(len(indexes))):
        raise TopicError(
            ErrorCode.invalid_replica_assignment,
            "partitions should be a consecutive 0-based integer sequence",
        )
    for assignment in item.assignments:
        if list(assignment.broker_ids) != [node]:
            raise TopicError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker(s) other than the only broker {node}:"
                f" {list(assignment.broker_ids)}",
            )
    return len(indexes), 1


@handles(20, 1, 6)
async def delete_topics(ctx: RequestContext, request: Any) -> dict:
    topics = ctx.broker.topics
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    enabled = bool(ctx.broker.config.get("delete.topic.enable"))
    responses = []
    for name, topic_id in wanted:
        entry: dict[str, Any] = {
            "name": name,
            "topic_id": topic_id or _ZERO_UUID,
            "error_code": ErrorCode.none,
        }
        if name is None and topic_id not in (None, _ZERO_UUID):
            topic = topics.by_id.get(topic_id)
            if topic is None:
                entry["error_code"] = ErrorCode.unknown_topic_id
                responses.append(entry)
                continue
            name = topic.name
            entry["name"] = name
        elif name is None:
            entry["error_code"] = ErrorCode.invalid_request
            responses.append(entry)
            continue
        topic = topics.topics.get(name)
        if topic is None:
            entry["error_code"] = ErrorCode.unknown_topic_or_partition
            entry["error_message"] = "This server does not host this topic-partition."
        elif not enabled:
            entry["error_code"] = ErrorCode.topic_deletion_disabled
            entry["error_message"] = "Topic deletion is disabled."
        else:
            entry["topic_id"] = topic.topic_id
            topics.delete(name)
        responses.append(entry)
    return {"responses": responses}


@handles(37, 0, 3)
async def create_partitions(ctx: RequestContext, request: Any) -> dict:
    topics = ctx.broker.topics
    counts = collections.Counter(t.name for t in request.topics)
    results = []
    node = ctx.broker.config.node_id
    for item in request.topics:
        entry: dict[str, Any] = {"name": item.name, "error_code": ErrorCode.none, "error_message": None}
        topic = topics.topics.get(item.name)
        if counts[item.name] > 1:
            entry.update(error_code=ErrorCode.invalid_request, error_message="Duplicate topic in request.")
        elif topic is None:
            entry.update(
                error_code=ErrorCode.unknown_topic_or_partition,
                error_message="This server does not host this topic-partition.",
            )
        elif item.count < topic.partition_count:
            entry.update(
                error_code=ErrorCode.invalid_partitions,
                error_message=f"Topic currently has {topic.partition_count} partitions, which is higher than the"
                f" requested {item.count}.",
            )
        elif item.count == topic.partition_count:
            entry.update(
                error_code=ErrorCode.invalid_partitions,
                error_message=f"Topic already has {topic.partition_count} partitions.",
            )
        elif item.assignments is not None and (
            len(item.assignments) != item.count - topic.partition_count
            or any(list(a.broker_ids) != [node] for a in item.assignments)
        ):
            entry.update(
                error_code=ErrorCode.invalid_replica_assignment,
                error_message=f"Assignments must name only broker {node}, one per new partition.",
            )
        elif not request.validate_only:
            topics.add_partitions(topic, item.count)
        results.append(entry)
    return {"results": results}
