"""mirrorflow.kafka's shared helpers on a real three-broker cluster while leadership moves: reads
that meet Kafka's "ask again" errors (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE) retry them
instead of failing a run."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.kafka import await_topics, reader, watermarks

from .kafkatools import produce


def test_watermarks_and_new_topics_ride_out_a_leader_change(local_kafka) -> None:
    kafka = local_kafka(brokers=3)
    admin = AdminClient(kafka.client_config())
    admin.create_topics([NewTopic("moving", 1, 3)])["moving"].result(30)
    await_topics(admin, {"moving": 1})
    produce(kafka.bootstrap, "moving", [{"value": b"%d" % i} for i in range(50)], acks="all")
    leader = admin.list_topics("moving", timeout=10).topics["moving"].partitions[0].leader
    next(node for node in kafka.nodes if node.node_id == leader).kill()

    consumer = reader({"bootstrap.servers": kafka.bootstrap})
    try:
        assert watermarks(consumer, "moving", 0, timeout_s=60) == (0, 50)
    finally:
        consumer.close()
