"""Topic administration and metadata: what a one-broker Kafka answers, error codes included."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewPartitions, NewTopic
from dbhelpers import admin, create_topic, running_broker
from kafka import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError
from raw_protocol import RawClient
from raw_protocol import create_topic as raw_create_topic

from devbroker.launcher import DevBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[DevBroker]:
    with running_broker(**{"num.partitions": 2}) as b:
        yield b


def create_error(bootstrap: str, topic: NewTopic, *, validate_only: bool = False) -> KafkaError | None:
    client = admin(bootstrap)
    future = client.create_topics([topic], validate_only=validate_only)[topic.topic]
    try:
        future.result(15)
    except KafkaException as exc:
        return exc.args[0]
    return None


def topic_names(bootstrap: str) -> set[str]:
    return set(admin(bootstrap).list_topics(timeout=10).topics)


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a" * 250, "has space", "slash/y", "ünicode"],
    ids=["empty", "dot", "dotdot", "too-long", "space", "slash", "unicode"],
)
def test_illegal_topic_names(broker: DevBroker, name: str) -> None:
    with RawClient(broker.bootstrap) as client:
        result = raw_create_topic(client, name)
    assert result.error_code == 17  # INVALID_TOPIC_EXCEPTION
    assert result.error_message


def test_longest_legal_name(broker: DevBroker) -> None:
    name = "n" * 249
    create_topic(broker.bootstrap, name)
    assert name in topic_names(broker.bootstrap)


def test_create_errors(broker: DevBroker, unique) -> None:
    name = unique("dup")
    create_topic(broker.bootstrap, name)
    assert create_error(broker.bootstrap, NewTopic(name, 1, 1)).code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert (
        create_error(broker.bootstrap, NewTopic(unique("rf"), 1, 3)).code()
        == KafkaError.INVALID_REPLICATION_FACTOR
    )
    error = create_error(broker.bootstrap, NewTopic(unique("cfg"), 1, 1, config={"retention.ms": "soon"}))
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "retention.ms" in error.str()
    error = create_error(broker.bootstrap, NewTopic(unique("cfg"), 1, 1, config={"no.such.key": "1"}))
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "no.such.key" in error.str()


def test_create_with_zero_partitions(broker: DevBroker, unique) -> None:
    with RawClient(broker.bootstrap) as client:
        assert raw_create_topic(client, unique("zero"), partitions=0).error_code == 37  # INVALID_PARTITIONS


def test_names_that_collide_on_dot_and_underscore(broker: DevBroker, unique) -> None:
    base = unique("collide")
    create_topic(broker.bootstrap, f"{base}.x")
    assert create_error(broker.bootstrap, NewTopic(f"{base}_x", 1, 1)).code() == KafkaError.TOPIC_EXCEPTION


def test_defaults_and_v5_response(broker: DevBroker, unique) -> None:
    name = unique("defaults")
    with RawClient(broker.bootstrap) as client:
        response = client.request(
            19,
            7,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": -1,
                        "replication_factor": -1,
                        "assignments": [],
                        "configs": [{"name": "retention.ms", "value": "1000"}],
                    }
                ],
                "timeout": 5000,
                "validate_only": False,
            },
        )
    result = response.topics[0]
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 2, 1)
    assert result.topic_id != uuid.UUID(int=0)
    configs = {c.name: (c.value, c.config_source) for c in result.configs}
    assert configs["retention.ms"] == ("1000", 1)  # DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"] == ("1073741824", 5)  # DEFAULT_CONFIG


def test_validate_only_creates_nothing(broker: DevBroker, unique) -> None:
    name = unique("validate")
    assert create_error(broker.bootstrap, NewTopic(name, 3, 1), validate_only=True) is None
    assert name not in topic_names(broker.bootstrap)
    assert (
        create_error(broker.bootstrap, NewTopic(name, 3, 5), validate_only=True).code()
        == KafkaError.INVALID_REPLICATION_FACTOR
    )


def test_manual_assignment(broker: DevBroker, unique) -> None:
    name = unique("assigned")
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic(name, num_partitions=3, replica_assignment=[[1], [1], [1]])])[name].result(
        10
    )
    assert len(client.list_topics(name, timeout=10).topics[name].partitions) == 3
    bad = NewTopic(unique("assigned"), num_partitions=1, replica_assignment=[[2]])
    assert create_error(broker.bootstrap, bad).code() == KafkaError.INVALID_REPLICA_ASSIGNMENT


def test_delete_topics(broker: DevBroker, unique) -> None:
    name = unique("delete")
    create_topic(broker.bootstrap, name)
    client = admin(broker.bootstrap)
    client.delete_topics([name])[name].result(10)
    assert name not in topic_names(broker.bootstrap)
    with pytest.raises(KafkaException) as info:
        client.delete_topics([name])[name].result(10)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_delete_by_topic_id(broker: DevBroker, unique) -> None:
    name = unique("delete-id")
    with RawClient(broker.bootstrap) as client:
        topic_id = raw_create_topic(client, name).topic_id
        response = client.request(20, 6, {"topics": [{"name": None, "topic_id": topic_id}], "timeout": 5000})
        assert (response.responses[0].error_code, response.responses[0].name) == (0, name)
        response = client.request(20, 6, {"topics": [{"name": None, "topic_id": topic_id}], "timeout": 5000})
        assert response.responses[0].error_code == 100  # UNKNOWN_TOPIC_ID


def test_recreated_topic_is_empty_and_has_a_new_id(broker: DevBroker, unique) -> None:
    name = unique("recreate")
    with RawClient(broker.bootstrap) as client:
        first = raw_create_topic(client, name).topic_id
        client.request(20, 6, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}], "timeout": 5000})
        second = raw_create_topic(client, name).topic_id
        response = client.request(
            2,
            8,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": name, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
            },
        )
    assert first != second
    assert response.topics[0].partitions[0].offset == 0


def test_create_partitions(broker: DevBroker, unique) -> None:
    name = unique("grow")
    create_topic(broker.bootstrap, name, partitions=2)
    client = admin(broker.bootstrap)
    client.create_partitions([NewPartitions(name, 5)], validate_only=True)[name].result(10)
    assert len(client.list_topics(name, timeout=10).topics[name].partitions) == 2
    client.create_partitions([NewPartitions(name, 5)])[name].result(10)
    assert len(client.list_topics(name, timeout=10).topics[name].partitions) == 5
    for count in (3, 5):
        with pytest.raises(KafkaException) as info:
            client.create_partitions([NewPartitions(name, count)])[name].result(10)
        assert info.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    missing = unique("missing")
    with pytest.raises(KafkaException) as info:
        client.create_partitions([NewPartitions(missing, 3)])[missing].result(10)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_metadata_topic_ids_are_stable(broker: DevBroker, unique) -> None:
    name = unique("ids")
    with RawClient(broker.bootstrap) as client:
        created = raw_create_topic(client, name, partitions=3).topic_id
        by_name = client.request(
            3,
            12,
            {
                "topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        by_id = client.request(
            3,
            12,
            {
                "topics": [{"name": None, "topic_id": created}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
    topic = by_name.topics[0]
    assert topic.topic_id == created == by_id.topics[0].topic_id
    assert by_id.topics[0].name == name
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in topic.partitions] == [
        (p, 1, (1,), (1,)) for p in range(3)
    ]
    assert by_name.controller_id == 1 and by_name.cluster_id == broker.cluster_id


def test_metadata_does_not_auto_create_by_default(broker: DevBroker, unique) -> None:
    name = unique("auto")
    with RawClient(broker.bootstrap) as client:
        response = client.request(
            3,
            12,
            {
                "topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                "allow_auto_topic_creation": True,
                "include_topic_authorized_operations": False,
            },
        )
    assert response.topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert name not in topic_names(broker.bootstrap)


def test_auto_create_when_enabled(unique) -> None:
    with running_broker(**{"auto.create.topics.enable": "true", "num.partitions": 4}) as b:
        name = unique("auto")
        with RawClient(b.bootstrap) as client:
            refused = client.request(
                3,
                12,
                {
                    "topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False,
                },
            )
            assert refused.topics[0].error_code == 3
            created = client.request(
                3,
                12,
                {
                    "topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                    "allow_auto_topic_creation": True,
                    "include_topic_authorized_operations": False,
                },
            )
        assert created.topics[0].error_code == 0
        assert len(created.topics[0].partitions) == 4


def test_describe_cluster(broker: DevBroker) -> None:
    client = admin(broker.bootstrap)
    description = client.describe_cluster().result(10)
    assert description.cluster_id == broker.cluster_id
    assert [(n.id, n.host, n.port) for n in description.nodes] == [(1, "127.0.0.1", broker.port)]
    assert description.controller.id == 1


def test_kafka_python_admin(broker: DevBroker, unique) -> None:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    name = unique("kp-admin")
    client.create_topics([KpNewTopic(name, 2, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        client.create_topics([KpNewTopic(name, 2, 1)], raise_errors=True)
    client.create_partitions({name: KpNewPartitions(4)})
    with pytest.raises(InvalidPartitionsError):
        client.create_partitions({name: KpNewPartitions(3)}, raise_errors=True)
    assert name in client.list_topics()
    assert len(client.describe_topics([name])[0]["partitions"]) == 4
    client.delete_topics([name])
    assert name not in client.list_topics()
    client.close()


def test_metadata_empty_topic_list_means_all_only_in_v0(broker: DevBroker, unique) -> None:
    name = unique("v0")
    create_topic(broker.bootstrap, name)
    with RawClient(broker.bootstrap) as client:
        v0 = client.request(3, 0, {"topics": []})
        v1 = client.request(3, 1, {"topics": []})
        v1_all = client.request(3, 1, {"topics": None})
    assert name in {t.name for t in v0.topics}
    assert v1.topics == ()
    assert name in {t.name for t in v1_all.topics}
