"""mirrorflow.kafka's shared helpers on a real three-broker cluster while leadership moves: reads
that meet Kafka's "ask again" errors (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, and
OFFSET_NOT_AVAILABLE from a new leader whose high watermark has not caught up) retry them instead
of failing a run. CI once failed here on OFFSET_NOT_AVAILABLE; the window is short, so the test
asks both ways (a consumer's watermarks and the admin's batched ListOffsets) right after the kill."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from mirrorflow.kafka import KafkaCallError, await_topics, reader
from mirrorflow.kafka_offsets import list_offsets, watermarks

from .kafkatools import produce


def test_watermarks_and_new_topics_ride_out_a_leader_change(local_kafka) -> None:
    kafka = local_kafka(brokers=3)
    admin = AdminClient(kafka.client_config())
    admin.create_topics([NewTopic("moving", 1, 3)])["moving"].result(30)
    await_topics(admin, {"moving": 1})
    produce(kafka.bootstrap, "moving", [{"value": b"%d" % i} for i in range(50)], acks="all")
    leader = admin.list_topics("moving", timeout=10).topics["moving"].partitions[0].leader
    next(node for node in kafka.nodes if node.node_id == leader).kill()

    assert list_offsets(admin, [("moving", 0)], OffsetSpec.latest(), timeout_s=60) == {("moving", 0): 50}
    consumer = reader({"bootstrap.servers": kafka.bootstrap})
    try:
        assert watermarks(consumer, "moving", 0, timeout_s=60) == (0, 50)
    finally:
        consumer.close()


def test_list_offsets_never_returns_an_unanswered_request_as_an_offset(local_kafka) -> None:
    """librdkafka answers a ListOffsets its leader never answered with offset -1001 and no error.
    Taken as an offset, a plan read it as an empty partition, or as stored progress past the end
    (which restarts the copy from the earliest offset: duplicates). With the only replica gone the
    call must fail, naming the partition; the partitions still served keep their real answers."""
    kafka = local_kafka(brokers=3)
    admin = AdminClient(kafka.client_config())
    ids = [node.node_id for node in kafka.nodes]
    # The lone replica on one broker; the other topic's replicas on the other two.
    futures = admin.create_topics(
        [
            NewTopic("lonely", 1, replica_assignment=[[ids[0]]]),
            NewTopic("served", 1, replica_assignment=[ids[1:]]),
        ]
    )
    for future in futures.values():
        future.result(30)
    await_topics(admin, {"lonely": 1, "served": 1})
    produce(kafka.bootstrap, "lonely", [{"value": b"x"}] * 5, acks="all")
    produce(kafka.bootstrap, "served", [{"value": b"x"}] * 7, acks="all")
    # A timestamp past the last record has no offset: Kafka's answer is -1, not an error.
    assert list_offsets(admin, [("served", 0)], OffsetSpec.for_timestamp(2**52)) == {("served", 0): -1}

    kafka.nodes[0].kill()
    try:
        with pytest.raises(KafkaCallError, match="lonely-0") as raised:
            list_offsets(admin, [("lonely", 0), ("served", 0)], OffsetSpec.latest(), timeout_s=8)
        assert "served-0" not in str(raised.value)
    finally:
        # A controlled shutdown with an offline partition waits out its whole timeout; this
        # throwaway cluster needs none.
        for node in kafka.nodes:
            node.kill()
