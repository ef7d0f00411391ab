"""FindCoordinator and the classic consumer-group APIs: membership, offsets, group admin.

The handlers only translate between kio's per-version request/response types and
`broker.groups` (devbroker.groups.GroupCoordinator), which holds the state machine. Version
ranges are Kafka 4's (the versions 4.0 dropped are not offered); OffsetCommit/OffsetFetch
stop at v9 because v10 identifies topics by id only.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from devbroker.groups import FetchedOffset, GroupState, JoinRequest
from devbroker.registry import RequestContext, handles
from devbroker.wire import millis

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
FIND_COORDINATOR_BATCHED_VERSION = 4
JOIN_NULLABLE_PROTOCOL_NAME_VERSION = 7
LEAVE_GROUP_BATCHED_VERSION = 3
OFFSET_FETCH_MULTI_GROUP_VERSION = 8
DESCRIBE_GROUPS_NOT_FOUND_ERROR_VERSION = 6


@handles(10, 0, 6)
async def find_coordinator(ctx: RequestContext, request: Any) -> dict:
    """This node coordinates every group and every transactional id."""
    settings = ctx.broker.config
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    if key_type in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
        error, message, node = ErrorCode.none, None, (settings.node_id, settings.host, settings.port)
    else:
        error = ErrorCode.invalid_request
        message = f"coordinator key type {key_type} is not supported: use 0 (group) or 1 (transaction)"
        node = (-1, "", -1)
    if ctx.api_version >= FIND_COORDINATOR_BATCHED_VERSION:
        return {
            "coordinators": [
                {
                    "key": key,
                    "node_id": node[0],
                    "host": node[1],
                    "port": node[2],
                    "error_code": error,
                    "error_message": None,
                }
                for key in request.coordinator_keys
            ]
        }
    return {
        "error_code": error,
        "error_message": message,
        "node_id": node[0],
        "host": node[1],
        "port": node[2],
    }


@handles(11, 2, 9)
async def join_group(ctx: RequestContext, request: Any) -> dict:
    result = await ctx.broker.groups.join_group(
        JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            client_id=ctx.client_id or "",
            client_host=f"/{ctx.client_host}",
            session_timeout_ms=millis(request.session_timeout),
            rebalance_timeout_ms=millis(request.rebalance_timeout),
            protocol_type=request.protocol_type,
            protocols=[(protocol.name, protocol.metadata) for protocol in request.protocols],
            api_version=ctx.api_version,
        )
    )
    protocol_name = result.protocol_name
    if protocol_name is None and ctx.api_version < JOIN_NULLABLE_PROTOCOL_NAME_VERSION:
        protocol_name = ""
    return {
        "error_code": result.error_code,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": protocol_name,
        "leader": result.leader,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
            for m in result.members
        ],
    }


@handles(12, 0, 4)
async def heartbeat(ctx: RequestContext, request: Any) -> dict:
    error = ctx.broker.groups.heartbeat(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
    )
    return {"error_code": error}


@handles(13, 0, 5)
async def leave_group(ctx: RequestContext, request: Any) -> dict:
    if ctx.api_version < LEAVE_GROUP_BATCHED_VERSION:
        leaving = [(request.member_id, None)]
    else:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    error, member_errors = ctx.broker.groups.leave_group(request.group_id, leaving)
    if ctx.api_version < LEAVE_GROUP_BATCHED_VERSION:
        # One member per request: its error is the request's error, as Kafka reports it.
        if error == ErrorCode.none:
            error = next((e for e in member_errors if e != ErrorCode.none), ErrorCode.none)
        return {"error_code": error}
    return {
        "error_code": error,
        "members": [
            {"member_id": member_id, "group_instance_id": instance_id, "error_code": member_error}
            for (member_id, instance_id), member_error in zip(leaving, member_errors, strict=False)
        ],
    }


@handles(14, 0, 5)
async def sync_group(ctx: RequestContext, request: Any) -> dict:
    result = await ctx.broker.groups.sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        getattr(request, "protocol_type", None),
        getattr(request, "protocol_name", None),
        {a.member_id: a.assignment for a in request.assignments},
    )
    return {
        "error_code": result.error_code,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }


@handles(15, 0, 6)
async def describe_groups(ctx: RequestContext, request: Any) -> dict:
    described = []
    for group_id in request.groups:
        group = ctx.broker.groups.describe_group(group_id)
        if group is None:
            entry: dict[str, Any] = {
                "error_code": ErrorCode.none,
                "group_id": group_id,
                "group_state": GroupState.DEAD.value,
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
            }
            if ctx.api_version >= DESCRIBE_GROUPS_NOT_FOUND_ERROR_VERSION:
                entry["error_code"] = ErrorCode.group_id_not_found
                entry["error_message"] = f"Group {group_id} not found."
            described.append(entry)
            continue
        described.append(
            {
                "error_code": ErrorCode.none,
                "group_id": group.group_id,
                "group_state": group.state,
                "protocol_type": group.protocol_type,
                "protocol_data": group.protocol_data,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in group.members
                ],
            }
        )
    return {"groups": described}


@handles(16, 0, 5)
async def list_groups(ctx: RequestContext, request: Any) -> dict:
    groups = ctx.broker.groups.list_groups(
        getattr(request, "states_filter", ()), getattr(request, "types_filter", ())
    )
    return {
        "error_code": ErrorCode.none,
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": g.group_type,
            }
            for g in groups
        ],
    }


@handles(42, 0, 2)
async def delete_groups(ctx: RequestContext, request: Any) -> dict:
    results = ctx.broker.groups.delete_groups(request.groups_names)
    return {"results": [{"group_id": group_id, "error_code": error} for group_id, error in results]}


@handles(8, 2, 9)
async def offset_commit(ctx: RequestContext, request: Any) -> dict:
    flat = [(topic.name, p) for topic in request.topics for p in topic.partitions]
    errors = ctx.broker.groups.commit_offsets(
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        getattr(request, "group_instance_id", None),
        millis(getattr(request, "retention_time", -1)),
        [
            (
                name,
                p.partition_index,
                p.committed_offset,
                getattr(p, "committed_leader_epoch", -1),
                p.committed_metadata,
            )
            for name, p in flat
        ],
        ctx.api_version,
    )
    by_topic: dict[str, list[dict]] = {}
    for (name, p), error in zip(flat, errors, strict=True):
        by_topic.setdefault(name, []).append({"partition_index": p.partition_index, "error_code": error})
    return {"topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()]}


def _fetched_topics(topics: list[tuple[str, list[FetchedOffset]]]) -> list[dict]:
    return [
        {
            "name": name,
            "partitions": [
                {
                    "partition_index": f.partition,
                    "committed_offset": f.offset,
                    "committed_leader_epoch": f.leader_epoch,
                    "metadata": f.metadata,
                    "error_code": f.error_code,
                }
                for f in fetched
            ],
        }
        for name, fetched in topics
    ]


def _wanted(topics: Any) -> list[tuple[str, tuple[int, ...]]] | None:
    if topics is None:
        return None
    return [(t.name, tuple(t.partition_indexes)) for t in topics]


@handles(9, 1, 9)
async def offset_fetch(ctx: RequestContext, request: Any) -> dict:
    groups = ctx.broker.groups
    require_stable = bool(getattr(request, "require_stable", False))
    if ctx.api_version >= OFFSET_FETCH_MULTI_GROUP_VERSION:
        answers = []
        for group in request.groups:
            error, topics = groups.fetch_offsets(
                group.group_id, _wanted(group.topics), require_stable=require_stable
            )
            answers.append(
                {"group_id": group.group_id, "error_code": error, "topics": _fetched_topics(topics)}
            )
        return {"groups": answers}
    error, topics = groups.fetch_offsets(
        request.group_id, _wanted(request.topics), require_stable=require_stable
    )
    return {"error_code": error, "topics": _fetched_topics(topics)}


@handles(47, 0, 0)
async def offset_delete(ctx: RequestContext, request: Any) -> dict:
    error, topics = ctx.broker.groups.delete_offsets(
        request.group_id, [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics]
    )
    return {
        "error_code": error,
        "topics": [
            {
                "name": name,
                "partitions": [{"partition_index": index, "error_code": code} for index, code in partitions],
            }
            for name, partitions in topics
        ],
    }
