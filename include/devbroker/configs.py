"""Kafka's topic and broker config definitions: types, defaults, validators, synonyms, sources.

Clients and tools (kafka-configs, AdminClient, MirrorMaker 2's config sync) compare what a
broker reports with what Kafka would report, so names, value strings, sources and synonym
lists follow Kafka 3.9 (which still has the keys 4.0 dropped, so topics synced from older
clusters keep their configs). Values are held as Kafka's strings; parsed values come from
`parse`.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647


class ConfigType(enum.IntEnum):
    """DescribeConfigs config_type ids."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs config_source ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class InvalidConfig(ValueError):
    """A config value or name Kafka would reject with INVALID_CONFIG."""


Validator = Callable[[str, Any], None]


def at_least(minimum: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: Value must be at least {minimum}"
            )

    return check


def between(low: float, high: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and not low <= value <= high:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: Value must be between {low} and {high}"
            )

    return check


def one_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value not in allowed:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(allowed)}"
            )

    return check


def list_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        for item in value:
            if item not in allowed:
                raise InvalidConfig(
                    f"Invalid value {item} for configuration {name}: String must be one of: {', '.join(allowed)}"
                )

    return check


def gzip_level(name: str, value: Any) -> None:
    if value != -1 and not 1 <= value <= 9:
        raise InvalidConfig(
            f"Invalid value {value} for configuration {name}: Value must be between 1 and 9, or -1"
        )


_THROTTLED = re.compile(r"^(\*|\d+:\d+)$")


def throttled_replicas(name: str, value: Any) -> None:
    if value == ["*"]:
        return
    for item in value:
        if not _THROTTLED.match(item):
            raise InvalidConfig(
                f"Invalid value {','.join(value)} for configuration {name}: must be the literal '*' or a list"
                " of replicas in the format [PartitionId]:[BrokerId],[PartitionId]:[BrokerId],..."
            )


@dataclasses.dataclass(frozen=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str | None
    doc: str
    validator: Validator | None = None
    synonyms: tuple[str, ...] = ()  # broker keys feeding this topic config's default, highest priority first
    dynamic: bool = False  # broker configs only: changeable with AlterConfigs
    sensitive: bool = False


def _t(name: str, type_: ConfigType, default: str | None, doc: str, validator=None, synonyms=()) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, validator, tuple(synonyms))


B, S, INT, L, D, LST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_MESSAGE_FORMAT = re.compile(r"^(0\.(8|9|10|11)(\.\d+)?|[1-9]\.\d+(\.\d+)?)(-IV\d+)?$")


def message_format(name: str, value: Any) -> None:
    """Kafka accepts any known inter-broker/message format version string (e.g. 2.8, 3.0-IV1)."""
    if not _MESSAGE_FORMAT.match(value):
        raise InvalidConfig(
            f"Invalid value {value} for configuration {name}: it is not a Kafka version such as 2.8 or 3.0-IV1"
        )


