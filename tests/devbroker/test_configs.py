"""Topic and broker configs as Kafka reports them: values, sources, synonyms, validation, changes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from dbhelpers import admin, create_topic, running_broker
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType
from raw_protocol import RawClient

from devbroker.configs import TOPIC_CONFIGS
from devbroker.launcher import DevBroker

OVERRIDES = {"log.segment.bytes": 2_000_000, "log.retention.hours": 48, "log.cleanup.policy": "delete"}


@pytest.fixture(scope="module")
def broker() -> Iterator[DevBroker]:
    with running_broker(**OVERRIDES) as b:
        yield b


def describe_topic(bootstrap: str, topic: str) -> dict[str, ConfigEntry]:
    client = admin(bootstrap)
    resource = ConfigResource("topic", topic)
    return client.describe_configs([resource])[resource].result(10)


def alter_error(future) -> KafkaError | None:
    try:
        future.result(10)
    except KafkaException as exc:
        return exc.args[0]
    return None


def test_every_kafka_topic_config_is_described(broker: DevBroker, unique) -> None:
    topic = unique("all")
    create_topic(broker.bootstrap, topic)
    configs = describe_topic(broker.bootstrap, topic)
    assert set(configs) == set(TOPIC_CONFIGS)
    assert len(configs) >= 36


def test_sources_and_synonyms(broker: DevBroker, unique) -> None:
    topic = unique("sources")
    create_topic(broker.bootstrap, topic, **{"min.insync.replicas": "1", "cleanup.policy": "compact"})
    configs = describe_topic(broker.bootstrap, topic)

    set_here = configs["cleanup.policy"]
    assert (set_here.value, set_here.source) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert list(set_here.synonyms) == ["cleanup.policy", "log.cleanup.policy"]  # confluent keys them by name

    from_broker = configs["segment.bytes"]
    assert (from_broker.value, from_broker.source) == ("2000000", ConfigSource.STATIC_BROKER_CONFIG.value)

    default = configs["delete.retention.ms"]
    assert (default.value, default.source) == ("86400000", ConfigSource.DEFAULT_CONFIG.value)
    assert [(s.name, s.value) for s in default.synonyms.values()] == [
        ("log.cleaner.delete.retention.ms", "86400000")
    ]

    no_synonym = configs["remote.storage.enable"]
    assert (no_synonym.value, no_synonym.source, len(no_synonym.synonyms)) == (
        "false",
        ConfigSource.DEFAULT_CONFIG.value,
        0,
    )

    # log.retention.hours=48 feeds retention.ms, converted to milliseconds
    assert configs["retention.ms"].value == str(48 * 3_600_000)
    assert not any(c.is_read_only or c.is_sensitive for c in configs.values())


def test_raw_synonym_lists(broker: DevBroker, unique) -> None:
    topic = unique("raw")
    create_topic(broker.bootstrap, topic, **{"segment.bytes": "3000000"})
    with RawClient(broker.bootstrap) as client:
        response = client.request(
            32,
            4,
            {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": topic,
                        "configuration_keys": ["segment.bytes", "retention.ms", "no.such"],
                    }
                ],
                "include_synonyms": True,
                "include_documentation": True,
            },
        )
    result = response.results[0]
    rows = {c.name: c for c in result.configs}
    assert set(rows) == {"segment.bytes", "retention.ms"}
    segment = rows["segment.bytes"]
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("segment.bytes", "3000000", 1),
        ("log.segment.bytes", "2000000", 4),
        ("log.segment.bytes", "1073741824", 5),
    ]
    assert segment.config_type == 3  # INT
    assert segment.documentation
    assert rows["retention.ms"].config_type == 5  # LONG


def test_describe_unknown_and_invalid_topics(broker: DevBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        response = client.request(
            32,
            4,
            {
                "resources": [
                    {"resource_type": 2, "resource_name": "does-not-exist", "configuration_keys": None},
                    {"resource_type": 2, "resource_name": "bad name", "configuration_keys": None},
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
    assert [r.error_code for r in response.results] == [3, 17]


def test_broker_resource(broker: DevBroker) -> None:
    client = admin(broker.bootstrap)
    resource = ConfigResource("broker", "1")
    configs = client.describe_configs([resource])[resource].result(10)
    assert configs["log.segment.bytes"].value == "2000000"
    assert configs["log.segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["num.partitions"].is_read_only
    assert not configs["log.retention.ms"].is_read_only
    assert configs["auto.create.topics.enable"].value == "false"
    with RawClient(broker.bootstrap) as raw:
        response = raw.request(
            32,
            4,
            {
                "resources": [
                    {"resource_type": 4, "resource_name": "7", "configuration_keys": None},
                    {"resource_type": 4, "resource_name": "", "configuration_keys": None},
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
    assert response.results[0].error_code == 42  # INVALID_REQUEST: not this broker's id
    assert (response.results[1].error_code, response.results[1].configs) == (
        0,
        (),
    )  # no cluster-wide dynamic configs


def test_alter_configs_replaces_all_overrides(broker: DevBroker, unique) -> None:
    topic = unique("replace")
    create_topic(broker.bootstrap, topic, **{"retention.ms": "1000", "segment.ms": "5000"})
    client = admin(broker.bootstrap)
    resource = ConfigResource("topic", topic, set_config={"max.message.bytes": "5000"})
    client.alter_configs([resource])[resource].result(10)
    configs = describe_topic(broker.bootstrap, topic)
    assert configs["max.message.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.ms"].value == "604800000"


def test_incremental_alter_configs(broker: DevBroker, unique) -> None:
    topic = unique("incremental")
    create_topic(broker.bootstrap, topic, **{"retention.ms": "1000"})
    client = admin(broker.bootstrap)

    def apply(*entries: ConfigEntry, validate_only: bool = False) -> KafkaError | None:
        resource = ConfigResource("topic", topic, incremental_configs=list(entries))
        return alter_error(
            client.incremental_alter_configs([resource], validate_only=validate_only)[resource]
        )

    assert apply(ConfigEntry("segment.ms", "7000", incremental_operation=AlterConfigOpType.SET)) is None
    assert (
        apply(ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND))
        is None
    )
    configs = describe_topic(broker.bootstrap, topic)
    assert configs["retention.ms"].value == "1000"
    assert configs["segment.ms"].value == "7000"
    assert configs["cleanup.policy"].value == "delete,compact"
    assert (
        apply(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
        is None
    )
    assert apply(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)) is None
    configs = describe_topic(broker.bootstrap, topic)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    error = apply(ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND))
    assert error.code() == KafkaError.INVALID_CONFIG
    assert (
        apply(ConfigEntry("segment.ms", "1", incremental_operation=AlterConfigOpType.SET), validate_only=True)
        is None
    )
    assert describe_topic(broker.bootstrap, topic)["segment.ms"].value == "7000"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("min.cleanable.dirty.ratio", "1.5"),
        ("cleanup.policy", "shred"),
        ("retention.ms", "-7"),
        ("unclean.leader.election.enable", "maybe"),
        ("message.timestamp.type", "WallClock"),
        ("segment.bytes", "9"),
        ("compression.type", "brotli"),
        ("leader.replication.throttled.replicas", "one"),
        ("no.such.config", "1"),
    ],
)
def test_invalid_values_name_the_key(broker: DevBroker, unique, key: str, value: str) -> None:
    topic = unique("invalid")
    create_topic(broker.bootstrap, topic)
    client = admin(broker.bootstrap)
    resource = ConfigResource(
        "topic",
        topic,
        incremental_configs=[ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)],
    )
    error = alter_error(client.incremental_alter_configs([resource])[resource])
    assert error is not None and error.code() == KafkaError.INVALID_CONFIG
    assert key in error.str()


def test_compaction_lag_bounds_are_checked_together(broker: DevBroker, unique) -> None:
    topic = unique("lags")
    create_topic(broker.bootstrap, topic)
    client = admin(broker.bootstrap)
    resource = ConfigResource(
        "topic", topic, set_config={"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "10"}
    )
    error = alter_error(client.alter_configs([resource])[resource])
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "min.compaction.lag.ms" in error.str()


def test_alter_unknown_topic(broker: DevBroker) -> None:
    client = admin(broker.bootstrap)
    resource = ConfigResource("topic", "nope-missing", set_config={"retention.ms": "1"})
    assert alter_error(client.alter_configs([resource])[resource]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def incremental_broker(
    client: RawClient, name: str, key: str, value: str | None, op: int
) -> tuple[int, str | None]:
    response = client.request(
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": 4,
                    "resource_name": name,
                    "configs": [{"name": key, "config_operation": op, "value": value}],
                }
            ],
            "validate_only": False,
        },
    )
    return response.responses[0].error_code, response.responses[0].error_message


def test_dynamic_cluster_default(broker: DevBroker, unique) -> None:
    topic = unique("dynamic")
    create_topic(broker.bootstrap, topic)
    with RawClient(broker.bootstrap) as client:
        assert incremental_broker(client, "", "log.retention.ms", "123456", 0) == (0, None)
        try:
            entry = describe_topic(broker.bootstrap, topic)["retention.ms"]
            assert (entry.value, entry.source) == ("123456", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
            code, message = incremental_broker(client, "1", "num.partitions", "5", 0)
            assert code == 40  # INVALID_CONFIG
            assert "num.partitions" in message
        finally:
            assert incremental_broker(client, "", "log.retention.ms", None, 1) == (0, None)
    assert describe_topic(broker.bootstrap, topic)["retention.ms"].value == str(48 * 3_600_000)


def test_kafka_python_configs(broker: DevBroker, unique) -> None:
    topic = unique("kp-configs")
    create_topic(broker.bootstrap, topic)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    client.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "999"})])
    described = client.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic)])
    client.close()
    assert "999" in repr(described)
    assert describe_topic(broker.bootstrap, topic)["retention.ms"].value == "999"
