"""Transactions: commit/abort visibility, last stable offset, fencing, timeouts, coordinator errors."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from dbhelpers import consume_all, create_topic, running_broker
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from raw_protocol import (
    RawClient,
    describe_transaction,
    fetch,
    init_producer_id,
    produce,
    record_batch,
)
from raw_protocol import (
    create_topic as raw_create_topic,
)

from devbroker.launcher import DevBroker

INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90
OPERATION_NOT_ATTEMPTED = 55


@pytest.fixture(scope="module")
def broker() -> Iterator[DevBroker]:
    with running_broker(
        **{
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
            "transaction.max.timeout.ms": 120000,
        }
    ) as b:
        yield b


def values(bootstrap: str, topic: str, isolation: str, partitions: int = 1) -> list[bytes]:
    return [m.value() for m in consume_all(bootstrap, topic, partitions, isolation=isolation)]


def kafka_python_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning()
    end = consumer.end_offsets([tp])[tp]
    out: list[bytes] = []
    deadline = time.monotonic() + 15
    while consumer.position(tp) < end and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=300).values():
            out.extend(m.value for m in records)
    consumer.close()
    return out


def list_offset(client: RawClient, topic: str, isolation: int) -> int:
    response = client.request(
        2,
        8,
        {
            "replica_id": -1,
            "isolation_level": isolation,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )
    return response.topics[0].partitions[0].offset


def add_partitions(
    client: RawClient, tid: str, pid: int, epoch: int, topic: str, partitions: list[int]
) -> list[int]:
    response = client.request(
        24,
        3,
        {
            "v3_and_below_transactional_id": tid,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": partitions}],
        },
    )
    return [
        p.partition_error_code for t in response.results_by_topic_v3_and_below for p in t.results_by_partition
    ]


def end_txn(client: RawClient, tid: str, pid: int, epoch: int, commit: bool) -> int:
    return client.request(
        26, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": commit}
    ).error_code


@pytest.mark.parametrize("producer_kind", ["confluent", "kafka-python"])
def test_commit_and_abort_visibility(broker: DevBroker, unique, producer_kind: str) -> None:
    topic = unique(f"visibility-{producer_kind}")
    create_topic(broker.bootstrap, topic)
    if producer_kind == "confluent":
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("tid")})
        producer.init_transactions(15)
        for outcome, batch in (("commit", b"c1"), ("abort", b"a1"), ("commit", b"c2")):
            producer.begin_transaction()
            producer.produce(topic, value=batch, partition=0)
            producer.produce(topic, value=batch + b"-second", partition=0)
            if outcome == "commit":
                producer.commit_transaction(15)
            else:
                producer.flush(15)
                producer.abort_transaction(15)
    else:
        kp = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("tid"))
        kp.init_transactions()
        for outcome, batch in (("commit", b"c1"), ("abort", b"a1"), ("commit", b"c2")):
            kp.begin_transaction()
            kp.send(topic, value=batch, partition=0)
            kp.send(topic, value=batch + b"-second", partition=0)
            if outcome == "commit":
                kp.commit_transaction()
            else:
                kp.flush()
                kp.abort_transaction()
        kp.close()
    committed = [b"c1", b"c1-second", b"c2", b"c2-second"]
    everything = [b"c1", b"c1-second", b"a1", b"a1-second", b"c2", b"c2-second"]
    assert values(broker.bootstrap, topic, "read_committed") == committed
    assert values(broker.bootstrap, topic, "read_uncommitted") == everything
    assert kafka_python_values(broker.bootstrap, topic, "read_committed") == committed
    assert kafka_python_values(broker.bootstrap, topic, "read_uncommitted") == everything


def test_open_transaction_holds_back_the_last_stable_offset(broker: DevBroker, unique) -> None:
    topic = unique("lso")
    tid = unique("tid")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic)
        produce(client, topic, 0, record_batch([b"plain-1", b"plain-2"]))
        pid, epoch = init_producer_id(client, tid)
        assert add_partitions(client, tid, pid, epoch, topic, [0]) == [0]
        batch = record_batch(
            [b"t1", b"t2"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True
        )
        assert produce(client, topic, 0, batch, transactional_id=tid).base_offset == 2
        produce(client, topic, 0, record_batch([b"plain-3"]))
        assert list_offset(client, topic, 1) == 2  # read_committed: last stable offset
        assert list_offset(client, topic, 0) == 5  # read_uncommitted: high watermark
        assert values(broker.bootstrap, topic, "read_committed") == [b"plain-1", b"plain-2"]
        assert end_txn(client, tid, pid, epoch, commit=False) == 0
        assert list_offset(client, topic, 1) == 6  # after the abort marker
        fetched = fetch(client, topic, isolation=1).responses[0].partitions[0]
        assert [(a.producer_id, a.first_offset) for a in fetched.aborted_transactions] == [(pid, 2)]
        assert fetched.last_stable_offset == 6
    assert values(broker.bootstrap, topic, "read_committed") == [b"plain-1", b"plain-2", b"plain-3"]


def test_new_instance_fences_and_aborts_the_old_one(broker: DevBroker, unique) -> None:
    topic = unique("fence")
    tid = unique("tid")
    create_topic(broker.bootstrap, topic)
    old = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
    old.init_transactions(15)
    old.begin_transaction()
    old.produce(topic, value=b"zombie", partition=0)
    old.flush(15)
    new = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
    new.init_transactions(15)
    with pytest.raises(KafkaException) as info:
        old.commit_transaction(15)
    assert info.value.args[0].fatal() or info.value.args[0].txn_requires_abort()
    new.begin_transaction()
    new.produce(topic, value=b"fresh", partition=0)
    new.commit_transaction(15)
    assert values(broker.bootstrap, topic, "read_committed") == [b"fresh"]
    assert values(broker.bootstrap, topic, "read_uncommitted") == [b"zombie", b"fresh"]


def test_init_during_an_open_transaction_bumps_twice(broker: DevBroker, unique) -> None:
    topic = unique("bump")
    tid = unique("tid")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic)
        pid, epoch = init_producer_id(client, tid)
        assert add_partitions(client, tid, pid, epoch, topic, [0]) == [0]
        batch = record_batch(
            [b"t"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True
        )
        produce(client, topic, 0, batch, transactional_id=tid)
        retry = client.request(
            22,
            4,
            {"transactional_id": tid, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1},
        )
        assert retry.error_code == CONCURRENT_TRANSACTIONS
        assert init_producer_id(client, tid) == (pid, epoch + 2)
        assert list_offset(client, topic, 1) == 2  # aborted: data + marker are stable
        stale = record_batch(
            [b"late"], producer_id=pid, producer_epoch=epoch, base_sequence=1, transactional=True
        )
        assert produce(client, topic, 0, stale, transactional_id=tid).error_code in (47, INVALID_TXN_STATE)
        assert end_txn(client, tid, pid, epoch, commit=True) == PRODUCER_FENCED


def test_coordinator_errors(broker: DevBroker, unique) -> None:
    topic = unique("errors")
    tid = unique("tid")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic, partitions=2)
        for timeout in (0, 3_600_000):
            response = client.request(
                22,
                4,
                {
                    "transactional_id": tid,
                    "transaction_timeout": timeout,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            )
            assert response.error_code == INVALID_TRANSACTION_TIMEOUT
        pid, epoch = init_producer_id(client, tid)
        assert end_txn(client, tid, pid, epoch, commit=True) == INVALID_TXN_STATE  # nothing begun
        assert add_partitions(client, tid, pid + 1, epoch, topic, [0]) == [INVALID_PRODUCER_ID_MAPPING]
        assert add_partitions(client, tid, pid, epoch + 1, topic, [0]) == [PRODUCER_FENCED]
        assert add_partitions(client, "never-initialized", pid, epoch, topic, [0]) == [
            INVALID_PRODUCER_ID_MAPPING
        ]
        assert sorted(add_partitions(client, tid, pid, epoch, topic, [0, 7])) == [3, OPERATION_NOT_ATTEMPTED]
        # a transactional batch for a partition the transaction did not add
        assert add_partitions(client, tid, pid, epoch, topic, [0]) == [0]
        stray = record_batch(
            [b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True
        )
        assert produce(client, topic, 1, stray, transactional_id=tid).error_code == INVALID_TXN_STATE
        assert end_txn(client, tid, pid, epoch, commit=True) == 0
        assert end_txn(client, tid, pid, epoch, commit=True) == 0  # a retried commit is fine
        assert end_txn(client, tid, pid, epoch, commit=False) == INVALID_TXN_STATE
        offsets = client.request(
            28,
            3,
            {
                "transactional_id": tid,
                "group_id": "g",
                "producer_id": pid,
                "producer_epoch": epoch,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                        ],
                    }
                ],
            },
        )
        assert offsets.topics[0].partitions[0].error_code == INVALID_TXN_STATE  # no AddOffsetsToTxn


def test_timed_out_transaction_is_aborted_and_fenced(broker: DevBroker, unique) -> None:
    topic = unique("timeout")
    tid = unique("tid")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic)
        pid, epoch = init_producer_id(client, tid, timeout_ms=300)
        assert add_partitions(client, tid, pid, epoch, topic, [0]) == [0]
        batch = record_batch(
            [b"slow"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True
        )
        produce(client, topic, 0, batch, transactional_id=tid)
        deadline = time.monotonic() + 15
        while list_offset(client, topic, 1) == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list_offset(client, topic, 1) == 2
        assert end_txn(client, tid, pid, epoch, commit=True) == PRODUCER_FENCED
        description = client.request(65, 0, {"transactional_ids": [tid]}).transaction_states
        assert (description[0].transaction_state, description[0].producer_epoch) == (
            "CompleteAbort",
            epoch + 1,
        )
        assert describe_transaction(client, "unknown-tid")["error_code"] == 105  # TRANSACTIONAL_ID_NOT_FOUND
    assert values(broker.bootstrap, topic, "read_committed") == []


def test_list_and_describe_transactions(broker: DevBroker, unique) -> None:
    topic = unique("listing")
    tid = unique("listed")
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, topic)
        pid, epoch = init_producer_id(client, tid)
        add_partitions(client, tid, pid, epoch, topic, [0])
        ongoing = client.request(
            66,
            2,
            {
                "state_filters": ["Ongoing"],
                "producer_id_filters": [pid],
                "duration_filter": -1,
                "transactional_id_pattern": None,
            },
        )
        assert [(s.transactional_id, s.transaction_state) for s in ongoing.transaction_states] == [
            (tid, "Ongoing")
        ]
        unknown = client.request(
            66, 1, {"state_filters": ["Bogus"], "producer_id_filters": [], "duration_filter": -1}
        )
        assert unknown.unknown_state_filters == ("Bogus",)
        described = client.request(65, 0, {"transactional_ids": [tid]}).transaction_states[0]
        assert [(t.topic, t.partitions) for t in described.topics] == [(topic, (0,))]
        assert described.transaction_timeout.total_seconds() == 60
        end_txn(client, tid, pid, epoch, commit=True)
        done = client.request(
            66,
            2,
            {
                "state_filters": [],
                "producer_id_filters": [pid],
                "duration_filter": -1,
                "transactional_id_pattern": "listed-.*",
            },
        )
        assert [s.transaction_state for s in done.transaction_states] == ["CompleteCommit"]


def committed_offset(bootstrap: str, group: str, topic: str, isolation: str = "read_committed") -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation})
    [tp] = consumer.committed([ConfluentTopicPartition(topic, 0)], timeout=10)
    consumer.close()
    return tp.offset


def test_send_offsets_to_transaction(broker: DevBroker, unique) -> None:
    source, sink, group = unique("eos-in"), unique("eos-out"), unique("eos-group")
    create_topic(broker.bootstrap, source)
    create_topic(broker.bootstrap, sink)
    feeder = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(6):
        feeder.produce(source, value=b"%d" % i, partition=0)
    feeder.flush(10)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([ConfluentTopicPartition(source, 0, 0)])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("eos-tid")})
    producer.init_transactions(10)

    def process(count: int, commit: bool) -> None:
        producer.begin_transaction()
        for message in consumer.consume(count, timeout=10):
            producer.produce(sink, value=message.value() + b"-processed", partition=0)
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 10
        )
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)

    process(3, commit=True)
    assert committed_offset(broker.bootstrap, group, source) == 3
    process(3, commit=False)
    assert committed_offset(broker.bootstrap, group, source) == 3  # aborted: offsets discarded with the data
    consumer.close()
    assert values(broker.bootstrap, sink, "read_committed") == [
        b"0-processed",
        b"1-processed",
        b"2-processed",
    ]


def test_kafka_python_send_offsets_to_transaction(broker: DevBroker, unique) -> None:
    source, group = unique("kp-eos-in"), unique("kp-eos-group")
    create_topic(broker.bootstrap, source)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("kp-eos-tid"))
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(source, value=b"x", partition=0)
    producer.send_offsets_to_transaction({TopicPartition(source, 0): OffsetAndMetadata(1, "", -1)}, group)
    producer.commit_transaction()
    producer.close()
    assert committed_offset(broker.bootstrap, group, source) == 1
