"""Idempotent producers: duplicates answered with their original offsets, sequence and epoch checks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from dbhelpers import consume_all, create_topic, running_broker
from kafka import KafkaProducer
from raw_protocol import RawClient, init_producer_id, produce, record_batch
from raw_protocol import create_topic as raw_create_topic

from devbroker.launcher import DevBroker

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


@pytest.fixture(scope="module")
def broker() -> Iterator[DevBroker]:
    with running_broker() as b:
        yield b


def high_watermark(client: RawClient, topic: str) -> int:
    response = client.request(
        2,
        8,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )
    return response.topics[0].partitions[0].offset


def test_init_producer_id_without_transactional_id(broker: DevBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        first = init_producer_id(client)
        second = init_producer_id(client)
    assert first[1] == second[1] == 0
    assert first[0] != second[0]


def test_duplicates_return_the_original_offsets(broker: DevBroker, unique) -> None:
    topic = unique("dups")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic)
        pid, epoch = init_producer_id(client)

        def send(seq: int, count: int = 3):
            values = [b"s%d" % (seq + i) for i in range(count)]
            return produce(
                client,
                topic,
                0,
                record_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq),
            )

        assert (send(0).error_code, send(0).base_offset) == (0, 0)
        assert send(3).base_offset == 3
        for seq in (6, 9, 12, 15):
            assert send(seq).base_offset == seq
        assert high_watermark(client, topic) == 18
        # the last five batches are remembered: seq 3 (offset 3) is still one of them
        assert (send(3).error_code, send(3).base_offset) == (0, 3)
        assert high_watermark(client, topic) == 18
        gap = send(30)
        assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert "Out of order sequence number" in gap.error_message
        assert send(18).base_offset == 18


def test_epochs(broker: DevBroker, unique) -> None:
    topic = unique("epochs")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic)
        pid, _ = init_producer_id(client)

        def send(epoch: int, seq: int):
            return produce(
                client,
                topic,
                0,
                record_batch([b"v"], producer_id=pid, producer_epoch=epoch, base_sequence=seq),
            )

        assert send(0, 0).error_code == 0
        assert send(0, 1).error_code == 0
        assert send(1, 5).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER  # a new epoch starts at 0
        assert send(1, 0).error_code == 0
        stale = send(0, 2)
        assert stale.error_code == INVALID_PRODUCER_EPOCH
        assert "smaller than the last seen epoch" in stale.error_message


def test_unknown_producer_may_start_at_any_sequence(broker: DevBroker, unique) -> None:
    topic = unique("unknown-pid")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic)
        batch = record_batch([b"late"], producer_id=424242, producer_epoch=3, base_sequence=17)
        assert produce(client, topic, 0, batch).error_code == 0
        follow_up = record_batch([b"next"], producer_id=424242, producer_epoch=3, base_sequence=18)
        assert produce(client, topic, 0, follow_up).base_offset == 1


def test_describe_producers(broker: DevBroker, unique) -> None:
    topic = unique("describe")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic)
        pid, epoch = init_producer_id(client)
        produce(
            client,
            topic,
            0,
            record_batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0),
        )
        response = client.request(61, 0, {"topics": [{"name": topic, "partition_indexes": [0, 9]}]})
    ok, missing = response.topics[0].partitions
    assert missing.error_code == 3
    [active] = ok.active_producers
    assert (
        active.producer_id,
        active.producer_epoch,
        active.last_sequence,
        active.current_txn_start_offset,
    ) == (pid, epoch, 1, -1)


@pytest.mark.parametrize("client_name", ["confluent", "kafka-python"])
def test_idempotent_clients_write_each_record_once_in_order(
    broker: DevBroker, unique, client_name: str
) -> None:
    topic = unique(f"idem-{client_name}")
    create_topic(broker.bootstrap, topic)
    if client_name == "confluent":
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 2,
                "batch.num.messages": 50,
            }
        )
        for i in range(2000):
            producer.produce(topic, value=b"%d" % i, partition=0)
        assert producer.flush(30) == 0
    else:
        kp = KafkaProducer(
            bootstrap_servers=broker.bootstrap, enable_idempotence=True, linger_ms=2, batch_size=2000
        )
        for i in range(2000):
            kp.send(topic, value=b"%d" % i, partition=0)
        kp.flush(30)
        kp.close()
    assert [m.value() for m in consume_all(broker.bootstrap, topic)] == [b"%d" % i for i in range(2000)]
