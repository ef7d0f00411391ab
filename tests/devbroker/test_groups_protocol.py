"""Group APIs on the wire (kio + socket): every version family clients use, and the error codes
real clients never provoke on purpose (stale generations, wrong protocols, unknown members)."""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.consumer_protocol_subscription.v0.data import ConsumerProtocolSubscription
from kio.serial import entity_writer
from raw_protocol import RawClient, create_topic

pytestmark = pytest.mark.devbroker_only  # requests go to the bootstrap node as the coordinator

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
INVALID_REQUEST = 42
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_SUBSCRIBED_TO_TOPIC = 86
UNSTABLE_OFFSET_COMMIT = 88

JOIN, SYNC, HEARTBEAT, LEAVE = 11, 14, 12, 13
COMMIT, FETCH, FIND_COORDINATOR = 8, 9, 10
DESCRIBE, LIST, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47


@pytest.fixture
def bootstrap(shared_clusters) -> str:
    return shared_clusters[0].bootstrap


@pytest.fixture
def client(bootstrap: str) -> Iterator[RawClient]:
    with RawClient(bootstrap) as raw:
        yield raw


def subscription(*topics: str) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">h", 0))
    entity_writer(ConsumerProtocolSubscription)(
        out, ConsumerProtocolSubscription(topics=topics, user_data=None)
    )
    return out.getvalue()


def join_body(group: str, member_id: str, topics: tuple[str, ...], **extra: Any) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription(*topics)}],
        **extra,
    }


def sync_body(
    group: str, generation: int, member_id: str, assignments: dict[str, bytes], **extra: Any
) -> dict:
    return {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()],
        **extra,
    }


def commit_body(group: str, generation: int, member_id: str, topic: str, offset: int, **extra: Any) -> dict:
    partition = {"partition_index": 0, "committed_offset": offset, "committed_metadata": None}
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [partition]}],
        **extra,
    }


def commit_error(client: RawClient, version: int, body: dict) -> int:
    return client.request(COMMIT, version, body).topics[0].partitions[0].error_code


def member_id_for(client: RawClient, group: str, topics: tuple[str, ...]) -> str:
    response = client.request(JOIN, 5, join_body(group, "", topics))
    assert response.error_code == MEMBER_ID_REQUIRED
    return response.member_id


def stable_member(client: RawClient, group: str, topics: tuple[str, ...], assignment: bytes = b"a") -> str:
    member = member_id_for(client, group, topics)
    joined = client.request(JOIN, 5, join_body(group, member, topics))
    assert (joined.error_code, joined.generation_id, joined.leader) == (NONE, 1, member)
    synced = client.request(SYNC, 5, sync_body(group, 1, member, {member: assignment}))
    assert (synced.error_code, synced.assignment) == (NONE, assignment)
    return member


