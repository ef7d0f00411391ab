"""MM2's configuration keys: names, types and defaults, taken from MirrorMakerConfig and the
Mirror{Connector,Source,Checkpoint,Heartbeat}Config ConfigDefs (Kafka 4.0, 3.x aliases noted).

Which layer a key is read from matters as much as its default: MirrorMakerConfig keeps only
connector config names from the top level (so `use.defaults.from` or `exactly.once.support`
written there are silently dropped by MM2), passes only bootstrap/security keys from
`<alias>.*` to clients, and lets `<source>-><target>.*` override everything.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirrorflow.policy.filters import (
    CONFIG_PROPERTIES_EXCLUDE_DEFAULT,
    GROUPS_DEFAULT,
    GROUPS_EXCLUDE_DEFAULT,
    TOPICS_DEFAULT,
    TOPICS_EXCLUDE_DEFAULT,
)
from mirrorflow.policy.replication import DEFAULT_POLICY_CLASS

DEFAULT_TOPIC_FILTER_CLASS = "org.apache.kafka.connect.mirror.DefaultTopicFilter"
DEFAULT_GROUP_FILTER_CLASS = "org.apache.kafka.connect.mirror.DefaultGroupFilter"
DEFAULT_CONFIG_PROPERTY_FILTER_CLASS = "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter"
DEFAULT_FORWARDING_ADMIN_CLASS = "org.apache.kafka.clients.admin.ForwardingAdmin"


@dataclass(frozen=True, slots=True)
class KeySpec:
    """One MM2 connector key.

    `type` is the ConfigDef type (boolean, short, int, long, list, string, class) or `choice`.
    `strict=False` marks values MM2 accepts without checking (mirrorflow warns instead of failing).
    """

    name: str
    type: str
    default: object
    doc: str
    connector: str
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    unit: str | None = None
    strict: bool = True
    replication_factor: bool = False

    @property
    def attribute(self) -> str:
        """The FlowConfig attribute that holds this key's value."""
        return self.name.replace(".", "_").replace("-", "_")


def _interval(prefix: str, default: int, doc: str, connector: str) -> tuple[KeySpec, KeySpec]:
    return (
        KeySpec(f"{prefix}.enabled", "boolean", True, f"Whether to {doc}.", connector),
        KeySpec(
            f"{prefix}.interval.seconds",
            "long",
            default,
            f"How often to {doc}, in seconds (negative: never).",
            connector,
            unit="seconds",
        ),
    )


CONNECTOR_KEYS: tuple[KeySpec, ...] = (
    KeySpec(
        "enabled",
        "boolean",
        False,
        "Whether to replicate source->target (MM2 defaults it to false for every pair).",
        "common",
    ),
    KeySpec(
        "tasks.max",
        "int",
        1,
        "Most tasks per connector; mirrorflow copies at most this many partitions of a flow at once (Spark tasks).",
        "common",
        minimum=1,
    ),
    KeySpec("admin.timeout.ms", "long", 60000, "Timeout for admin calls.", "common", unit="milliseconds"),
    KeySpec(
        "replication.policy.class",
        "class",
        DEFAULT_POLICY_CLASS,
        "How remote topics are named: an MM2 class name (Default, Identity, any `*.LegacyReplicationPolicy`) "
        "or a dotted Python path.",
        "common",
    ),
    KeySpec("replication.policy.separator", "string", ".", "Separator in remote topic names.", "common"),
    KeySpec(
        "replication.policy.internal.topic.separator.enabled",
        "boolean",
        True,
        "Use the custom separator in offset-syncs and checkpoints topic names too (KIP-690/949).",
        "common",
    ),
    KeySpec(
        "offset-syncs.topic.location",
        "choice",
        "source",
        "Cluster holding the offset-syncs topic: `source` or `target`.",
        "common",
        choices=("source", "target"),
    ),
    KeySpec(
        "emit.offset-syncs.enabled",
        "boolean",
        True,
        "Whether to record offset-syncs (checkpoints need them).",
        "common",
    ),
    KeySpec(
        "forwarding.admin.class",
        "class",
        DEFAULT_FORWARDING_ADMIN_CLASS,
        "Admin wrapper class (Java only).",
        "common",
    ),
    KeySpec("topic.filter.class", "class", DEFAULT_TOPIC_FILTER_CLASS, "Topic filter class.", "common"),
    KeySpec("group.filter.class", "class", DEFAULT_GROUP_FILTER_CLASS, "Group filter class.", "checkpoint"),
    KeySpec(
        "config.property.filter.class",
        "class",
        DEFAULT_CONFIG_PROPERTY_FILTER_CLASS,
        "Topic config property filter class.",
        "source",
    ),
    KeySpec(
        "topics",
        "list",
        TOPICS_DEFAULT,
        "Topics to replicate: a comma list of regexes, joined with `|`, matched against whole names; an empty "
        "list matches nothing.",
        "source",
    ),
    KeySpec(
        "topics.exclude",
        "list",
        TOPICS_EXCLUDE_DEFAULT,
        "Topics never replicated; wins over `topics`.",
        "source",
    ),
    KeySpec(
        "config.properties.exclude",
        "list",
        CONFIG_PROPERTIES_EXCLUDE_DEFAULT,
        "Topic config properties never created on or synced to remote topics.",
        "source",
    ),
    KeySpec(
        "use.defaults.from",
        "choice",
        "target",
        "Whose defaults default-valued topic configs get: `target` (deleted on the target) or `source` (copied).",
        "source",
        choices=("source", "target"),
        strict=False,
    ),
    KeySpec(
        "consumer.poll.timeout.ms",
        "long",
        1000,
        "Poll timeout on the source.",
        "source",
        unit="milliseconds",
    ),
    *_interval("refresh.topics", 600, "look for new topics and partitions", "source"),
    *_interval("sync.topic.configs", 600, "sync topic configs", "source"),
    *_interval("sync.topic.acls", 600, "sync topic ACLs", "source"),
    KeySpec(
        "replication.factor",
        "int",
        2,
        "Replication factor of created remote topics (-1: broker default); 3 for a durable target.",
        "source",
        replication_factor=True,
    ),
    KeySpec(
        "offset-syncs.topic.replication.factor",
        "short",
        3,
        "Replication factor of the offset-syncs topic.",
        "source",
        replication_factor=True,
    ),
    KeySpec(
        "offset.lag.max", "long", 100, "Offsets a partition may advance before a new offset-sync.", "source"
    ),
    KeySpec(
        "heartbeats.replication.enabled",
        "boolean",
        True,
        "Replicate heartbeat topics even when `topics` does not include them.",
        "source",
    ),
    KeySpec(
        "use.incremental.alter.configs",
        "choice",
        "requested",
        "How topic configs are synced (Kafka 3.5-3.9): incrementalAlterConfigs requested, required or never.",
        "source",
        choices=("requested", "required", "never"),
    ),
    KeySpec(
        "add.source.alias.to.metrics",
        "boolean",
        False,
        "Whether metrics name topics with the source alias (Kafka 3.x).",
        "source",
    ),
    KeySpec(
        "exactly.once.support",
        "choice",
        "requested",
        "Connect exactly-once source support (flow level only); mirrorflow's copies follow `mirrorflow.delivery`.",
        "source",
        choices=("requested", "required"),
    ),
    KeySpec(
        "groups",
        "list",
        GROUPS_DEFAULT,
        "Consumer groups to checkpoint: a comma list of regexes matched against whole names.",
        "checkpoint",
    ),
    KeySpec(
        "groups.exclude",
        "list",
        GROUPS_EXCLUDE_DEFAULT,
        "Groups never checkpointed; wins over `groups`.",
        "checkpoint",
    ),
    *_interval("refresh.groups", 600, "look for new consumer groups", "checkpoint"),
    *_interval("emit.checkpoints", 60, "emit checkpoints", "checkpoint"),
    KeySpec(
        "sync.group.offsets.enabled",
        "boolean",
        False,
        "Whether to commit translated offsets for groups on the target.",
        "checkpoint",
    ),
    KeySpec(
        "sync.group.offsets.interval.seconds",
        "long",
        60,
        "How often to sync group offsets, in seconds.",
        "checkpoint",
        unit="seconds",
    ),
    KeySpec(
        "checkpoints.topic.replication.factor",
        "short",
        3,
        "Replication factor of the checkpoints topic; also used for `mirrorflow-runs.internal`.",
        "checkpoint",
        replication_factor=True,
    ),
    *_interval("emit.heartbeats", 1, "emit heartbeats", "heartbeat"),
    KeySpec(
        "heartbeats.topic.replication.factor",
        "short",
        3,
        "Replication factor of the heartbeats topic.",
        "heartbeat",
        replication_factor=True,
    ),
)
CONNECTOR_KEYS_BY_NAME = {spec.name: spec for spec in CONNECTOR_KEYS}

