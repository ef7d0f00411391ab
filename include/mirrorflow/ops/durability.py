"""Can the target keep what a flow writes there? The replication settings of every topic a flow
writes on its target cluster, checked against what "nothing lost" needs.

A copy writes data, progress and (with offset-syncs.topic.location = target) offset-syncs with
acks=all in one transaction, so a commit is acknowledged once every in-sync replica has it. How
much that is depends on the topics: with min.insync.replicas = 1 the leader alone may be the
in-sync set, and a leader failover then loses what it acknowledged; with fewer than three
replicas, min.insync.replicas = 2 either stops writes while one broker is down (RF 2) or cannot
hold (RF 1); unclean leader election lets an out-of-sync replica become leader and drop
acknowledged records. Acknowledged records survive any one broker failure with replication
factor >= 3, min.insync.replicas = 2 (below the replication factor) and unclean leader election
off.

One flow costs one metadata request to each cluster and two DescribeConfigs requests to the
target (every topic; one broker's defaults for topics not created yet), however many partitions
there are. How a shortfall is told is durability_words.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource, ResourceType

from mirrorflow.clients import FlowClients
from mirrorflow.config import ConfigError, FlowConfig, MirrorConfig, Problem
from mirrorflow.config.problems import error, unique, warning
from mirrorflow.kafka import admin_client
from mirrorflow.ops.durability_words import (
    REMOTE,
    Replication,
    WrittenTopic,
    problem,
    shortfalls,
    unchecked_note,
)
from mirrorflow.policy import should_replicate_topic

TIMEOUT_S = 30.0
# Topic configs that decide durability; config sync must leave them alone on remote topics.
DURABILITY_CONFIGS = ("min.insync.replicas", "unclean.leader.election.enable")


def written_topics(
    flow: FlowConfig, source_topics: Iterable[str], *, replicates: bool, heartbeats: bool
) -> list[WrittenTopic]:
    """Every topic the flow writes on its target: remote topics of the source topics it copies,
    progress, offset-syncs (when kept on the target), checkpoints and heartbeats."""
    out: list[WrittenTopic] = []
    if replicates:
        out += [
            WrittenTopic(
                flow.policy.format_remote_topic(flow.source, topic),
                REMOTE,
                "replication.factor",
                flow.replication_factor,
            )
            for topic in sorted(source_topics)
            if should_replicate_topic(flow, topic)
        ]
        out.append(
            WrittenTopic(
                flow.offset_storage_topic,
                "progress topic",
                "offset.storage.replication.factor",
                flow.offset_storage_replication_factor,
            )
        )
        if flow.emit_offset_syncs_enabled and flow.offset_syncs_cluster == flow.target:
            out.append(
                WrittenTopic(
                    flow.offset_syncs_topic,
                    "offset-syncs topic",
                    "offset-syncs.topic.replication.factor",
                    flow.offset_syncs_topic_replication_factor,
                )
            )
        if flow.emit_checkpoints_interval is not None:
            out.append(
                WrittenTopic(
                    flow.checkpoints_topic,
                    "checkpoints topic",
                    "checkpoints.topic.replication.factor",
                    flow.checkpoints_topic_replication_factor,
                )
            )
    if heartbeats and flow.emit_heartbeats_interval is not None:
        out.append(
            WrittenTopic(
                flow.heartbeats_topic,
                "heartbeats topic",
                "heartbeats.topic.replication.factor",
                flow.heartbeats_topic_replication_factor,
            )
        )
    return out


def _as_int(entries: dict, name: str, default: int) -> int:
    entry = entries.get(name)
    try:
        return int(entry.value) if entry is not None and entry.value is not None else default
    except ValueError:
        return default


def _as_bool(entries: dict, name: str) -> bool:
    entry = entries.get(name)
    return entry is not None and str(entry.value).lower() == "true"


def _not_authorized(exc: KafkaException) -> bool:
    cause = exc.args[0] if exc.args else None
    return isinstance(cause, KafkaError) and cause.code() in (
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    )


def _kafka_error(exc: KafkaException) -> str:
    cause = exc.args[0] if exc.args else None
    return f"{cause.name()}: {cause.str()}" if isinstance(cause, KafkaError) else str(exc)


class NotAnswering(RuntimeError):
    """A cluster's metadata request failed (down, unreachable, or refusing the client)."""

    def __init__(self, alias: str, cause: str) -> None:
        super().__init__(f"cluster {alias} did not answer ({cause})")
        self.alias, self.cause = alias, cause


def _metadata(admin: AdminClient, alias: str, timeout_s: float) -> ClusterMetadata:
    try:
        return admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise NotAnswering(alias, _kafka_error(exc)) from exc


def config_sync_problems(flow: FlowConfig) -> list[Problem]:
    """Topic config sync copies every source config that passes config.properties.exclude onto
    the remote topics (and removes it there where the source has the default), so a durability
    setting made on the target only lasts if the filter keeps it out, as MM2's default does."""
    if flow.sync_topic_configs_interval is None:
        return []
    synced = [
        c for c in DURABILITY_CONFIGS if flow.config_property_filter.should_replicate_config_property(c)
    ]
    if not synced:
        return []
    return [
        warning(
            "config.properties.exclude",
            f"topic config sync of {flow.name} copies {', '.join(synced)} from the source topics onto the "
            f"remote topics on {flow.target} (or resets it to {flow.target}'s broker default), overriding "
            "what you set there",
            "keep min.insync.replicas and unclean.leader.election.enable in config.properties.exclude, as "
            "MM2's default does",
        )
    ]


