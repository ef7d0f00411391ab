"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for TOPIC and BROKER resources.

Sources, synonyms, read-only and sensitive flags are reported as Kafka's ConfigHelper does
(see devbroker.configs). On the BROKER resource the key `devbroker.compact.now` (value: a
topic name or `*`) compacts those topics before the response is sent and is never stored.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from devbroker.configs import (
    BROKER_CONFIGS,
    COMPACT_NOW_KEY,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigType,
    InvalidConfig,
    broker_entries,
    normalize,
    topic_entries,
    validate_topic_configs,
)
from devbroker.registry import RequestContext, handles
from devbroker.topics import TopicError, validate_name

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

SET, DELETE, APPEND, SUBTRACT = range(4)


class ResourceError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _broker_scope(ctx: RequestContext, name: str | None) -> str:
    """'default' for the cluster-wide resource (""), 'node' for this broker's id."""
    if not name:
        return "default"
    try:
        node = int(name)
    except ValueError:
        raise ResourceError(
            ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if node != ctx.broker.config.node_id:
        raise ResourceError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {ctx.broker.config.node_id} or empty string, but received {name}",
        )
    return "node"


def _topic(ctx: RequestContext, name: str) -> Any:
    try:
        validate_name(name)
    except TopicError as exc:
        raise ResourceError(exc.code, exc.message) from None
    topic = ctx.broker.topics.topics.get(name)
    if topic is None:
        raise ResourceError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
    return topic


# ---- DescribeConfigs ----------------------------------------------------------------------


@handles(32, 1, 4)
async def describe_configs(ctx: RequestContext, request: Any) -> dict:
    synonyms_wanted = bool(getattr(request, "include_synonyms", False))
    docs_wanted = bool(getattr(request, "include_documentation", False))
    results = []
    for resource in request.resources:
        entry: dict[str, Any] = {
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "error_code": ErrorCode.none,
            "error_message": None,
            "configs": [],
        }
        keys = resource.configuration_keys
        try:
            if resource.resource_type == TOPIC:
                topic = _topic(ctx, resource.resource_name)
                rows = topic_entries(topic.configs, ctx.broker.topics.broker_config, keys)
            elif resource.resource_type == BROKER:
                scope = _broker_scope(ctx, resource.resource_name)
                rows = broker_entries(ctx.broker.topics.broker_config, keys, per_broker=scope == "node")
            elif resource.resource_type == BROKER_LOGGER:
                _broker_scope(ctx, resource.resource_name or "-")
                rows = []
            else:
                raise ResourceError(
                    ErrorCode.invalid_request, f"Unsupported resource type: {resource.resource_type}"
                )
            read_only = resource.resource_type == BROKER
            entry["configs"] = [
                _describe_row(
                    d, value, source, syns, synonyms_wanted, docs_wanted, read_only and not d.dynamic
                )
                for d, value, source, syns in rows
            ]
        except ResourceError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        results.append(entry)
    return {"results": results}


def _describe_row(
    definition: ConfigDef,
    value: str | None,
    source: Any,
    synonyms: list,
    synonyms_wanted: bool,
    docs_wanted: bool,
    read_only: bool,
) -> dict:
    return {
        "name": definition.name,
        "value": None if definition.sensitive else value,
        "read_only": read_only,
        "config_source": int(source),
        "is_sensitive": definition.sensitive,
        "synonyms": [{"name": n, "value": v, "source": int(s)} for n, v, s in synonyms]
        if synonyms_wanted
        else [],
        "config_type": int(definition.type),
        "documentation": definition.doc if docs_wanted else None,
    }


# ---- AlterConfigs / IncrementalAlterConfigs ------------------------------------------------


@handles(33, 0, 2)
async def alter_configs(ctx: RequestContext, request: Any) -> dict:
    def build(
        current: Mapping[str, str], changes: list[Any], definitions: Mapping[str, ConfigDef]
    ) -> dict[str, str | None]:
        result: dict[str, str | None] = {}
        for change in changes:
            if change.value is None:
                raise ResourceError(
                    ErrorCode.invalid_request, f"Null value not supported for : {change.name}"
                )
            result[change.name] = change.value
        return result

    return _alter(ctx, request, build)


