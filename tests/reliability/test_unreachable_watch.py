"""A cluster killed under a producer stays unreachable to its ClusterWatch while librdkafka fails
the queued deliveries: the copy's flush once took the queue getting shorter for an answer, so
failed deliveries (message.timeout.ms) cleared the watch and a dead target looked alive, pushing
the copy's end past mirrorflow.cluster.unreachable.timeout.ms."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, Producer

from mirrorflow.kafka import ClusterWatch
from mirrorflow.replicate.copy.calls import flush

from ..integration.kafkatools import create_topics

RECORDS = 200
# Above anything this test waits: the watch must never give up here, only stay down.
LIMIT_S = 600.0


def test_deliveries_that_fail_after_the_cluster_died_do_not_count_as_answers(local_kafka) -> None:
    kafka = local_kafka()
    create_topics(kafka.bootstrap, ("t", 1))
    watch = ClusterWatch("B", kafka.bootstrap, LIMIT_S)
    delivered: list[int] = []
    failed: list[KafkaError] = []

    def report(error: KafkaError | None, message) -> None:
        if error is None:
            delivered.append(message.offset())
        else:
            failed.append(error)

    # Deliveries that cannot reach the cluster fail after message.timeout.ms: a short one lets
    # them fail within the flush (the same fault with the default timeouts is run by hand).
    producer = Producer(
        watch.config({"bootstrap.servers": kafka.bootstrap, "message.timeout.ms": 3000, "log_level": 0})
    )
    producer.produce("t", b"before", on_delivery=report)
    assert flush(producer, watch, 30, lambda: len(delivered)) == 0
    assert delivered == [0] and watch.down_since is None

    kafka.kill()
    deadline = time.monotonic() + 60
    while watch.down_since is None:
        assert time.monotonic() < deadline, "librdkafka never reported the killed cluster"
        producer.poll(0.1)
    went_down = watch.down_since
    for i in range(RECORDS):
        producer.produce("t", b"%d" % i, on_delivery=report)

    assert flush(producer, watch, 60, lambda: len(delivered)) == 0
    assert delivered == [0], "records were acknowledged by a killed cluster"
    assert len(failed) == RECORDS and {e.code() for e in failed} == {KafkaError._MSG_TIMED_OUT}
    # The queue emptied only by failing: the cluster is still down since librdkafka said so.
    assert watch.down_since == went_down
