"""Every record that fits the source fits the target (issue: big records).

A copied record carries mirrorflow's provenance header on top of the source's bytes, so a record
at the source topic's max.message.bytes would not fit a remote topic with the same limit. Remote
topics are created (and their configs synced) with the source's limit plus RECORD_HEADROOM, the
copy producer never refuses locally what the target broker accepts, and a record that the
target still refuses fails its partition at once, naming its offset and the setting to change.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from mirrorflow.clients import FlowClients
from mirrorflow.control.topic_sync import run_sync_topic_configs
from mirrorflow.policy.provenance import RECORD_HEADROOM
from mirrorflow.replicate import run_reading, runner, service
from mirrorflow.replicate.plan import Plan

from .kafkatools import create_topics, produce, read_all
from .test_replicate_scenarios import mirror_config, run_once

KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1048588  # the broker's message.max.bytes default
BIG_PRODUCER = {"message.max.bytes": 50_000_000}


def topic_config(bootstrap: str, topic: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(30)[name].value


def test_a_record_at_the_sources_limit_is_copied_with_its_provenance(shared_clusters, unique) -> None:
    """1,048,510 bytes of value fit a source topic with Kafka's default limits; with the
    provenance header added the record no longer fits a remote topic with the same limit."""
    a, b, _ = shared_clusters
    topic, wide = unique("big"), unique("wide")
    create_topics(a.bootstrap, (topic, 1), (wide, 1, {"max.message.bytes": str(3 << 20)}))
    at_limit = os.urandom(1_048_510)
    produce(
        a.bootstrap,
        topic,
        [{"value": b"small-0"}, {"value": at_limit}, {"key": b"k", "value": b"small-2"}],
        **BIG_PRODUCER,
    )
    produce(a.bootstrap, wide, [{"value": os.urandom(3_000_000)}, {"value": b"after"}], **BIG_PRODUCER)
    config = mirror_config([a, b], ["A->B"], {"topics": f"{topic}|{wide}"})

    run = run_once(config, "A", "B")

    assert run.records == 5
    for name in (topic, wide):
        source = [r.content() for r in read_all(a.bootstrap, name)]
        assert [r.content() for r in read_all(b.bootstrap, f"A.{name}")] == source
    assert int(topic_config(b.bootstrap, f"A.{topic}", "max.message.bytes")) == (
        KAFKA_DEFAULT_MAX_MESSAGE_BYTES + RECORD_HEADROOM
    )
    assert int(topic_config(b.bootstrap, f"A.{wide}", "max.message.bytes")) == (3 << 20) + RECORD_HEADROOM

    # Topic config sync keeps the headroom: MM2's rule alone would set the source's value (or
    # delete the override and fall back to the target broker's default).
    synced = run_sync_topic_configs(config.flow("A", "B"))
    assert not synced["errors"]
    assert int(topic_config(b.bootstrap, f"A.{wide}", "max.message.bytes")) == (3 << 20) + RECORD_HEADROOM
    assert int(topic_config(b.bootstrap, f"A.{topic}", "max.message.bytes")) == (
        KAFKA_DEFAULT_MAX_MESSAGE_BYTES + RECORD_HEADROOM
    )


@pytest.mark.parametrize("delivery", ["exactly-once", "at-least-once"])
def test_a_record_the_target_refuses_fails_its_partition_at_once_by_offset_and_setting(
    shared_clusters, unique, delivery
) -> None:
    """A remote topic that someone created with a smaller limit: the records before the big one
    are copied, the partition fails in seconds (not after message.timeout.ms) with the offset
    and the setting to change, and once the limit is raised the next run copies the rest."""
    a, b, _ = shared_clusters
    topic = unique("refused")
    remote = f"A.{topic}"
    create_topics(a.bootstrap, (topic, 1))
    create_topics(b.bootstrap, (remote, 1, {"max.message.bytes": "100000"}))
    produce(
        a.bootstrap,
        topic,
        [
            {"value": b"r-0"},
            {"value": b"r-1"},
            {"value": b"r-2"},
            {"value": os.urandom(200_000)},
            {"value": b"r-4"},
        ],
        **BIG_PRODUCER,
    )
    config = mirror_config([a, b], ["A->B"], {"topics": topic, "mirrorflow.delivery": delivery})
    flow = config.flow("A", "B")
    clients = FlowClients.resolve(flow)
    planned = service.plan_run(config, "A", "B", run_id=f"test__{uuid.uuid4().hex[:12]}")
    plan = Plan.from_json(run_reading.read_run_record(clients.target_consumer, planned["plan_offset"])[3])

    started = time.monotonic()
    (result,) = runner.run_locally(runner.copy_job_for(flow, clients, plan), plan)
    elapsed = time.monotonic() - started

    assert not result.ok
    assert result.progress == 2, "the records before the refused one are copied"
    assert "offset 3" in result.error and "200,0" in result.error
    assert "max.message.bytes" in result.error and remote in result.error
    assert result.attempts == 1, "a refused record is not retried"
    assert elapsed < 60, f"the partition failed only after {elapsed:.0f} s"

    # At-least-once copied the records before it one at a time while looking for it, and again
    # in the attempt that stops before it: duplicates, as a failed at-least-once chunk leaves.
    copied = [r.value for r in read_all(b.bootstrap, remote)]
    if delivery == "exactly-once":
        assert copied == [b"r-0", b"r-1", b"r-2"]
    else:
        assert set(copied) == {b"r-0", b"r-1", b"r-2"} and copied[:3] == [b"r-0", b"r-1", b"r-2"]

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    entry = ConfigEntry("max.message.bytes", "1000000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, remote, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)
    run_once(config, "A", "B")
    source = [r.content() for r in read_all(a.bootstrap, topic)]
    assert [r.content() for r in read_all(b.bootstrap, remote)][-2:] == source[-2:]
    if delivery == "exactly-once":
        assert [r.content() for r in read_all(b.bootstrap, remote)] == source