def test_find_coordinator_in_every_version(client: RawClient, bootstrap: str, unique) -> None:
    port = int(bootstrap.rsplit(":", 1)[1])
    v0 = client.request(FIND_COORDINATOR, 0, {"key": unique("g")})
    assert (v0.error_code, v0.host, v0.port) == (NONE, "127.0.0.1", port)
    v3 = client.request(FIND_COORDINATOR, 3, {"key": "txn-id", "key_type": 1})
    assert (v3.error_code, v3.port, v3.error_message) == (NONE, port, None)
    bad = client.request(FIND_COORDINATOR, 3, {"key": "x", "key_type": 2})
    assert (bad.error_code, bad.node_id, bad.host, bad.port) == (INVALID_REQUEST, -1, "", -1)
    assert "key type 2" in bad.error_message
    batched = client.request(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
    assert [(c.key, c.error_code, c.port) for c in batched.coordinators] == [
        ("a", NONE, port),
        ("b", NONE, port),
    ]
    share = client.request(FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": ["s"]})
    assert [(c.error_code, c.node_id) for c in share.coordinators] == [(INVALID_REQUEST, -1)]


def test_rebalance_with_stale_generations_and_inconsistent_protocols(bootstrap: str, unique) -> None:
    topic, group = unique("raw-topic"), unique("raw-group")
    with RawClient(bootstrap) as a, RawClient(bootstrap) as b:
        assert create_topic(a, topic, 1).error_code == NONE
        first = stable_member(a, group, (topic,))
        assert (
            a.request(HEARTBEAT, 4, {"group_id": group, "generation_id": 1, "member_id": first}).error_code
            == 0
        )

        second = member_id_for(b, group, (topic,))
        parked = b.send(JOIN, 5, join_body(group, second, (topic,)))
        hb = a.request(HEARTBEAT, 4, {"group_id": group, "generation_id": 1, "member_id": first})
        assert hb.error_code == REBALANCE_IN_PROGRESS
        # Commits with the current generation are still fine while the group prepares a rebalance.
        assert commit_error(a, 8, commit_body(group, 1, first, topic, 5)) == NONE

        rejoined = a.request(JOIN, 5, join_body(group, first, (topic,)))
        b_joined = b.receive(JOIN, 5, parked)
        assert rejoined.generation_id == b_joined.generation_id == 2
        assert (rejoined.leader, b_joined.leader) == (first, first)
        assert sorted(m.member_id for m in rejoined.members) == sorted([first, second])
        assert b_joined.members == ()

        assert commit_error(a, 8, commit_body(group, 1, first, topic, 6)) == ILLEGAL_GENERATION
        assert commit_error(a, 8, commit_body(group, 2, first, topic, 6)) == REBALANCE_IN_PROGRESS
        assert commit_error(a, 8, commit_body(group, -1, "", topic, 6)) == UNKNOWN_MEMBER_ID
        wrong_protocol = b.request(SYNC, 5, sync_body(group, 2, second, {}, protocol_name="roundrobin"))
        assert wrong_protocol.error_code == INCONSISTENT_GROUP_PROTOCOL
        wrong_type = b.request(SYNC, 5, sync_body(group, 2, second, {}, protocol_type="connect"))
        assert wrong_type.error_code == INCONSISTENT_GROUP_PROTOCOL
        assert b.request(SYNC, 5, sync_body(group, 1, second, {})).error_code == ILLEGAL_GENERATION
        assert b.request(SYNC, 3, sync_body(group, 2, "ghost", {})).error_code == UNKNOWN_MEMBER_ID

        follower_sync = b.send(SYNC, 5, sync_body(group, 2, second, {}))
        leader_sync = a.request(SYNC, 5, sync_body(group, 2, first, {first: b"A", second: b"B"}))
        assert (leader_sync.error_code, leader_sync.assignment, leader_sync.protocol_name) == (
            NONE,
            b"A",
            "range",
        )
        assert b.receive(SYNC, 5, follower_sync).assignment == b"B"

        assert a.request(
            HEARTBEAT, 0, {"group_id": group, "generation_id": 1, "member_id": first}
        ).error_code == (ILLEGAL_GENERATION)
        assert a.request(
            HEARTBEAT, 4, {"group_id": group, "generation_id": 2, "member_id": "x"}
        ).error_code == (UNKNOWN_MEMBER_ID)
        assert commit_error(a, 9, commit_body(group, 2, first, topic, 7)) == NONE
        assert commit_error(a, 9, commit_body(unique("nobody"), 3, "m", topic, 7)) == GROUP_ID_NOT_FOUND
        assert commit_error(a, 8, commit_body(unique("nobody"), 3, "m", topic, 7)) == ILLEGAL_GENERATION

        assert b.request(LEAVE, 0, {"group_id": group, "member_id": second}).error_code == NONE
        assert b.request(LEAVE, 2, {"group_id": group, "member_id": second}).error_code == UNKNOWN_MEMBER_ID
        batched = a.request(
            LEAVE,
            5,
            {
                "group_id": group,
                "members": [
                    {"member_id": first, "group_instance_id": None, "reason": "done"},
                    {"member_id": "ghost", "group_instance_id": None, "reason": None},
                ],
            },
        )
        assert (batched.error_code, [m.error_code for m in batched.members]) == (
            NONE,
            [NONE, UNKNOWN_MEMBER_ID],
        )


def test_join_before_v4_and_skip_assignment_in_v9(client: RawClient, unique) -> None:
    topic, group = unique("raw-topic"), unique("raw-group")
    create_topic(client, topic, 1)
    joined = client.request(JOIN, 2, join_body(group, "", (topic,)))
    assert joined.error_code == NONE and joined.member_id.startswith("raw-")
    assert joined.protocol_name == "range"
    client.request(
        SYNC, 2, sync_body(group, joined.generation_id, joined.member_id, {joined.member_id: b"x"})
    )
    static_group = unique("static-group")
    body = join_body(static_group, "", (topic,), group_instance_id="pod-0")
    first = client.request(JOIN, 9, body)
    client.request(
        SYNC,
        5,
        sync_body(static_group, 1, first.member_id, {first.member_id: b"P"}, group_instance_id="pod-0"),
    )
    again = client.request(JOIN, 9, body)
    assert (again.error_code, again.generation_id, again.skip_assignment) == (NONE, 1, True)
    assert again.leader == again.member_id != first.member_id
    fenced = client.request(
        HEARTBEAT,
        4,
        {
            "group_id": static_group,
            "generation_id": 1,
            "member_id": first.member_id,
            "group_instance_id": "pod-0",
        },
    )
    assert fenced.error_code == 82  # FENCED_INSTANCE_ID


def test_offset_fetch_versions(client: RawClient, unique) -> None:
    topic, group, empty = unique("raw-topic"), unique("raw-group"), unique("empty-group")
    create_topic(client, topic, 2)
    body = commit_body(group, -1, "", topic, 42)
    body["topics"][0]["partitions"][0].update(committed_leader_epoch=3, committed_metadata="m")
    assert commit_error(client, 8, body) == NONE
    v2_body = commit_body(group, -1, "", topic, 7, retention_time=-1)
    v2_body["topics"][0]["partitions"][0]["partition_index"] = 1
    assert commit_error(client, 2, v2_body) == NONE

    v1 = client.request(
        FETCH, 1, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1]}]}
    )
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in v1.topics[0].partitions] == [
        (0, 42, "m"),
        (1, 7, ""),
    ]
    v5 = client.request(FETCH, 5, {"group_id": group, "topics": None})
    assert v5.error_code == NONE
    by_partition = {
        p.partition_index: (p.committed_offset, p.committed_leader_epoch) for p in v5.topics[0].partitions
    }
    assert by_partition == {0: (42, 3), 1: (7, -1)}
    v7 = client.request(
        FETCH,
        7,
        {"group_id": empty, "topics": [{"name": topic, "partition_indexes": [0]}], "require_stable": True},
    )
    assert [(p.committed_offset, p.error_code) for p in v7.topics[0].partitions] == [(-1, NONE)]
    v8 = client.request(
        FETCH,
        8,
        {
            "groups": [
                {"group_id": group, "topics": None},
                {"group_id": empty, "topics": [{"name": topic, "partition_indexes": [1]}]},
            ],
            "require_stable": True,
        },
    )
    assert [g.group_id for g in v8.groups] == [group, empty]
    assert sorted(p.committed_offset for p in v8.groups[0].topics[0].partitions) == [7, 42]
    assert v8.groups[1].topics[0].partitions[0].committed_offset == -1


