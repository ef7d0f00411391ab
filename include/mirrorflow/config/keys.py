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

# MirrorClientConfig.CLIENT_CONFIG_DEF: the only `<alias>.*` keys MM2 hands to clients.
SSL_CLIENT_KEYS = frozenset(
    {
        "ssl.protocol",
        "ssl.provider",
        "ssl.cipher.suites",
        "ssl.enabled.protocols",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm",
        "ssl.secure.random.implementation",
        "ssl.engine.factory.class",
    }
)
SASL_CLIENT_KEYS = frozenset(
    {
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "sasl.mechanism",
        "sasl.jaas.config",
        "sasl.client.callback.handler.class",
        "sasl.login.callback.handler.class",
        "sasl.login.class",
        "sasl.login.connect.timeout.ms",
        "sasl.login.read.timeout.ms",
        "sasl.login.retry.backoff.max.ms",
        "sasl.login.retry.backoff.ms",
        "sasl.oauthbearer.scope.claim.name",
        "sasl.oauthbearer.sub.claim.name",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.jwks.endpoint.url",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "sasl.oauthbearer.clock.skew.seconds",
        "sasl.oauthbearer.expected.audience",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.header.urlencode",
    }
)
CLIENT_CONFIG_NAMES = (
    frozenset({"bootstrap.servers", "security.protocol"}) | SSL_CLIENT_KEYS | SASL_CLIENT_KEYS
)
# librdkafka's own credential keys. MM2 ignores them; mirrorflow spreads them from `<alias>.*`
# and the top level exactly like the Java security keys above, so `backup.ssl.ca.location`
# or `backup.sasl.password` work where a Java key store or JAAS entry cannot be translated.
LIBRDKAFKA_SECURITY_KEYS = frozenset(
    {
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.ca.certificate.stores",
        "ssl.crl.location",
        "ssl.certificate.location",
        "ssl.certificate.pem",
        "ssl.key.location",
        "ssl.key.pem",
        "ssl.providers",
        "enable.ssl.certificate.verification",
        "sasl.username",
        "sasl.password",
        "sasl.kerberos.keytab",
        "sasl.kerberos.principal",
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.scope",
        "sasl.oauthbearer.extensions",
        "sasl.oauthbearer.config",
        "enable.sasl.oauthbearer.unsecure.jwt",
    }
)
SHARED_CLIENT_KEYS = CLIENT_CONFIG_NAMES | LIBRDKAFKA_SECURITY_KEYS
CLIENT_PREFIXES = ("producer.", "consumer.", "admin.")

# Connect's ConnectorConfig keys, part of every MM2 connector's ConfigDef.
CONNECT_CONNECTOR_KEYS = frozenset(
    {
        "name",
        "connector.class",
        "tasks.max",
        "tasks.max.enforce",
        "key.converter",
        "value.converter",
        "header.converter",
        "transforms",
        "predicates",
        "config.action.reload",
        "errors.retry.timeout",
        "errors.retry.delay.max.ms",
        "errors.tolerance",
        "errors.log.enable",
        "errors.log.include.messages",
    }
)
OTHER_CONNECTOR_KEYS = frozenset(
    {
        "source.cluster.alias",
        "target.cluster.alias",
        "metric.reporters",
    }
)
# Keys MM2 reads only from the connector's own (flow-level) config: not ConfigDef names.
FLOW_ONLY_KEYS = frozenset({"use.defaults.from", "exactly.once.support", "transaction.boundary"})

# MirrorMakerConfig.connectorBaseConfig keeps these names from the top level.
CONNECTOR_CONFIG_NAMES = (
    frozenset(CONNECTOR_KEYS_BY_NAME) - FLOW_ONLY_KEYS
    | CONNECT_CONNECTOR_KEYS
    | OTHER_CONNECTOR_KEYS
    | CLIENT_CONFIG_NAMES
    | frozenset(DEPRECATED_ALIASES)
)

# MirrorMakerConfig's own keys and the worker prefixes it accepts from the top level.
MIRRORMAKER_KEYS = frozenset(
    {"clusters", "config.providers", "dedicated.mode.enable.internal.rest", "listeners"}
)
WORKER_PREFIXES = (
    "offset.storage",
    "config.storage",
    "status.storage",
    "key.converter",
    "value.converter",
    "header.converter",
    "task",
    "worker",
    "replication.policy",
    "config.providers",
    "rest.",
    "admin.listeners",
)

