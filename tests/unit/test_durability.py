"""What "nothing lost on the target" asks of a topic, and which topics a flow writes there."""

from __future__ import annotations

import pytest

from mirrorflow.config import load_config
from mirrorflow.ops.durability import config_sync_problems, written_topics
from mirrorflow.ops.durability_words import Replication, shortfalls

BASE = """
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""


@pytest.mark.parametrize(
    ("factor", "min_insync", "unclean", "expected"),
    [
        (3, 2, False, []),
        (5, 3, False, []),
        (3, 1, False, ["leader alone"]),
        (3, 3, False, ["writes stop while one of its brokers is down"]),
        (2, 2, False, ["replication factor 2", "writes stop"]),
        (2, 1, False, ["replication factor 2", "leader alone"]),
        (1, 1, False, ["replication factor 1", "leader alone"]),
        (1, 2, False, ["replication factor 1", "every write is refused"]),
        (3, 2, True, ["unclean.leader.election.enable=true"]),
    ],
)
def test_shortfalls(factor, min_insync, unclean, expected) -> None:
    reasons = shortfalls(Replication(factor, min_insync, unclean))
    assert len(reasons) == len(expected), reasons
    for reason, words in zip(reasons, expected, strict=True):
        assert words in reason


def test_a_topic_still_to_be_created_needs_as_many_brokers_as_its_replication_factor() -> None:
    assert "creating it fails" in shortfalls(Replication(3, 2, False), brokers=1)[0]
    assert shortfalls(Replication(3, 2, False), brokers=3) == []


def test_written_topics_follow_the_flow() -> None:
    flow = load_config(BASE).flow("A", "B")
    topics = written_topics(
        flow, ["orders", "__consumer_offsets", "B.orders"], replicates=True, heartbeats=True
    )
    assert [(t.name, t.factor_key, t.factor) for t in topics] == [
        ("A.orders", "replication.factor", 2),
        ("mm2-offsets.A.internal", "offset.storage.replication.factor", 3),
        ("A.checkpoints.internal", "checkpoints.topic.replication.factor", 3),
        ("heartbeats", "heartbeats.topic.replication.factor", 3),
    ]
    on_target = load_config(
        BASE + "offset-syncs.topic.location = target\nemit.checkpoints.enabled = false\n"
    ).flow("A", "B")
    names = [t.name for t in written_topics(on_target, ["orders"], replicates=True, heartbeats=False)]
    assert names == ["A.orders", "mm2-offsets.A.internal", "mm2-offset-syncs.A.internal"]
    assert [t.name for t in written_topics(flow, ["orders"], replicates=False, heartbeats=True)] == [
        "heartbeats"
    ]


def test_config_sync_that_would_overwrite_min_insync_replicas_is_a_warning() -> None:
    assert config_sync_problems(load_config(BASE).flow("A", "B")) == []
    synced = load_config(BASE + "config.properties.exclude = unclean.leader.election.enable\n").flow("A", "B")
    [problem] = config_sync_problems(synced)
    assert not problem.is_error
    assert problem.key == "config.properties.exclude"
    assert "copies min.insync.replicas" in problem.message
    no_sync = load_config(
        BASE
        + "config.properties.exclude = unclean.leader.election.enable\nsync.topic.configs.enabled = false\n"
    ).flow("A", "B")
    assert config_sync_problems(no_sync) == []