TOPIC_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        _t("cleanup.policy", LST, "delete", "delete: drop old segments by retention; compact: keep the latest record per key; both may be given.", list_of("compact", "delete"), ["log.cleanup.policy"]),
        _t("compression.type", S, "producer", "Codec the broker stores batches with; 'producer' keeps the producer's codec.", one_of(*_COMPRESSION), ["compression.type"]),
        _t("compression.gzip.level", INT, "-1", "Level used when the broker compresses with gzip.", gzip_level, ["compression.gzip.level"]),
        _t("compression.lz4.level", INT, "9", "Level used when the broker compresses with lz4.", between(1, 17), ["compression.lz4.level"]),
        _t("compression.zstd.level", INT, "3", "Level used when the broker compresses with zstd.", between(-131072, 22), ["compression.zstd.level"]),
        _t("delete.retention.ms", L, "86400000", "How long tombstones stay readable after compaction reached them.", at_least(0), ["log.cleaner.delete.retention.ms"]),
        _t("file.delete.delay.ms", L, "60000", "Delay before a deleted segment file is removed.", at_least(0), ["log.segment.delete.delay.ms"]),
        _t("flush.messages", L, str(LONG_MAX), "Records written between forced fsyncs.", at_least(1), ["log.flush.interval.messages"]),
        _t("flush.ms", L, str(LONG_MAX), "Milliseconds between forced fsyncs.", at_least(0), ["log.flush.interval.ms"]),
        _t("follower.replication.throttled.replicas", LST, "", "Replicas whose follower traffic is throttled ('*' for all).", throttled_replicas),
        _t("index.interval.bytes", INT, "4096", "Bytes between offset index entries.", at_least(0), ["log.index.interval.bytes"]),
        _t("leader.replication.throttled.replicas", LST, "", "Replicas whose leader traffic is throttled ('*' for all).", throttled_replicas),
        _t("local.retention.bytes", L, "-2", "Local bytes kept when tiered storage is on; -2 means retention.bytes.", at_least(-2), ["log.local.retention.bytes"]),
        _t("local.retention.ms", L, "-2", "Local time kept when tiered storage is on; -2 means retention.ms.", at_least(-2), ["log.local.retention.ms"]),
        _t("max.compaction.lag.ms", L, str(LONG_MAX), "Longest time a record may stay uncompacted.", at_least(1), ["log.cleaner.max.compaction.lag.ms"]),
        _t("max.message.bytes", INT, "1048588", "Largest record batch the topic accepts.", at_least(0), ["message.max.bytes"]),
        _t("message.downconversion.enable", B, "true", "Whether old fetch versions may get down-converted batches.", None, ["log.message.downconversion.enable"]),
        _t("message.format.version", S, "3.0-IV1", "Legacy message format setting (ignored for v2 batches).", message_format, ["log.message.format.version"]),
        _t("message.timestamp.after.max.ms", L, str(LONG_MAX), "How far in the future a CreateTime timestamp may be.", at_least(0), ["log.message.timestamp.after.max.ms"]),
        _t("message.timestamp.before.max.ms", L, str(LONG_MAX), "How far in the past a CreateTime timestamp may be.", at_least(0), ["log.message.timestamp.before.max.ms"]),
        _t("message.timestamp.difference.max.ms", L, str(LONG_MAX), "Deprecated bound on CreateTime timestamp distance from the broker clock.", at_least(0), ["log.message.timestamp.difference.max.ms"]),
        _t("message.timestamp.type", S, "CreateTime", "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's.", one_of("CreateTime", "LogAppendTime"), ["log.message.timestamp.type"]),
        _t("min.cleanable.dirty.ratio", D, "0.5", "Share of uncompacted log that makes the cleaner run.", between(0, 1), ["log.cleaner.min.cleanable.ratio"]),
        _t("min.compaction.lag.ms", L, "0", "Records younger than this are not compacted.", at_least(0), ["log.cleaner.min.compaction.lag.ms"]),
        _t("min.insync.replicas", INT, "1", "Replicas that must be in sync for acks=all produce to succeed.", at_least(1), ["min.insync.replicas"]),
        _t("preallocate", B, "false", "Preallocate segment files.", None, ["log.preallocate"]),
        _t("remote.log.copy.disable", B, "false", "Stop copying segments to tiered storage.", None),
        _t("remote.log.delete.on.disable", B, "false", "Delete tiered data when tiered storage is turned off.", None),
        _t("remote.storage.enable", B, "false", "Tiered storage for the topic.", None),
        _t("retention.bytes", L, "-1", "Largest size a partition may grow to before old segments are deleted; -1 is unlimited.", None, ["log.retention.bytes"]),
        _t("retention.ms", L, "604800000", "Age after which segments are deleted; -1 is unlimited.", at_least(-1), ["log.retention.ms"]),
        _t("segment.bytes", INT, "1073741824", "Size at which a new segment file is started.", at_least(14), ["log.segment.bytes"]),
        _t("segment.index.bytes", INT, "10485760", "Size of a segment's offset index.", at_least(4), ["log.index.size.max.bytes"]),
        _t("segment.jitter.ms", L, "0", "Random jitter subtracted from segment.ms.", at_least(0), ["log.roll.jitter.ms"]),
        _t("segment.ms", L, "604800000", "Age at which a new segment is started even if not full.", at_least(1), ["log.roll.ms"]),
        _t("unclean.leader.election.enable", B, "false", "Allow out-of-sync replicas to become leader.", None, ["unclean.leader.election.enable"]),
    )
}  # fmt: skip


