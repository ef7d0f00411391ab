"""Remote and internal topics on the target, created and grown the way MM2 does it.

Every replicate run calls `sync_remote_topics` (so a new source topic is copied on the next run,
not after refresh.topics.interval.seconds); the refresh_topics job calls the same function.
Remote topics get the source's partition count, `replication.factor` and the source configs
that pass config.properties.exclude; partitions only ever grow; nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from mirrorflow.admin_batches import new_topic_records, request_batches
from mirrorflow.config import FlowConfig
from mirrorflow.kafka import await_topics
from mirrorflow.policy import should_replicate_topic
from mirrorflow.policy.filters import TopicConfigEntry, topic_creation_configs

TIMEOUT_S = 60.0


@dataclass
class RemoteTopics:
    """Which source topics the flow replicates and what happened to their remote topics."""

    remote: dict[str, str] = field(default_factory=dict)  # source topic -> remote topic
    partitions: dict[str, int] = field(default_factory=dict)  # source topic -> source partitions
    created: list[str] = field(default_factory=list)
    grown: dict[str, tuple[int, int]] = field(default_factory=dict)  # remote -> (before, after)
    errors: dict[str, str] = field(default_factory=dict)  # source topic -> why it cannot be copied now

    def ready(self) -> dict[str, str]:
        return {t: r for t, r in self.remote.items() if t not in self.errors}


def _source_name(source: ConfigSource | int) -> str:
    """Kafka's ConfigSource name; librdkafka hands the source over as a bare int (and a source
    newer than this client reads as UNKNOWN_CONFIG, as Java's fromId does)."""
    try:
        return ConfigSource(source).name
    except ValueError:
        return ConfigSource.UNKNOWN_CONFIG.name


def describe_topic_configs(admin: AdminClient, topics: Iterable[str]) -> dict[str, list[TopicConfigEntry]]:
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
    if not resources:
        return {}
    out: dict[str, list[TopicConfigEntry]] = {}
    for resource, future in admin.describe_configs(resources, request_timeout=TIMEOUT_S).items():
        entries = future.result(TIMEOUT_S)
        out[resource.name] = [
            TopicConfigEntry(
                name=e.name,
                value=e.value,
                source=_source_name(e.source),
                is_read_only=bool(e.is_read_only),
                is_sensitive=bool(e.is_sensitive),
            )
            for e in entries.values()
        ]
    return out


def _create_error_message(flow: FlowConfig, remote: str, error: KafkaError) -> str:
    if error.code() == KafkaError.INVALID_REPLICATION_FACTOR:
        return (
            f"cannot create {remote}: {error.str()}; replication.factor is {flow.replication_factor}: "
            "set replication.factor (or -1 for the target broker default) to at most the target's broker count"
        )
    return f"cannot create {remote}: {error.name()}: {error.str()}"


def sync_remote_topics(
    flow: FlowConfig, source_admin: AdminClient, target_admin: AdminClient
) -> RemoteTopics:
    out = RemoteTopics()
    source_topics = source_admin.list_topics(timeout=TIMEOUT_S).topics
    for name in sorted(source_topics):
        meta = source_topics[name]
        if meta.error is not None or not should_replicate_topic(flow, name):
            continue
        out.remote[name] = flow.policy.format_remote_topic(flow.source, name)
        out.partitions[name] = len(meta.partitions)
    target_topics = target_admin.list_topics(timeout=TIMEOUT_S).topics

    missing = [t for t, r in out.remote.items() if r not in target_topics]
    raced: list[str] = []  # remote topics someone else created between our look and our create
    if missing:
        configs = describe_topic_configs(source_admin, missing)
        new = [
            NewTopic(
                out.remote[t],
                out.partitions[t],
                flow.replication_factor,
                config=topic_creation_configs(configs.get(t, []), flow.config_property_filter),
            )
            for t in missing
        ]
        by_remote = {out.remote[t]: t for t in missing}
        for batch in request_batches(new, new_topic_records):
            for remote, future in target_admin.create_topics(batch, request_timeout=TIMEOUT_S).items():
                try:
                    future.result(TIMEOUT_S)
                    out.created.append(remote)
                except KafkaException as exc:
                    error = exc.args[0]
                    if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                        raced.append(remote)
                    else:
                        out.errors[by_remote[remote]] = _create_error_message(flow, remote, error)

    grow = {}
    for topic, remote in out.remote.items():
        meta = target_topics.get(remote)
        if meta is not None and meta.error is None and len(meta.partitions) < out.partitions[topic]:
            grow[remote] = (topic, len(meta.partitions))
    if grow:
        requests = [NewPartitions(remote, out.partitions[topic]) for remote, (topic, _) in grow.items()]
        for batch in request_batches(requests, lambda r: r.new_total_count - grow[r.topic][1]):
            for remote, future in target_admin.create_partitions(batch, request_timeout=TIMEOUT_S).items():
                topic, before = grow[remote]
                try:
                    future.result(TIMEOUT_S)
                    out.grown[remote] = (before, out.partitions[topic])
                except KafkaException as exc:
                    out.errors[topic] = (
                        f"cannot grow {remote} to {out.partitions[topic]} partitions: {exc.args[0].str()}"
                    )
    changed = {
        remote: out.partitions[by_source]
        for by_source, remote in out.remote.items()
        if remote in out.created or remote in out.grown
    }
    # A create that lost a race (another run of the flow, or refresh_topics, made the topic a
    # moment before) can be answered before the brokers serve the topic, and a plan reading its
    # ID in that moment would store progress without the remote topic's ID (seen once at about
    # a second; on Kafka 4.4.0 the topic was served within 11 ms of the answer in 20 races).
    # Waiting until it is served (with a leader; whoever made it chose its partitions) closes it.
    changed.update({remote: 1 for remote in raced if remote not in changed})
    if changed:
        # The copy tasks produce to them next, maybe through other brokers than the one that answered.
        await_topics(target_admin, changed, timeout_s=TIMEOUT_S)
    return out


# mirrorflow's internal topics (progress, offset-syncs, checkpoints, heartbeats) are compacted
# by key, as MM2 creates them, and every pass reads them from the start. With Kafka's default
# 1 GiB segments the active segment, which compaction never touches, would hold every record of
# days of runs; 16 MiB segments rolled at least hourly keep a topic's size proportional to its
# keys (partitions, groups), not to the number of runs.
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": str(16 << 20), "segment.ms": str(3_600_000)}


class InternalTopicError(RuntimeError):
    pass


def ensure_topic(
    admin: AdminClient,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str],
    *,
    what: str,
    factor_key: str,
) -> bool:
    """Create `name` unless it exists; True if created. Errors name the setting to change."""
    topic = NewTopic(name, partitions, replication_factor, config=dict(configs))
    try:
        admin.create_topics([topic], request_timeout=TIMEOUT_S)[name].result(TIMEOUT_S)
    except KafkaException as exc:
        error = exc.args[0]
        if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        hint = ""
        if error.code() == KafkaError.INVALID_REPLICATION_FACTOR:
            hint = f"; {factor_key} is {replication_factor}: lower it (or -1 for the broker default)"
        raise InternalTopicError(f"cannot create {what} topic {name}: {error.str()}{hint}") from exc
    await_topics(admin, {name: partitions}, timeout_s=TIMEOUT_S)
    return True
