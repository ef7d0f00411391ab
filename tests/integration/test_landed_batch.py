"""copy/recovery/landed.py on real brokers: a sweep asks, for every key a hanging progress
transaction holds, whether the copy that progress names had landed, committed, on the target;
all keys at once, read in batches. Each answer the check gives, in one call."""

from __future__ import annotations

from confluent_kafka import Producer

from mirrorflow.clients import FlowClients
from mirrorflow.replicate.copy.recovery.landed import landed_check

from .kafkatools import create_topics
from .mirror_setup import mm2_config, replicate_once

STAMP_MS = 1_760_000_000_000


def _produce(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, key=b"k%d" % i, value=value, partition=partition, timestamp=STAMP_MS + i)
    assert producer.flush(30) == 0


def test_every_answer_of_a_transaction_in_one_call(shared_clusters, unique) -> None:
    a, b = shared_clusters[:2]
    topic, plain = unique("landed"), unique("landed-plain")
    create_topics(a.bootstrap, (topic, 4), (plain, 3))
    for partition in range(4):
        _produce(a.bootstrap, topic, partition, [b"v%d" % i for i in range(10)])
    config = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\n")
    replicate_once(config, "A", "B", unique("copy"))
    # Records the copy has not reached yet (offsets 10 to 12 of partition 2).
    _produce(a.bootstrap, topic, 2, [b"late-%d" % i for i in range(3)])
    # A remote topic written without provenance (an older copy): partition 0 holds the source's
    # records, partition 1 a last record that differs from the source's.
    create_topics(b.bootstrap, (f"A.{plain}", 3))
    for partition in range(3):
        _produce(a.bootstrap, plain, partition, [b"p0", b"p1", b"p2"])
    _produce(b.bootstrap, f"A.{plain}", 0, [b"p0", b"p1", b"p2"])
    _produce(b.bootstrap, f"A.{plain}", 1, [b"p0", b"p1", b"changed"])
    _produce(b.bootstrap, f"A.{plain}", 2, [b"p0", b"p1", b"p2"])

    clients = FlowClients.resolve(config.flow("A", "B"))
    remotes = {topic: f"A.{topic}", plain: f"A.{plain}"}
    check = landed_check(
        clients.source_consumer, clients.target_consumer, remotes.get, source="A", target="B"
    )
    gone = unique("gone")
    answers = check(
        [
            (topic, 0, 9),  # its last copy is of offset 9: landed
            (topic, 1, 5),  # copies past it were committed since: writing it again would move back
            (topic, 2, 12),  # the copy ends at 9 and the source holds 10 to 12: not landed
            (topic, 3, 9),
            (gone, 0, 3),  # no such source topic: nothing to lose
            (plain, 0, 2),  # no provenance: the same record as the source's at 2
            (plain, 1, 2),  # no provenance, another record
            (plain, 2, 7),  # no provenance, and no source record at 7: cannot be told
        ]
    )
    assert answers == {
        (topic, 0): True,
        (topic, 1): False,
        (topic, 2): False,
        (topic, 3): True,
        (gone, 0): False,
        (plain, 0): True,
        (plain, 1): False,
        (plain, 2): None,
    }
