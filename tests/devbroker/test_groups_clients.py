"""Consumer groups through real clients: confluent-kafka (librdkafka) and kafka-python.

Membership (join, leave, crash, static members), commits and the admin APIs for groups and
offsets. Tests on `shared_clusters` also run against real Kafka clusters; the ones that need
short session timeouts or a restart start their own devbroker.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import MemberToRemove
from kafka.errors import GroupSubscribedToTopicError, NoError
from kafka.structs import OffsetAndMetadata

FAST_GROUP = {"heartbeat.interval.ms": 100, "enable.auto.commit": False, "auto.offset.reset": "earliest"}


@pytest.fixture
def admin_for() -> Iterator[Callable[[str], AdminClient]]:
    clients: dict[str, AdminClient] = {}
    yield lambda bootstrap: clients.setdefault(bootstrap, AdminClient({"bootstrap.servers": bootstrap}))


@pytest.fixture
def consumers() -> Iterator[list[Any]]:
    """Every consumer a test opens; closed at teardown (kafka-python ones too)."""
    opened: list[Any] = []
    yield opened
    for consumer in opened:
        with contextlib.suppress(RuntimeError):  # confluent-kafka: already closed by the test
            consumer.close()


def make_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(per_partition):
        for p in range(partitions):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(15) == 0


def confluent(bootstrap: str, group: str, opened: list[Any], **extra: Any) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **FAST_GROUP, **extra})
    opened.append(consumer)
    return consumer


def kafka_python(bootstrap: str, group: str, topic: str, opened: list[Any], **extra: Any) -> KafkaConsumer:
    """A kafka-python member that knows the topic's partitions before it joins.

    Joining without them makes a leader assign nothing and rejoin once metadata arrives; in
    that rejoin kafka-python 3.0.12 can lose its own SyncGroup response (a client race)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        heartbeat_interval_ms=100,
        enable_auto_commit=False,
        **extra,
    )
    opened.append(consumer)
    assert consumer.partitions_for_topic(topic)
    consumer.subscribe([topic])
    return consumer


def owned(consumer: Any) -> set[tuple[str, int]]:
    if isinstance(consumer, KafkaConsumer):
        return {(tp.topic, tp.partition) for tp in consumer.assignment()}
    return {(tp.topic, tp.partition) for tp in consumer.assignment()}