def _b(
    name: str, type_: ConfigType, default: str | None, doc: str, validator=None, dynamic=False
) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, validator, (), dynamic)


# Broker keys a user can pass with --override. Those with dynamic=True can also be changed at
# run time with AlterConfigs on the BROKER resource, as in Kafka.
BROKER_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        _b("auto.create.topics.enable", B, "false", "Create unknown topics on metadata requests that allow it. devbroker default is false (Kafka's is true) so that tests never create topics by accident."),
        _b("compression.type", S, "producer", "Default for the topic config compression.type.", one_of(*_COMPRESSION), True),
        _b("compression.gzip.level", INT, "-1", "Default for compression.gzip.level.", gzip_level, True),
        _b("compression.lz4.level", INT, "9", "Default for compression.lz4.level.", between(1, 17), True),
        _b("compression.zstd.level", INT, "3", "Default for compression.zstd.level.", between(-131072, 22), True),
        _b("default.replication.factor", INT, "1", "Replication factor of topics created with -1 (must be 1 on this single node)."),
        _b("delete.topic.enable", B, "true", "Allow DeleteTopics."),
        _b("group.initial.rebalance.delay.ms", INT, "3000", "Wait for more members before the first rebalance of an empty group."),
        _b("group.max.session.timeout.ms", INT, "1800000", "Largest session timeout a member may ask for."),
        _b("group.max.size", INT, str(INT_MAX), "Most members a classic group may have.", at_least(1)),
        _b("group.min.session.timeout.ms", INT, "6000", "Smallest session timeout a member may ask for."),
        _b("log.cleaner.backoff.ms", L, "15000", "Pause of the log cleaner when there is nothing to clean.", at_least(0), True),
        _b("log.cleaner.delete.retention.ms", L, "86400000", "Default for delete.retention.ms.", at_least(0), True),
        _b("log.cleaner.enable", B, "true", "Run the log cleaner for compacted topics."),
        _b("log.cleaner.max.compaction.lag.ms", L, str(LONG_MAX), "Default for max.compaction.lag.ms.", at_least(1), True),
        _b("log.cleaner.min.cleanable.ratio", D, "0.5", "Default for min.cleanable.dirty.ratio.", between(0, 1), True),
        _b("log.cleaner.min.compaction.lag.ms", L, "0", "Default for min.compaction.lag.ms.", at_least(0), True),
        _b("log.cleanup.policy", LST, "delete", "Default for cleanup.policy.", list_of("compact", "delete"), True),
        _b("log.dirs", S, None, "Data directory (devbroker takes it from --data-dir)."),
        _b("log.flush.interval.messages", L, str(LONG_MAX), "Default for flush.messages.", at_least(1), True),
        _b("log.flush.interval.ms", L, None, "Default for flush.ms.", None, True),
        _b("log.flush.scheduler.interval.ms", L, str(LONG_MAX), "How often logs are checked for a needed flush."),
        _b("log.index.interval.bytes", INT, "4096", "Default for index.interval.bytes.", at_least(0), True),
        _b("log.index.size.max.bytes", INT, "10485760", "Default for segment.index.bytes.", at_least(4), True),
        _b("log.local.retention.bytes", L, "-2", "Default for local.retention.bytes.", at_least(-2), True),
        _b("log.local.retention.ms", L, "-2", "Default for local.retention.ms.", at_least(-2), True),
        _b("log.message.downconversion.enable", B, "true", "Default for message.downconversion.enable.", None, True),
        _b("log.message.format.version", S, "3.0-IV1", "Default for message.format.version.", message_format),
        _b("log.message.timestamp.after.max.ms", L, str(LONG_MAX), "Default for message.timestamp.after.max.ms.", at_least(0), True),
        _b("log.message.timestamp.before.max.ms", L, str(LONG_MAX), "Default for message.timestamp.before.max.ms.", at_least(0), True),
        _b("log.message.timestamp.difference.max.ms", L, str(LONG_MAX), "Default for message.timestamp.difference.max.ms.", at_least(0), True),
        _b("log.message.timestamp.type", S, "CreateTime", "Default for message.timestamp.type.", one_of("CreateTime", "LogAppendTime"), True),
        _b("log.preallocate", B, "false", "Default for preallocate.", None, True),
        _b("log.retention.bytes", L, "-1", "Default for retention.bytes.", None, True),
        _b("log.retention.check.interval.ms", L, "300000", "How often retention is enforced.", at_least(1)),
        _b("log.retention.hours", INT, "168", "Default for retention.ms, in hours (lowest priority).", None, True),
        _b("log.retention.minutes", INT, None, "Default for retention.ms, in minutes.", None, True),
        _b("log.retention.ms", L, None, "Default for retention.ms (highest priority).", None, True),
        _b("log.roll.hours", INT, "168", "Default for segment.ms, in hours.", at_least(1), True),
        _b("log.roll.jitter.hours", INT, "0", "Default for segment.jitter.ms, in hours.", at_least(0), True),
        _b("log.roll.jitter.ms", L, None, "Default for segment.jitter.ms.", None, True),
        _b("log.roll.ms", L, None, "Default for segment.ms.", None, True),
        _b("log.segment.bytes", INT, "1073741824", "Default for segment.bytes.", at_least(14), True),
        _b("log.segment.delete.delay.ms", L, "60000", "Default for file.delete.delay.ms.", at_least(0), True),
        _b("message.max.bytes", INT, "1048588", "Default for max.message.bytes.", at_least(0), True),
        _b("min.insync.replicas", INT, "1", "Default for min.insync.replicas.", at_least(1), True),
        _b("num.partitions", INT, "1", "Partitions of topics created with -1 or auto-created.", at_least(1)),
        _b("offset.metadata.max.bytes", INT, "4096", "Largest metadata string of a committed offset."),
        _b("offsets.retention.check.interval.ms", L, "600000", "How often expired offsets are removed.", at_least(1)),
        _b("offsets.retention.minutes", INT, "10080", "How long offsets of empty groups are kept.", at_least(1)),
        _b("offsets.topic.num.partitions", INT, "50", "Accepted for compatibility; devbroker keeps offsets in its journal.", at_least(1)),
        _b("offsets.topic.replication.factor", INT, "3", "Accepted for compatibility; devbroker keeps offsets in its journal.", at_least(1)),
        _b("producer.id.expiration.ms", INT, "86400000", "Idle time after which a producer id's state may be dropped.", at_least(1)),
        _b("socket.request.max.bytes", INT, "104857600", "Largest request the server reads; larger ones close the connection.", at_least(1)),
        _b("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, "10000", "How often the coordinator looks for expired transactions.", at_least(1)),
        _b("transaction.max.timeout.ms", INT, "900000", "Largest transaction.timeout.ms a producer may ask for.", at_least(1)),
        _b("transaction.state.log.min.isr", INT, "2", "Accepted for compatibility; devbroker keeps transaction state in its journal.", at_least(1)),
        _b("transaction.state.log.replication.factor", INT, "3", "Accepted for compatibility; devbroker keeps transaction state in its journal.", at_least(1)),
        _b("transactional.id.expiration.ms", INT, "604800000", "Idle time after which a transactional id is forgotten.", at_least(1)),
        _b("unclean.leader.election.enable", B, "false", "Default for unclean.leader.election.enable.", None, True),
    )
}  # fmt: skip