# The Connect worker keys that place MM2's source offsets, which are mirrorflow's progress
# (DistributedConfig's defaults). MM2 reads them at the top level or as `<target>.<key>`.
OFFSET_STORAGE_KEYS: tuple[KeySpec, ...] = (
    KeySpec(
        "offset.storage.topic",
        "string",
        "mm2-offsets.<source>.internal",
        "Progress topic on the target: MM2's Connect source offsets, which mirrorflow reads and writes.",
        "worker",
    ),
    KeySpec(
        "offset.storage.replication.factor",
        "short",
        3,
        "Replication factor of the progress topic when mirrorflow creates it (-1: broker default).",
        "worker",
    ),
    KeySpec(
        "offset.storage.partitions",
        "int",
        25,
        "Partition count of the progress topic when mirrorflow creates it (-1: broker default).",
        "worker",
    ),
)

# The keys that shape the file (MirrorMakerConfig): which clusters exist, how each is reached,
# which clients get which settings, and where secrets come from.
FILE_KEYS: tuple[KeySpec, ...] = (
    KeySpec(
        "clusters",
        "list",
        None,
        "Aliases of the clusters (required); every `<alias>.` and `<source>-><target>.` key names them.",
        "mirrormaker",
    ),
    KeySpec(
        "<alias>.bootstrap.servers",
        "list",
        None,
        "The cluster's brokers, required for every cluster a flow uses unless its "
        "`<alias>.airflow.connection.id` gives them; at the top level, every cluster's.",
        "cluster",
    ),
    KeySpec(
        "<alias>.security.protocol",
        "string",
        "PLAINTEXT",
        "How clients reach the cluster; with the cluster's `ssl.*` and `sasl.*` keys it also configures "
        "its producer, consumer and admin clients. At the top level: every cluster's.",
        "cluster",
    ),
    KeySpec(
        "<alias>.consumer.*, <alias>.producer.*, <alias>.admin.*",
        "client settings",
        None,
        "Settings of one kind of client of the cluster (Java names, translated to librdkafka's).",
        "cluster",
    ),
    KeySpec(
        "config.providers",
        "list",
        None,
        "Kafka config providers, each with `config.providers.<name>.class` (and `.param.*`); values "
        "reference them as `${<name>:...}`.",
        "mirrormaker",
    ),
)

# 3.x names MM2 4.0 removed (KAFKA-17529); 3.x used the new name when both were set.
DEPRECATED_ALIASES = {
    "topics.blacklist": "topics.exclude",
    "groups.blacklist": "groups.exclude",
    "config.properties.blacklist": "config.properties.exclude",
}
