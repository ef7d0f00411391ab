"""Heartbeat jobs against real Kafka clusters: MM2's bytes, the reverse herder, replicated heartbeats."""

from __future__ import annotations

import socket
import struct
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from mirrorflow.cli import main
from mirrorflow.control import heartbeats
from mirrorflow.control.heartbeats import HeartbeatError, emit_heartbeats
from mirrorflow.control.mirror_client import MirrorClient
from mirrorflow.mm2.formats import Heartbeat

from .kafkatools import create_topics, read_all
from .mirror_setup import mm2_config, mm2_text, replicate_once


def topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return {k: e.value for k, e in admin.describe_configs([resource])[resource].result().items()}


def partitions(bootstrap: str, topic: str) -> int:
    return len(AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic).topics[topic].partitions)


def test_heartbeat_is_written_byte_for_byte_as_mm2_writes_it(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"])
    (run,) = emit_heartbeats([config.flow("A", "B")])
    assert run.created_topic and run.emitted == 1 and run.cluster == "B" and run.topic == "heartbeats"

    (record,) = read_all(b.bootstrap, "heartbeats")
    ts = record.timestamp
    assert record.key == b"\x00\x01A\x00\x01B"
    assert record.value == b"\x00\x00" + struct.pack(">q", ts)
    assert Heartbeat.decode(record.key, record.value) == Heartbeat("A", "B", ts)
    assert run.first_ms == run.last_ms == ts
    # MirrorHeartbeatConnector's topic: compacted, one partition.
    assert partitions(b.bootstrap, "heartbeats") == 1
    assert topic_config(b.bootstrap, "heartbeats")["cleanup.policy"] == "compact"

    (again,) = emit_heartbeats([config.flow("A", "B")])
    assert not again.created_topic
    assert [r.offset for r in read_all(b.bootstrap, "heartbeats")] == [0, 1]


def test_a_window_emits_at_start_and_every_interval(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"], "A->B.emit.heartbeats.interval.seconds = 1\n")
    (run,) = emit_heartbeats([config.flow("A", "B")], duration_s=2.0)
    records = read_all(b.bootstrap, "heartbeats")
    assert run.emitted == len(records) == 3
    stamps = [Heartbeat.decode(r.key, r.value).timestamp_ms for r in records]
    assert stamps == sorted(set(stamps))
    assert (run.first_ms, run.last_ms) == (stamps[0], stamps[-1])


def test_remote_heartbeats_reach_b_when_only_a_to_b_is_enabled(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"])
    assert [f.name for f in config.heartbeat_flows] == ["A->B", "B->A"]
    runs = emit_heartbeats(config.heartbeat_flows)
    assert {(r.flow, r.cluster) for r in runs} == {("A->B", "B"), ("B->A", "A")}

    (on_a,) = read_all(a.bootstrap, "heartbeats")
    assert Heartbeat.decode(on_a.key, on_a.value).source_alias == "B"
    summary = replicate_once(config, "A", "B", "hb-run")
    assert summary["topics"]["heartbeats"]["records"] == 1

    (copied,) = read_all(b.bootstrap, "A.heartbeats")
    assert (copied.key, copied.value, copied.timestamp) == (on_a.key, on_a.value, on_a.timestamp)
    assert Heartbeat.decode(copied.key, copied.value) == Heartbeat("B", "A", on_a.timestamp)
    (local,) = read_all(b.bootstrap, "heartbeats")
    assert Heartbeat.decode(local.key, local.value).source_alias == "A"

    on_b = MirrorClient.for_cluster(config, "B")
    assert on_b.heartbeat_topics() == {"heartbeats", "A.heartbeats"}
    assert on_b.upstream_clusters() == {"A"}
    assert on_b.replication_hops("A") == 1
    # B->A only emits heartbeats; it copies nothing, so A has no upstream.
    assert MirrorClient.for_cluster(config, "A").upstream_clusters() == set()


def test_without_the_reverse_herder_b_cannot_discover_a(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"], "B->A.emit.heartbeats.enabled = false\n")
    assert [f.name for f in config.heartbeat_flows] == ["A->B"]
    emit_heartbeats(config.heartbeat_flows)
    replicate_once(config, "A", "B", "no-reverse")
    on_b = MirrorClient.for_cluster(config, "B")
    assert on_b.heartbeat_topics() == {"heartbeats"}
    assert on_b.replication_hops("A") == -1


def test_rejected_heartbeats_fail_the_job_after_the_other_flows_emitted(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    create_topics(b.bootstrap, ("heartbeats", 1, {"cleanup.policy": "compact", "max.message.bytes": "10"}))
    config = mm2_config([a, b], ["A->B"])
    with pytest.raises(HeartbeatError) as failed:
        emit_heartbeats(config.heartbeat_flows)
    message = str(failed.value)
    assert "A->B: 1 of 1 heartbeat(s) to heartbeats on B failed" in message
    assert "MSG_SIZE_TOO_LARGE" in message
    assert "B->A" not in message
    assert len(read_all(a.bootstrap, "heartbeats")) == 1


def test_heartbeats_still_unacknowledged_at_the_end_fail_the_window_and_leave_no_producer(
    kafka_clusters, monkeypatch
) -> None:
    """A heartbeat still unacknowledged when the window has waited its time for them (here: none,
    so the one just sent is still out) is counted as failed and purged. Purged without its report
    being served, it kept the emitter, and so the producer, alive and running for good (checked
    after the test, as after every test: tests/client_leaks.py)."""
    monkeypatch.setattr(heartbeats, "FLUSH_TIMEOUT_S", 0.0)
    a, b = kafka_clusters(2)
    config = mm2_config([a, b], ["A->B"])
    with pytest.raises(HeartbeatError) as failed:
        emit_heartbeats([config.flow("A", "B")])
    assert "A->B: 1 of 1 heartbeat(s) to heartbeats on B failed: 1 heartbeat(s) not acknowledged by B" in str(
        failed.value
    )


def test_cli_emits_for_the_chosen_heartbeat_flows(kafka_clusters, tmp_path) -> None:
    a, b = kafka_clusters(2)
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b], ["A->B"], "A->B.emit.heartbeats.enabled = false\n"))
    runner = CliRunner()
    done = runner.invoke(main, ["heartbeats", str(path), "--flow", "B->A", "--for", "1"])
    assert done.exit_code == 0, done.output
    assert "B->A" in done.output
    beats = [Heartbeat.decode(r.key, r.value) for r in read_all(a.bootstrap, "heartbeats")]
    assert [(h.source_alias, h.target_alias) for h in beats] == [("B", "A"), ("B", "A")]
    off = runner.invoke(main, ["heartbeats", str(path), "--flow", "A->B"])
    assert off.exit_code == 2 and "emit.heartbeats.enabled" in off.output


def test_a_pair_whose_target_is_down_does_not_stop_the_others(kafka_clusters) -> None:
    """One heartbeat DAG serves every pair: a target that is down when the run starts fails only
    its own pair, at the end of the window, and the other pairs emit meanwhile."""
    (a,) = kafka_clusters(1)
    with socket.socket() as probe:  # a port nothing listens on: cluster B is down
        probe.bind(("127.0.0.1", 0))
        dead = SimpleNamespace(alias="B", bootstrap=f"127.0.0.1:{probe.getsockname()[1]}")
    config = mm2_config([a, dead], ["A->B"], "mirrorflow.cluster.unreachable.timeout.ms = 3000\n")
    # What the window leaves running is checked after the test, as after every test
    # (tests/client_leaks.py): a heartbeat left queued for a target that did not answer held its
    # emitter, which held the producer, and both lived (the producer running) for good.
    with pytest.raises(HeartbeatError) as failed:
        emit_heartbeats(config.heartbeat_flows, duration_s=1.0)
    message = str(failed.value)
    assert "A->B" in message and "B->A" not in message
    beats = [Heartbeat.decode(r.key, r.value) for r in read_all(a.bootstrap, "heartbeats")]
    assert {(h.source_alias, h.target_alias) for h in beats} == {("B", "A")}
    assert len(beats) == 2  # at once, then one interval (1 s) later
