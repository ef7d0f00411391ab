"""The durability check on real brokers: single-node clusters cannot keep acknowledged records
through a broker failure, and `mirrorflow validate --connect` says so for every topic a flow
writes on its target (the 3-broker case, which must give no warning, is checked by
tests/reliability/test_target_leader_failover.py)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, NewTopic

from localkafka.node import free_port
from mirrorflow.cli import main
from mirrorflow.kafka import await_topics
from mirrorflow.ops.durability import check_flow_durability

from .kafkatools import create_topics
from .mirror_setup import mm2_config, mm2_text

# Assumes single-node clusters: deselected against clusters of your own.
pytestmark = pytest.mark.local_kafka


def test_every_topic_the_flow_writes_on_a_single_node_target_is_named(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    prefix = unique("durable")
    plain, unclean, missing = f"{prefix}-plain", f"{prefix}-unclean", f"{prefix}-missing"
    create_topics(a.bootstrap, (plain, 2), (unclean, 1), (missing, 1))
    target = AdminClient(b.client_config())
    remote = [
        NewTopic(f"A.{plain}", 2, 1),
        NewTopic(f"A.{unclean}", 1, 1, config={"unclean.leader.election.enable": "true"}),
    ]
    for future in target.create_topics(remote).values():
        future.result(30)
    await_topics(target, {f"A.{plain}": 2, f"A.{unclean}": 1})
    flow = mm2_config([a, b], ["A->B"], f"A->B.topics = {prefix}-.*\n").flow("A", "B")

    problems = check_flow_durability(flow, AdminClient(a.client_config()), target)

    assert all(not p.is_error for p in problems)
    by_key = {p.key: p for p in problems}
    existing = by_key[f"B:A.{plain}"]
    assert "replication factor 1" in existing.message and "min.insync.replicas 1" in existing.message
    assert "not created yet" not in existing.message
    assert "kafka-reassign-partitions.sh" in existing.fix
    assert f"--entity-name A.{plain} --add-config min.insync.replicas=2" in existing.fix
    assert "unclean.leader.election.enable=true" in by_key[f"B:A.{unclean}"].message
    assert "unclean.leader.election.enable=false" in by_key[f"B:A.{unclean}"].fix
    to_create = by_key[f"B:A.{missing}"]
    assert "not created yet" in to_create.message and "replication factor 1" in to_create.message
    assert "set replication.factor = 3" in to_create.fix
    for internal in ("mm2-offsets.A.internal", "A.checkpoints.internal", "heartbeats"):
        assert "min.insync.replicas 1" in by_key[f"B:{internal}"].message, internal


def test_remote_topics_with_the_same_shortfall_share_one_warning(shared_clusters, unique) -> None:
    a, b, _ = shared_clusters
    prefix = unique("many")
    create_topics(a.bootstrap, *((f"{prefix}-{i}", 1) for i in range(12)))
    flow = mm2_config([a, b], ["A->B"], f"A->B.topics = {prefix}-.*\n").flow("A", "B")

    problems = check_flow_durability(flow, AdminClient(a.client_config()), AdminClient(b.client_config()))

    [remote] = [p for p in problems if "remote topics" in p.message]
    assert remote.key == "B: 12 remote topics of A->B"
    assert f"A.{prefix}-0" in remote.message and "and 2 more" in remote.message


def test_validate_connect_prints_the_warnings_and_exits_zero(shared_clusters, unique, tmp_path) -> None:
    a, b, _ = shared_clusters
    topic = unique("validated")
    create_topics(a.bootstrap, (topic, 1))
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b], ["A->B"], f"A->B.topics = {topic}\n"))

    offline = CliRunner().invoke(main, ["validate", str(path)], env={"COLUMNS": "250"})
    connected = CliRunner().invoke(main, ["validate", "--connect", str(path)], env={"COLUMNS": "250"})

    assert offline.exit_code == 0 and "0 error(s), 0 warning(s)" in offline.output
    assert "--connect" not in offline.output
    assert connected.exit_code == 0, connected.output
    assert f"B:A.{topic}" in connected.output and "replication factor 1" in connected.output
    assert "--connect: checked the clusters, filters and written topics of 2 flow(s)" in connected.output
    assert "0 error(s)" in connected.output and "0 warning(s)" not in connected.output


def test_validate_connect_to_a_cluster_that_does_not_answer_is_an_error(tmp_path) -> None:
    path = tmp_path / "mm2.properties"
    nobody = f"127.0.0.1:{free_port('127.0.0.1')}"
    path.write_text(
        f"clusters = A, B\nA.bootstrap.servers = {nobody}\nB.bootstrap.servers = {nobody}\n"
        "A->B.enabled = true\nemit.heartbeats.enabled = false\n"
    )

    result = CliRunner().invoke(
        main, ["validate", "--connect", "--connect-timeout", "1", str(path)], env={"COLUMNS": "250"}
    )

    assert result.exit_code == 1, result.output
    # Every cluster is asked, each once: both are reported, not only the first.
    assert f"cluster A (source of A->B) at {nobody} did not answer within 1s" in result.output
    assert f"cluster B (target of A->B) at {nobody} did not answer within 1s" in result.output
    assert "2 error(s)" in result.output