def test_describe_and_list_groups_versions(client: RawClient, unique) -> None:
    topic, group = unique("raw-topic"), unique("raw-group")
    create_topic(client, topic, 1)
    member = stable_member(client, group, (topic,), assignment=b"assigned")
    missing = unique("missing")
    v0 = client.request(DESCRIBE, 0, {"groups": [missing]})
    assert [(g.error_code, g.group_state, g.members) for g in v0.groups] == [(NONE, "Dead", ())]
    v6 = client.request(DESCRIBE, 6, {"groups": [group, missing], "include_authorized_operations": False})
    found, not_found = v6.groups
    assert (not_found.error_code, not_found.error_message) == (
        GROUP_ID_NOT_FOUND,
        f"Group {missing} not found.",
    )
    assert (found.group_state, found.protocol_type, found.protocol_data) == ("Stable", "consumer", "range")
    assert found.authorized_operations == -2147483648
    (m,) = found.members
    assert (m.member_id, m.client_id, m.client_host) == (member, "raw", "/127.0.0.1")
    assert (m.member_metadata, m.member_assignment) == (subscription(topic), b"assigned")

    v0_list = client.request(LIST, 0, {})
    assert (group, "consumer") in {(g.group_id, g.protocol_type) for g in v0_list.groups}
    stable = client.request(LIST, 4, {"states_filter": ["Stable"]})
    assert group in {g.group_id for g in stable.groups}
    assert all(g.group_state == "Stable" for g in stable.groups)
    assert group not in {g.group_id for g in client.request(LIST, 4, {"states_filter": ["Empty"]}).groups}
    classic = client.request(LIST, 5, {"states_filter": [], "types_filter": ["classic"]})
    assert {g.group_type for g in classic.groups} == {"classic"} and group in {
        g.group_id for g in classic.groups
    }
    assert client.request(LIST, 5, {"states_filter": [], "types_filter": ["consumer"]}).groups == ()


