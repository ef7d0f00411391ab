"""A DR link crosses regions: both clusters behind a 25 ms one-way delay (localkafka's latency
proxy, a 50 ms round trip to each), every client of the flow reaching them only through it.
Exactly-once copies, checkpoints and failover stay exact: every record lands once, groups move
to where they stopped. (Each step costs tens of round trips there: one copy run, one checkpoint
pass and one failover keep the test at about half a minute.)

The two clusters are the module's own; the test setup writes and reads over their direct
listeners, the flow only over the slow ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from localkafka import LocalKafka
from mirrorflow.config import load_config
from mirrorflow.control.checkpoints import emit_checkpoints, remote_consumer_offsets
from mirrorflow.ops.broker_features import probe
from mirrorflow.ops.failover import failover

from ..conftest import TEST_BROKER_OVERRIDES
from .kafkatools import create_topics, read_all
from .mirror_setup import SINGLE_BROKER, replicate_once
from .test_failover_helpers import consume, consume_rest, produce_numbered

DELAY_MS = 25


@pytest.fixture(scope="module")
def far_apart(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, LocalKafka]]:
    a, b = (
        LocalKafka(
            tmp_path_factory.mktemp(f"kafka-{alias}"), overrides=TEST_BROKER_OVERRIDES, link_delay_ms=DELAY_MS
        )
        for alias in "AB"
    )
    try:
        a.launch()
        b.launch()
        yield a.start(), b.start()
    finally:
        a.stop()
        b.stop()


def test_exactly_once_copies_and_failover_stay_exact_over_a_slow_link(far_apart, unique) -> None:
    a, b = far_apart
    assert probe({"bootstrap.servers": a.bootstrap_for("SLOW")}, 10).round_trip_ms >= 2 * DELAY_MS
    topic, group = unique("orders"), unique("billing")
    config = load_config(
        "clusters = A, B\n"
        f"A.bootstrap.servers = {a.bootstrap_for('SLOW')}\n"
        f"B.bootstrap.servers = {b.bootstrap_for('SLOW')}\n"
        f"A->B.enabled = true\nA->B.topics = {topic}\nmirrorflow.range.max.records = 50\n" + SINGLE_BROKER
    )
    create_topics(a.bootstrap, (topic, 3))
    written = produce_numbered(a.bootstrap, topic, 3, 150)
    aborted = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": unique("tx")})
    aborted.init_transactions(30)
    aborted.begin_transaction()
    aborted.produce(topic, b"aborted", partition=2)
    assert aborted.flush(30) == 0
    aborted.abort_transaction(30)
    written += produce_numbered(a.bootstrap, topic, 3, 150, start=150)
    read_on_a = consume(a.bootstrap, group, [topic], 170)

    copied = replicate_once(config, "A", "B", unique("run"))

    assert copied["topics"][topic]["records"] == 300
    remote = [r.value.decode() for p in range(3) for r in read_all(b.bootstrap, f"A.{topic}", p)]
    assert sorted(remote) == sorted(written)  # every record once, the aborted one never

    emit_checkpoints(config, "A", "B")
    moved = failover(config, "A", "B", group)
    assert moved.committed == [group] and {r.status for r in moved.rows} == {"exact"}
    checkpointed = remote_consumer_offsets({"bootstrap.servers": b.bootstrap}, "A", group)
    assert {k: v.offset for k, v in checkpointed.items()} == {
        (r.topic, r.partition): r.target_offset for r in moved.rows
    }
    read_on_b = consume_rest(b.bootstrap, group, [f"A.{topic}"])
    seen = Counter([g.payload for g in read_on_a] + [g.payload for g in read_on_b])
    assert set(seen) == set(written) and max(seen.values()) == 1