@handles(44, 0, 1)
async def incremental_alter_configs(ctx: RequestContext, request: Any) -> dict:
    def build(
        current: Mapping[str, str], changes: list[Any], definitions: Mapping[str, ConfigDef]
    ) -> dict[str, str | None]:
        result: dict[str, str | None] = dict(current)
        for change in changes:
            op = change.config_operation
            definition = definitions.get(change.name)
            if op == SET:
                if change.value is None:
                    raise ResourceError(
                        ErrorCode.invalid_request, f"Null value not supported for : {change.name}"
                    )
                result[change.name] = change.value
            elif op == DELETE:
                result.pop(change.name, None)
            elif op in (APPEND, SUBTRACT):
                if definition is None or definition.type is not ConfigType.LIST:
                    verb = "append" if op == APPEND else "subtract"
                    raise ResourceError(
                        ErrorCode.invalid_config,
                        f"Config value {verb} is not allowed for config key: {change.name}",
                    )
                base = result.get(change.name)
                if base is None:
                    base = definition.default or ""
                old = [v.strip() for v in base.split(",") if v.strip()]
                new = [v.strip() for v in (change.value or "").split(",") if v.strip()]
                merged = list(dict.fromkeys(old + new)) if op == APPEND else [v for v in old if v not in new]
                result[change.name] = ",".join(merged)
            else:
                raise ResourceError(
                    ErrorCode.invalid_request, f"Unknown config operation {op} for {change.name}"
                )
        return result

    return _alter(ctx, request, build)


Builder = Callable[[Mapping[str, str], list[Any], Mapping[str, ConfigDef]], dict[str, str | None]]


def _alter(ctx: RequestContext, request: Any, build: Builder) -> dict:
    counts = collections.Counter((r.resource_type, r.resource_name) for r in request.resources)
    responses = []
    for resource in request.resources:
        entry: dict[str, Any] = {
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        try:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                raise ResourceError(ErrorCode.invalid_request, "Duplicate resource in request.")
            names = [c.name for c in resource.configs]
            if len(names) != len(set(names)):
                raise ResourceError(ErrorCode.invalid_request, "Error due to duplicate config keys")
            if resource.resource_type == TOPIC:
                _alter_topic(ctx, resource, build, request.validate_only)
            elif resource.resource_type == BROKER:
                _alter_broker(ctx, resource, build, request.validate_only)
            else:
                raise ResourceError(
                    ErrorCode.invalid_request, f"Unsupported resource type: {resource.resource_type}"
                )
        except ResourceError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        responses.append(entry)
    return {"responses": responses}


def _alter_topic(ctx: RequestContext, resource: Any, build: Builder, validate_only: bool) -> None:
    topic = _topic(ctx, resource.resource_name)
    wanted = build(topic.configs, list(resource.configs), TOPIC_CONFIGS)
    try:
        resolved = validate_topic_configs(wanted)
    except InvalidConfig as exc:
        raise ResourceError(ErrorCode.invalid_config, str(exc)) from None
    if not validate_only:
        ctx.broker.topics.set_configs(topic, resolved)


def _alter_broker(ctx: RequestContext, resource: Any, build: Builder, validate_only: bool) -> None:
    scope = _broker_scope(ctx, resource.resource_name)
    values = ctx.broker.topics.broker_config
    current = values.dynamic_node if scope == "node" else values.dynamic_default
    changes = [c for c in resource.configs if c.name != COMPACT_NOW_KEY]
    compact_targets = [c.value for c in resource.configs if c.name == COMPACT_NOW_KEY]
    for target in compact_targets:
        if not target:
            raise ResourceError(
                ErrorCode.invalid_config, f"{COMPACT_NOW_KEY} needs a topic name or '*' as its value"
            )
        if target != "*" and target not in ctx.broker.topics.topics:
            raise ResourceError(ErrorCode.invalid_config, f"{COMPACT_NOW_KEY}: topic {target} does not exist")
    if changes or not compact_targets:
        wanted = build(current, changes, BROKER_CONFIGS)
        resolved: dict[str, str] = {}
        static_only = []
        for key, raw in wanted.items():
            definition = BROKER_CONFIGS.get(key)
            if definition is None:
                raise ResourceError(ErrorCode.invalid_config, f"Unknown broker config name: {key}")
            if not definition.dynamic:
                static_only.append(key)
                continue
            try:
                resolved[key] = normalize(definition, raw) or ""
            except InvalidConfig as exc:
                raise ResourceError(ErrorCode.invalid_config, str(exc)) from None
        if static_only:
            raise ResourceError(
                ErrorCode.invalid_config,
                f"Cannot update these configs dynamically: {', '.join(sorted(static_only))}",
            )
        if not validate_only:
            ctx.broker.topics.set_broker_configs(scope, resolved)
    if not validate_only:
        for target in compact_targets:
            ctx.broker.compact_now(target)