def test_offset_delete_and_delete_groups(client: RawClient, unique) -> None:
    subscribed, other, group = unique("subscribed"), unique("other"), unique("raw-group")
    create_topic(client, subscribed, 1)
    create_topic(client, other, 1)
    member = stable_member(client, group, (subscribed,))
    for topic in (subscribed, other):
        assert commit_error(client, 8, commit_body(group, 1, member, topic, 3)) == NONE

    def offset_delete(group_id: str, *topics: str) -> Any:
        return client.request(
            OFFSET_DELETE,
            0,
            {
                "group_id": group_id,
                "topics": [{"name": t, "partitions": [{"partition_index": 0}]} for t in topics],
            },
        )

    response = offset_delete(group, subscribed, other, "no-such-topic")
    assert response.error_code == NONE
    assert {t.name: t.partitions[0].error_code for t in response.topics} == {
        subscribed: GROUP_SUBSCRIBED_TO_TOPIC,
        other: NONE,
        "no-such-topic": UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert offset_delete(unique("missing"), other).error_code == GROUP_ID_NOT_FOUND
    deleted = client.request(DELETE_GROUPS, 0, {"groups_names": [group]})
    assert [(r.group_id, r.error_code) for r in deleted.results] == [(group, NON_EMPTY_GROUP)]
    assert (
        client.request(
            LEAVE, 3, {"group_id": group, "members": [{"member_id": member, "group_instance_id": None}]}
        ).error_code
        == NONE
    )
    fetched = client.request(FETCH, 7, {"group_id": group, "topics": None, "require_stable": False})
    assert [t.name for t in fetched.topics] == [subscribed]
    deleted = client.request(DELETE_GROUPS, 2, {"groups_names": [group, group]})
    assert [(r.group_id, r.error_code) for r in deleted.results] == [(group, NONE)]
    again = client.request(DELETE_GROUPS, 2, {"groups_names": [group]})
    assert [r.error_code for r in again.results] == [GROUP_ID_NOT_FOUND]
    assert client.request(FETCH, 7, {"group_id": group, "topics": None, "require_stable": False}).topics == ()


def test_transactional_offsets_are_unstable_until_the_transaction_ends(
    bootstrap: str, client: RawClient, unique
) -> None:
    topic, group = unique("txn-topic"), unique("txn-group")
    create_topic(client, topic, 1)
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn")})
    try:
        producer.init_transactions(15)

        def fetch(require_stable: bool) -> tuple[int, int]:
            body = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}
            (p,) = client.request(FETCH, 7, {**body, "require_stable": require_stable}).topics[0].partitions
            return p.committed_offset, p.error_code

        for offset, commit in ((5, True), (9, False)):
            producer.begin_transaction()
            producer.send_offsets_to_transaction(
                [TopicPartition(topic, 0, offset)], member.consumer_group_metadata(), 15
            )
            expected = -1 if commit else 5
            assert fetch(require_stable=True) == (-1, UNSTABLE_OFFSET_COMMIT)
            assert fetch(require_stable=False) == (expected, NONE)
            if commit:
                producer.commit_transaction(15)
            else:
                producer.abort_transaction(15)
            assert fetch(require_stable=True) == (5, NONE)
    finally:
        member.close()
