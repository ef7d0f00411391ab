"""A DR link crosses regions: both clusters behind a 25 ms one-way delay (localkafka's latency
proxy, a 50 ms round trip to each), every client of the flow reaching them only through it.
Exactly-once copies, checkpoints and failover stay exact: every record lands once, groups move
to where they stopped. (Each step costs tens of round trips there: one copy run, one checkpoint
pass and one failover keep the test at about half a minute.)

The two clusters are the module's own; the test setup writes and reads over their direct
listeners, the flow only over the slow ones.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from localkafka import LocalKafka
from mirrorflow.cli import main
from mirrorflow.config import load_config
from mirrorflow.control.checkpoints import emit_checkpoints, remote_consumer_offsets
from mirrorflow.ops.failover import failover

from ..conftest import cluster_pair
from .kafkatools import create_topics, produce_aborted, read_all
from .mirror_setup import SINGLE_BROKER, replicate_once
from .test_failover_helpers import consume, consume_rest, produce_numbered

DELAY_MS = 25


@pytest.fixture(scope="module")
def far_apart(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalKafka, LocalKafka]]:
    with cluster_pair(tmp_path_factory, link_delay_ms=DELAY_MS) as pair:
        yield pair


def test_exactly_once_copies_and_failover_stay_exact_over_a_slow_link(far_apart, unique, tmp_path) -> None:
    """One test, so the pair starts once whatever xdist deals."""
    a, b = far_apart
    topic, group = unique("orders"), unique("billing")
    properties = (
        "clusters = A, B\n"
        f"A.bootstrap.servers = {a.bootstrap_for('SLOW')}\n"
        f"B.bootstrap.servers = {b.bootstrap_for('SLOW')}\n"
        f"A->B.enabled = true\nA->B.topics = {topic}\nmirrorflow.range.max.records = 50\n" + SINGLE_BROKER
    )
    config = load_config(properties)

    # validate --connect sees both clusters far away and suggests the WAN fetch for the source.
    path = tmp_path / "mm2.properties"
    path.write_text(properties)
    shown = json.loads(
        CliRunner().invoke(main, ["validate", str(path), "--connect", "--output", "json"]).output
    )
    far = {c["alias"]: c for c in shown["clusters"]}
    assert far["A"]["round_trip_ms"] >= 2 * DELAY_MS and any("a slow link" in n for n in far["A"]["notes"])
    suggested = [p for p in shown["problems"] if p["key"] == "A.consumer.max.partition.fetch.bytes"]
    assert len(suggested) == 1 and "= 33554432" in suggested[0]["fix"]
    path.write_text(properties + "A.consumer.max.partition.fetch.bytes = 33554432\n")
    tuned = json.loads(
        CliRunner().invoke(main, ["validate", str(path), "--connect", "--output", "json"]).output
    )
    assert not [p for p in tuned["problems"] if p["key"] == "A.consumer.max.partition.fetch.bytes"]

    create_topics(a.bootstrap, (topic, 3))
    written = produce_numbered(a.bootstrap, topic, 3, 150)
    produce_aborted(a.bootstrap, topic, 2, unique("tx"))
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