# Broker keys that feed one topic config, in Kafka's priority order (first set wins).
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}
_UNIT_MS = {"hours": 3_600_000, "minutes": 60_000}

# Applied on the BROKER resource, never stored: compacts topics on demand (tests, the demo).
COMPACT_NOW_KEY = "devbroker.compact.now"


def broker_synonyms(name: str) -> tuple[str, ...]:
    return BROKER_SYNONYMS.get(name, (name,))


def parse(definition: ConfigDef, raw: str | None) -> Any:
    """Kafka's ConfigDef.parseType followed by the validator."""
    name = definition.name
    if raw is None:
        value = None
    else:
        text = raw.strip()
        try:
            if definition.type is ConfigType.BOOLEAN:
                low = text.lower()
                if low not in ("true", "false"):
                    raise ValueError
                value: Any = low == "true"
            elif definition.type in (ConfigType.INT, ConfigType.SHORT):
                value = int(text)
                if not -(2**31) <= value < 2**31:
                    raise ValueError
            elif definition.type is ConfigType.LONG:
                value = int(text)
                if not -(2**63) <= value < 2**63:
                    raise ValueError
            elif definition.type is ConfigType.DOUBLE:
                value = float(text)
            elif definition.type is ConfigType.LIST:
                value = [item.strip() for item in text.split(",")] if text else []
            else:
                value = text
        except ValueError:
            kind = definition.type.name.lower()
            raise InvalidConfig(
                f"Invalid value {raw} for configuration {name}: Expected value to be a {kind}"
            ) from None
    if definition.validator is not None and value is not None:
        definition.validator(name, value)
    return value


