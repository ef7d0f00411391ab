"""Which layer and which program a configuration key belongs to: the `<alias>.*` keys MM2 hands
to clients (and librdkafka's security keys mirrorflow accepts beside them), Connect's connector
and worker keys, the Java client keys librdkafka has no use for, and keys of other replicators
that MM2 does not have (each with what MM2 does instead). config/keys.py holds MM2's own keys
with their defaults."""

from __future__ import annotations

from mirrorflow.config.keys import CONNECTOR_KEYS_BY_NAME, DEPRECATED_ALIASES

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
# Top-level keys MM2 copies into every herder's worker config (MirrorMakerConfig.workerConfig).
WORKER_TOP_LEVEL_PREFIXES = (
    "offset.storage",
    "config.storage",
    "status.storage",
    "key.converter",
    "value.converter",
    "header.converter",
    "task",
    "worker",
    "replication.policy",
)
WORKER_PREFIXES = (*WORKER_TOP_LEVEL_PREFIXES, "config.providers", "rest.", "admin.listeners")

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