def poll_until(members: list[Any], condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for member in members:
            if isinstance(member, KafkaConsumer):
                member.poll(timeout_ms=20)
            else:
                member.poll(0.02)
        if condition():
            return
    raise AssertionError(f"condition not reached within {timeout}s: {[sorted(owned(m)) for m in members]}")


def fairly_split(members: list[Any], topic: str, partitions: int) -> Callable[[], bool]:
    """Every partition owned by exactly one member, and no member owns two more than another."""

    def check() -> bool:
        sizes = [len(owned(m)) for m in members]
        union = set().union(*(owned(m) for m in members))
        return (
            sum(sizes) == partitions
            and union == {(topic, p) for p in range(partitions)}
            and max(sizes) - min(sizes) <= 1
        )

    return check


def test_members_share_partitions_and_rebalance_on_join_and_leave(shared_clusters, unique, consumers) -> None:
    bootstrap = shared_clusters[0].bootstrap
    topic, group = unique("members"), unique("group")
    make_topic(bootstrap, topic, 6)
    members: list[Consumer] = []
    for _ in range(3):
        member = confluent(bootstrap, group, consumers)
        member.subscribe([topic])
        members.append(member)
        poll_until(members, fairly_split(members, topic, 6))
    assert sorted(len(owned(m)) for m in members) == [2, 2, 2]
    members.pop().close()  # a clean close sends LeaveGroup: the others take over at once
    poll_until(members, fairly_split(members, topic, 6))
    assert sorted(len(owned(m)) for m in members) == [3, 3]


def test_confluent_and_kafka_python_members_agree_on_a_protocol(
    shared_clusters, unique, consumers, admin_for
):
    bootstrap = shared_clusters[0].bootstrap
    topic, group = unique("mixed"), unique("group")
    make_topic(bootstrap, topic, 4)
    librdkafka = confluent(bootstrap, group, consumers, **{"client.id": "librdkafka-member"})
    librdkafka.subscribe([topic])
    python = kafka_python(bootstrap, group, topic, consumers, client_id="kafka-python-member")
    poll_until([librdkafka, python], fairly_split([librdkafka, python], topic, 4))
    (description,) = admin_for(bootstrap).describe_consumer_groups([group]).values()
    described = description.result(15)
    assert described.state == ConsumerGroupState.STABLE
    assert described.partition_assignor == "range"  # the first choice of both clients
    by_client = {m.client_id: m for m in described.members}
    assert set(by_client) == {"librdkafka-member", "kafka-python-member"}
    assert {
        (tp.topic, tp.partition) for tp in by_client["librdkafka-member"].assignment.topic_partitions
    } == owned(librdkafka)
    assert all(m.host.startswith("/") for m in described.members)


CRASHING_MEMBER = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    bootstrap, group, topic = sys.argv[1:4]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "heartbeat.interval.ms": 100,
                         "session.timeout.ms": 1000})
    consumer.subscribe([topic])
    while True:
        consumer.poll(0.1)
    """
)


@pytest.mark.devbroker_only
def test_a_crashed_member_is_dropped_after_its_session_timeout(devbroker_factory, unique, consumers) -> None:
    broker = devbroker_factory(overrides={"group.min.session.timeout.ms": 500})
    topic, group = unique("crash"), unique("group")
    make_topic(broker.bootstrap, topic, 4)
    survivor = confluent(broker.bootstrap, group, consumers, **{"session.timeout.ms": 1000})
    survivor.subscribe([topic])
    poll_until([survivor], lambda: len(owned(survivor)) == 4)
    crasher = subprocess.Popen(
        [sys.executable, "-c", CRASHING_MEMBER, broker.bootstrap, group, topic],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        poll_until([survivor], lambda: len(owned(survivor)) == 2)
    finally:
        crasher.kill()  # no LeaveGroup: only the session timeout tells the coordinator
        crasher.wait(10)
    poll_until([survivor], lambda: len(owned(survivor)) == 4)


def test_static_member_restart_keeps_its_partitions_without_a_rebalance(
    shared_clusters, unique, consumers, admin_for
) -> None:
    bootstrap = shared_clusters[0].bootstrap
    topic, group = unique("static"), unique("group")
    make_topic(bootstrap, topic, 4)
    revoked: list[int] = []
    steady = confluent(bootstrap, group, consumers, **{"group.instance.id": "steady"})
    steady.subscribe([topic], on_revoke=lambda c, ps: revoked.append(len(ps)))
    restarting = confluent(bootstrap, group, consumers, **{"group.instance.id": "restarting"})
    restarting.subscribe([topic])
    poll_until([steady, restarting], fairly_split([steady, restarting], topic, 4))
    before, steady_owned, revocations = owned(restarting), owned(steady), len(revoked)
    restarting.close()  # static members do not leave the group on close
    again = confluent(bootstrap, group, consumers, **{"group.instance.id": "restarting"})
    again.subscribe([topic])
    poll_until([steady, again], lambda: owned(again) == before)
    assert owned(steady) == steady_owned
    assert len(revoked) == revocations
    described = admin_for(bootstrap).describe_consumer_groups([group])[group].result(15)
    assert sorted(m.group_instance_id for m in described.members) == ["restarting", "steady"]


def test_commits_sync_async_and_committed_with_metadata(shared_clusters, unique, consumers) -> None:
    bootstrap = shared_clusters[0].bootstrap
    topic, group = unique("commits"), unique("group")
    make_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 2, 5)
    committed_async: list[tuple[Any, list[TopicPartition]]] = []
    member = confluent(
        bootstrap, group, consumers, on_commit=lambda err, ps: committed_async.append((err, ps))
    )
    member.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 10 and time.monotonic() < deadline:
        message = member.poll(0.2)
        if message is not None and message.error() is None:
            seen += 1
    assert seen == 10
    member.commit(offsets=[TopicPartition(topic, 0, 3, metadata="sync-meta")], asynchronous=False)
    member.commit(offsets=[TopicPartition(topic, 1, 4)], asynchronous=True)
    poll_until([member], lambda: bool(committed_async))
    error, partitions = committed_async[0]
    assert error is None and partitions[0].error is None
    result = member.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=15)
    assert [(tp.partition, tp.offset) for tp in result] == [(0, 3), (1, 4)]
    assert result[0].metadata == "sync-meta"
    member.commit(asynchronous=False)  # the consumed positions
    result = member.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=15)
    assert [tp.offset for tp in result] == [5, 5]


def test_kafka_python_commits_and_reads_back_metadata(shared_clusters, unique, consumers) -> None:
    bootstrap = shared_clusters[0].bootstrap
    topic, group = unique("kp-commits"), unique("group")
    make_topic(bootstrap, topic, 2)
    member = kafka_python(bootstrap, group, topic, consumers)
    poll_until([member], lambda: len(owned(member)) == 2)
    p0, p1 = KpTopicPartition(topic, 0), KpTopicPartition(topic, 1)
    member.commit({p0: OffsetAndMetadata(7, "kp-meta", -1)})
    done: list[Any] = []
    member.commit_async(
        {p1: OffsetAndMetadata(9, "", -1)}, callback=lambda offsets, response: done.append(response)
    )
    poll_until([member], lambda: bool(done))
    assert not isinstance(done[0], Exception)
    assert member.committed(p0) == 7
    assert member.committed(p0, metadata=True).metadata == "kp-meta"
    assert member.committed(p1) == 9


def test_admin_lists_describes_alters_and_deletes_groups(
    shared_clusters, unique, consumers, admin_for
) -> None:
    bootstrap = shared_clusters[0].bootstrap
    admin = admin_for(bootstrap)
    topic, group = unique("admin"), unique("group")
    make_topic(bootstrap, topic, 2)
    member = confluent(bootstrap, group, consumers, **{"client.id": "admin-test"})
    member.subscribe([topic])
    poll_until([member], lambda: len(owned(member)) == 2)

    def listed(*states: ConsumerGroupState) -> set[str]:
        return {g.group_id for g in admin.list_consumer_groups(states=set(states)).result(15).valid}

    assert group in listed(ConsumerGroupState.STABLE)
    assert group not in listed(ConsumerGroupState.EMPTY)
    described = admin.describe_consumer_groups([group])[group].result(15)
    assert (described.state, described.is_simple_consumer_group) == (ConsumerGroupState.STABLE, False)
    (m,) = described.members
    assert m.client_id == "admin-test"
    assert {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions} == {(topic, 0), (topic, 1)}
    with pytest.raises(KafkaException) as non_empty:
        admin.delete_consumer_groups([group])[group].result(15)
    assert non_empty.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    new_offsets = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0, 11), TopicPartition(topic, 1, 12)]
    )
    # Kafka refuses admin commits while the group has members: the partitions carry the error.
    refused = admin.alter_consumer_group_offsets([new_offsets])[group].result(15)
    assert {tp.error.code() for tp in refused.topic_partitions} == {KafkaError.UNKNOWN_MEMBER_ID}

    member.close()
    assert group in listed(ConsumerGroupState.EMPTY)
    admin.alter_consumer_group_offsets([new_offsets])[group].result(15)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])
    fetched = admin.list_consumer_group_offsets([request], require_stable=True)[group].result(15)
    assert [(tp.partition, tp.offset) for tp in fetched.topic_partitions] == [(0, 11), (1, 12)]
    admin.delete_consumer_groups([group])[group].result(15)
    assert group not in listed()
    gone = admin.list_consumer_group_offsets([request])[group].result(15)
    assert {tp.offset for tp in gone.topic_partitions} == {-1001}  # librdkafka's "no offset"


def test_kafka_python_admin_group_apis(shared_clusters, unique, consumers) -> None:
    bootstrap = shared_clusters[0].bootstrap
    topic, group = unique("kp-admin"), unique("group")
    make_topic(bootstrap, topic, 1)
    tp = KpTopicPartition(topic, 0)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        member = kafka_python(bootstrap, group, topic, consumers, group_instance_id="kp-1")
        poll_until([member], lambda: len(owned(member)) == 1)
        member.commit({tp: OffsetAndMetadata(3, "", -1)})
        assert group in [g["group_id"] for g in admin.list_groups(states_filter=["Stable"])]
        assert group not in [g["group_id"] for g in admin.list_groups(states_filter=["Empty"])]
        described = admin.describe_groups([group])[group]
        assert (described["group_state"], described["protocol_type"], described["error"]) == (
            "Stable",
            "consumer",
            None,
        )
        assert [m["group_instance_id"] for m in described["members"]] == ["kp-1"]
        assert admin.list_group_offsets({group: None})[group] == {tp: OffsetAndMetadata(3, "", -1)}
        assert admin.delete_group_offsets(group, [tp]) == {tp: GroupSubscribedToTopicError}
        # Admin removal of a static member by its instance id alone (LeaveGroup v3+).
        assert list(
            admin.remove_group_members(group, [MemberToRemove(group_instance_id="kp-1")]).values()
        ) == [NoError]
        assert admin.describe_groups([group])[group]["group_state"] == "Empty"
        assert admin.delete_group_offsets(group, [tp]) == {tp: NoError}
        assert admin.list_group_offsets({group: None})[group] == {}
        assert admin.delete_groups([group]) == {group: "OK"}
        assert admin.delete_groups([group]) == {group: "GroupIdNotFoundError"}
    finally:
        admin.close()


@pytest.mark.devbroker_only  # a real cluster may refuse to recreate a topic it is still deleting
def test_deleting_a_topic_drops_its_committed_offsets(shared_clusters, unique, admin_for) -> None:
    bootstrap = shared_clusters[0].bootstrap
    admin = admin_for(bootstrap)
    topic, kept, group = unique("deleted"), unique("kept"), unique("group")
    make_topic(bootstrap, topic, 1)
    make_topic(bootstrap, kept, 1)
    offsets = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 5), TopicPartition(kept, 0, 6)])
    admin.alter_consumer_group_offsets([offsets])[group].result(15)
    admin.delete_topics([topic])[topic].result(15)
    make_topic(bootstrap, topic, 1)  # same name, new topic: it must not inherit the old offsets
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0), TopicPartition(kept, 0)])
    fetched = admin.list_consumer_group_offsets([request])[group].result(15)
    assert [(tp.topic, tp.offset) for tp in fetched.topic_partitions] == [(topic, -1001), (kept, 6)]