def to_string(definition: ConfigDef, value: Any) -> str | None:
    """Kafka's ConfigDef.convertToString."""
    if value is None:
        return None
    if definition.type is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if definition.type is ConfigType.LIST:
        return ",".join(value)
    if definition.type is ConfigType.DOUBLE:
        return repr(float(value))
    return str(value)


def normalize(definition: ConfigDef, raw: str | None) -> str | None:
    """Validate and return the canonical string Kafka would report for `raw`."""
    return to_string(definition, parse(definition, raw))


class BrokerConfig:
    """Static (--override) and dynamic (AlterConfigs on BROKER) broker config values."""

    def __init__(self, node_id: int, overrides: Mapping[str, str]) -> None:
        self.node_id = node_id
        self.static: dict[str, str] = {}
        self.dynamic_node: dict[str, str] = {}
        self.dynamic_default: dict[str, str] = {}
        errors = []
        for key, raw in overrides.items():
            definition = BROKER_CONFIGS.get(key)
            if definition is None:
                errors.append(
                    f"unknown broker config {key!r} (known: see `python -m devbroker --list-configs`)"
                )
                continue
            try:
                self.static[key] = normalize(definition, raw) or ""
            except InvalidConfig as exc:
                errors.append(str(exc))
        if errors:
            raise InvalidConfig("; ".join(errors))

    def raw(self, key: str) -> str | None:
        for layer in (self.dynamic_node, self.dynamic_default, self.static):
            if key in layer:
                return layer[key]
        return BROKER_CONFIGS[key].default

    def get(self, key: str) -> Any:
        return parse(BROKER_CONFIGS[key], self.raw(key))

    def layers(self) -> list[tuple[dict[str, str], ConfigSource]]:
        defaults: dict[str, str] = {k: d.default for k, d in BROKER_CONFIGS.items() if d.default is not None}
        return [
            (self.dynamic_node, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, ConfigSource.STATIC_BROKER_CONFIG),
            (defaults, ConfigSource.DEFAULT_CONFIG),
        ]

    def topic_default(self, topic_key: str) -> str | None:
        """The broker-derived default of a topic config, as the string Kafka reports.

        Kafka merges its config layers first and then picks the first synonym that is set
        (log.retention.ms over .minutes over .hours), so the key order wins over the layer."""
        definition = TOPIC_CONFIGS[topic_key]
        if not definition.synonyms:
            return definition.default
        for key in broker_synonyms(definition.synonyms[0]):
            value = self.raw(key)
            if value is not None:
                return _convert_synonym(definition, key, value)
        return definition.default

    def synonyms(self, name: str, *, sensitive: bool = False) -> list[tuple[str, str | None, ConfigSource]]:
        """Kafka's configSynonyms: every layer's value of `name`'s synonyms, dropping entries
        before the first one named `name` (which is why `retention.ms` shows none by default)."""
        found = []
        names = broker_synonyms(name)
        for layer, source in self.layers():
            for key in names:
                if key in layer and layer[key] is not None:
                    found.append((key, None if sensitive else layer[key], source))
        while found and found[0][0] != name:
            found.pop(0)
        return found