def check_flow_durability(
    flow: FlowConfig,
    source_admin: AdminClient | None,
    target_admin: AdminClient,
    *,
    replicates: bool = True,
    heartbeats: bool = True,
    timeout_s: float = TIMEOUT_S,
) -> list[Problem]:
    """A warning for each topic the flow writes on its target whose replication factor is below
    3, whose min.insync.replicas is below 2 or not below its replication factor, or whose unclean
    leader election is on. Topics not created yet are judged as mirrorflow would create them:
    the flow's replication-factor key and the target broker's defaults.

    Remote topics with the same shortfall share one warning. A cluster that does not answer
    raises NotAnswering."""
    source_topics: list[str] = []
    if replicates:
        if source_admin is None:
            raise ValueError("checking a replicating flow needs the source's admin client")
        source_topics = list(_metadata(source_admin, flow.source, timeout_s).topics)
    topics = written_topics(flow, source_topics, replicates=replicates, heartbeats=heartbeats)
    metadata = _metadata(target_admin, flow.target, timeout_s)
    brokers = len(metadata.brokers)
    existing = {t.name for t in topics if t.name in metadata.topics and metadata.topics[t.name].error is None}
    requests = [[ConfigResource(ResourceType.TOPIC, name) for name in sorted(existing)]]
    if len(existing) < len({t.name for t in topics}) and metadata.brokers:
        # Topics not created yet will get the brokers' defaults; any broker answers for its own.
        # Asked on its own: a principal without DescribeConfigs on the cluster would otherwise
        # see the whole request refused, the topics' settings with it.
        requests.append([ConfigResource(ResourceType.BROKER, str(min(metadata.brokers)))])
    described: dict[str, dict] = {}
    unreadable: dict[str, str] = {}
    refused: dict[str, str] = {}  # what the principal may not DescribeConfigs: told once, as a note
    for resources in filter(None, requests):
        for resource, future in target_admin.describe_configs(resources, request_timeout=timeout_s).items():
            key = "" if resource.restype == ResourceType.BROKER else resource.name
            try:
                described[key] = future.result(timeout_s)
            except KafkaException as exc:
                (refused if _not_authorized(exc) else unreadable)[key] = _kafka_error(exc)
    defaults = described.get("", {})

    problems: list[Problem] = []
    unchecked: list[str] = []
    remote: dict[tuple[bool, Replication], list[str]] = {}
    for topic in topics:
        exists = topic.name in existing
        key = topic.name if exists else ""
        if key in refused:
            unchecked.append(topic.name if exists else f"{topic.name} (not created yet: the broker defaults)")
            continue
        cause = unreadable.get(key)
        if cause is not None:
            problems.append(
                warning(
                    f"{flow.target}:{topic.name}",
                    f"{topic.what} {topic.name} on {flow.target}: its replication settings could not be read ({cause})",
                    "check that the target answers DescribeConfigs, then run validate --connect again",
                )
            )
            continue
        if exists:
            partitions = metadata.topics[topic.name].partitions.values()
            entries = described.get(topic.name, {})
            settings = Replication(
                factor=min((len(p.replicas) for p in partitions), default=0),
                min_insync=_as_int(entries, "min.insync.replicas", 1),
                unclean=_as_bool(entries, "unclean.leader.election.enable"),
            )
        else:
            settings = Replication(
                factor=topic.factor
                if topic.factor > 0
                else _as_int(defaults, "default.replication.factor", 1),
                min_insync=_as_int(defaults, "min.insync.replicas", 1),
                unclean=_as_bool(defaults, "unclean.leader.election.enable"),
            )
        if not shortfalls(settings, brokers=None if exists else brokers):
            continue
        if topic.what == REMOTE:
            remote.setdefault((exists, settings), []).append(topic.name)
        else:
            problems.append(problem(flow, topic, [topic.name], settings, exists, brokers))
    for (exists, settings), names in remote.items():
        topic = WrittenTopic(names[0], REMOTE, "replication.factor", flow.replication_factor)
        problems.append(problem(flow, topic, names, settings, exists, brokers))
    if unchecked:
        problems.append(unchecked_note(flow, unchecked, broker_defaults="" in refused))
    if replicates:
        problems += config_sync_problems(flow)
    return problems


def check_config_durability(config: MirrorConfig, *, timeout_s: float = TIMEOUT_S) -> list[Problem]:
    """check_flow_durability for every flow of the config (replication and heartbeats), and an
    error for each cluster that does not answer within `timeout_s` (its flows are then skipped)."""
    problems: list[Problem] = []
    silent: set[str] = set()
    for flow in config.flows:
        replicates = config.replication_enabled(flow.source, flow.target)
        heartbeats = config.heartbeats_enabled(flow.source, flow.target)
        sides = (
            (("source", flow.source), ("target", flow.target)) if replicates else (("target", flow.target),)
        )
        if any(alias in silent for _, alias in sides):
            continue
        try:
            clients = FlowClients.resolve(flow)
        except ConfigError as exc:
            problems += exc.problems
            continue
        # librdkafka would also log every failed connection attempt; one problem says it once.
        admins = {side: admin_client({**clients.admin(side), "log_level": 0}) for side, _ in sides}
        try:
            problems += check_flow_durability(
                flow,
                admins.get("source"),
                admins["target"],
                replicates=replicates,
                heartbeats=heartbeats,
                timeout_s=timeout_s,
            )
        except NotAnswering as exc:
            silent.add(exc.alias)
            side = "source" if exc.alias == flow.source else "target"
            bootstrap = clients.admin(side).get("bootstrap.servers", "(no bootstrap.servers)")
            problems.append(
                error(
                    f"{exc.alias}.bootstrap.servers",
                    f"cluster {exc.alias} at {bootstrap} did not answer within {timeout_s:g}s ({exc.cause})",
                    f"check {exc.alias}.bootstrap.servers and that the cluster is up and reachable from here",
                )
            )
    return unique(problems)