# Kafka's producer, consumer and admin client keys (ProducerConfig, ConsumerConfig,
# AdminClientConfig, CommonClientConfigs): recognised so a client key written where MM2 does
# not pass it to clients gets a precise message.
JAVA_CLIENT_KEYS = frozenset(
    {
        "acks",
        "allow.auto.create.topics",
        "auto.commit.interval.ms",
        "auto.include.jmx.reporter",
        "auto.offset.reset",
        "batch.size",
        "bootstrap.servers",
        "buffer.memory",
        "check.crcs",
        "client.dns.lookup",
        "client.id",
        "client.rack",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
        "connections.max.idle.ms",
        "default.api.timeout.ms",
        "delivery.timeout.ms",
        "enable.auto.commit",
        "enable.idempotence",
        "enable.metrics.push",
        "exclude.internal.topics",
        "fetch.max.bytes",
        "fetch.max.wait.ms",
        "fetch.min.bytes",
        "group.id",
        "group.instance.id",
        "group.protocol",
        "group.remote.assignor",
        "heartbeat.interval.ms",
        "interceptor.classes",
        "isolation.level",
        "key.deserializer",
        "key.serializer",
        "linger.ms",
        "max.block.ms",
        "max.in.flight.requests.per.connection",
        "max.partition.fetch.bytes",
        "max.poll.interval.ms",
        "max.poll.records",
        "max.request.size",
        "metadata.max.age.ms",
        "metadata.max.idle.ms",
        "metadata.recovery.strategy",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "partition.assignment.strategy",
        "partitioner.adaptive.partitioning.enable",
        "partitioner.availability.timeout.ms",
        "partitioner.class",
        "partitioner.ignore.keys",
        "receive.buffer.bytes",
        "reconnect.backoff.max.ms",
        "reconnect.backoff.ms",
        "request.timeout.ms",
        "retries",
        "retry.backoff.max.ms",
        "retry.backoff.ms",
        "security.providers",
        "send.buffer.bytes",
        "session.timeout.ms",
        "socket.connection.setup.timeout.max.ms",
        "socket.connection.setup.timeout.ms",
        "transaction.timeout.ms",
        "transactional.id",
        "value.deserializer",
        "value.serializer",
    }
)

# Connect worker keys MM2 reads per target cluster (`<alias>.<key>`); mirrorflow runs no Connect
# worker, so they are accepted and have no effect.
WORKER_KEYS = frozenset(
    {
        "exactly.once.source.support",
        "offset.flush.interval.ms",
        "offset.flush.timeout.ms",
        "client.id",
        "group.id",
        "listeners",
        "scheduled.rebalance.max.delay.ms",
        "task.shutdown.graceful.timeout.ms",
        "connector.client.config.override.policy",
        "dedicated.mode.enable.internal.rest",
    }
)

# Keys seen in blog posts and other tools' docs (MirrorMaker 1, Confluent Replicator) that MM2
# does not have. A "did you mean" for these would name a key that means something else
# (`sync.topic.configs.strategy` is not a misspelt `sync.topic.configs.enabled`), so each says
# what MM2 does instead: name -> (what MM2 does, the fix).
FOREIGN_KEYS: dict[str, tuple[str, str]] = {
    "sync.topic.configs.strategy": (
        "MM2 has no strategy for topic config sync: while sync.topic.configs.enabled is true (the default) it "
        "copies every topic config of a replicated topic every sync.topic.configs.interval.seconds, except "
        "the properties config.properties.exclude matches (by default the throttled-replica lists, "
        "message.timestamp.*, unclean.leader.election.enable and min.insync.replicas)",
        "remove it; list the topic configs MM2 must leave alone in config.properties.exclude, or set "
        "sync.topic.configs.enabled = false to sync none",
    ),
    "topics.whitelist": (
        "MirrorMaker 1's name; MM2 selects topics with topics (comma-separated regexes, default .*)",
        "write topics = <regex>, <regex>",
    ),
    "whitelist": (
        "MirrorMaker 1's --whitelist; MM2 selects topics with topics (comma-separated regexes, default .*)",
        "write topics = <regex>, <regex>",
    ),
    "blacklist": (
        "MirrorMaker 1's --blacklist; MM2 leaves out topics matching topics.exclude",
        "write topics.exclude = <regex>, <regex> (keep the defaults .*[\\-\\.]internal, .*\\.replica, __.* in the list)",
    ),
    "groups.whitelist": (
        "MM2 selects consumer groups with groups (comma-separated regexes, default .*)",
        "write groups = <regex>, <regex>",
    ),
    "topic.whitelist": (
        "Confluent Replicator's key; MM2 selects topics with topics (comma-separated regexes)",
        "write topics = <topic>, <topic>",
    ),
    "topic.regex": (
        "Confluent Replicator's key; MM2 selects topics with topics (comma-separated regexes)",
        "write topics = <regex>",
    ),
    "topic.blacklist": (
        "Confluent Replicator's key; MM2 leaves out topics matching topics.exclude",
        "write topics.exclude = <regex>, <regex> (keep the defaults .*[\\-\\.]internal, .*\\.replica, __.* in the list)",
    ),
    "topic.rename.format": (
        "Confluent Replicator's key; MM2 names remote topics with replication.policy.class: "
        "DefaultReplicationPolicy writes <source alias><separator><topic>, IdentityReplicationPolicy keeps the name",
        "remove it; set replication.policy.class (and replication.policy.separator) instead",
    ),
    "topic.config.sync": (
        "Confluent Replicator's key; MM2 syncs topic configs while sync.topic.configs.enabled is true (the default)",
        "write sync.topic.configs.enabled = true or false",
    ),
    "topic.auto.create": (
        "Confluent Replicator's key; MM2 always creates missing remote topics with the source's partition count",
        "remove it",
    ),
    "topic.preserve.partitions": (
        "Confluent Replicator's key; MM2 always gives a remote topic the source's partition count (and grows it "
        "when the source grows)",
        "remove it",
    ),
    "src.kafka.bootstrap.servers": (
        "Confluent Replicator's key; MM2 names each cluster in clusters and reads <alias>.bootstrap.servers",
        "write <source alias>.bootstrap.servers = host:9092",
    ),
    "dest.kafka.bootstrap.servers": (
        "Confluent Replicator's key; MM2 names each cluster in clusters and reads <alias>.bootstrap.servers",
        "write <target alias>.bootstrap.servers = host:9092",
    ),
    "num.streams": (
        "MirrorMaker 1's consumer stream count; MM2 runs at most tasks.max tasks per flow",
        "write tasks.max = <n>",
    ),
}