def _convert_synonym(definition: ConfigDef, key: str, raw: str) -> str:
    for unit, factor in _UNIT_MS.items():
        if key.endswith("." + unit):
            millis = int(raw) * factor
            return str(-1 if millis < 0 and definition.name == "retention.ms" else millis)
    if definition.name == "retention.ms" and int(raw) < 0:
        return "-1"
    return raw


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Canonical strings of topic config overrides; InvalidConfig names the first bad key."""
    result: dict[str, str] = {}
    for key, raw in configs.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise InvalidConfig(f"Unknown topic config name: {key}")
        if raw is None:
            raise InvalidConfig(f"Null value not supported for topic configs: {key}")
        result[key] = normalize(definition, raw) or ""
    merged_min = result.get("min.compaction.lag.ms")
    merged_max = result.get("max.compaction.lag.ms")
    if merged_min is not None and merged_max is not None and int(merged_min) > int(merged_max):
        raise InvalidConfig(
            f"conflict topic config setting min.compaction.lag.ms ({merged_min}) > max.compaction.lag.ms ({merged_max})"
        )
    return result


class TopicConfigView:
    """Effective parsed values of one topic: its overrides over the broker's defaults."""

    __slots__ = ("_overrides", "_broker", "_cache")

    def __init__(self, overrides: Mapping[str, str], broker: BrokerConfig) -> None:
        self._overrides = overrides
        self._broker = broker
        self._cache: dict[str, Any] = {}

    def raw(self, key: str) -> str | None:
        if key in self._overrides:
            return self._overrides[key]
        return self._broker.topic_default(key)

    def __getitem__(self, key: str) -> Any:
        try:
            return self._cache[key]
        except KeyError:
            value = parse(TOPIC_CONFIGS[key], self.raw(key))
            self._cache[key] = value
            return value

    def invalidate(self) -> None:
        self._cache.clear()


def topic_entries(
    overrides: Mapping[str, str], broker: BrokerConfig, names: Iterable[str] | None
) -> list[tuple[ConfigDef, str | None, ConfigSource, list[tuple[str, str | None, ConfigSource]]]]:
    """(definition, value, source, synonyms) per topic config as DescribeConfigs reports it."""
    keys = sorted(TOPIC_CONFIGS) if names is None else [n for n in names if n in TOPIC_CONFIGS]
    out = []
    for key in keys:
        definition = TOPIC_CONFIGS[key]
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if definition.synonyms:
            synonyms = broker.synonyms(definition.synonyms[0])
        value = overrides[key] if key in overrides else broker.topic_default(key)
        if key in overrides:
            synonyms.insert(0, (key, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        out.append((definition, value, source, synonyms))
    return out


def broker_entries(
    broker: BrokerConfig, names: Iterable[str] | None, *, per_broker: bool
) -> list[tuple[ConfigDef, str | None, ConfigSource, list[tuple[str, str | None, ConfigSource]]]]:
    """Like topic_entries for the BROKER resource (per_broker=False: the cluster default, "")."""
    keys = sorted(BROKER_CONFIGS) if names is None else [n for n in names if n in BROKER_CONFIGS]
    out = []
    for key in keys:
        definition = BROKER_CONFIGS[key]
        synonyms = broker.synonyms(key, sensitive=definition.sensitive)
        if per_broker:
            value = broker.raw(key)
        else:
            synonyms = [s for s in synonyms if s[2] is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
            value = broker.dynamic_default.get(key)
            if value is None and not synonyms:
                continue
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        out.append((definition, value, source, synonyms))
    return out
