"""A copy working from a plan made before a topic was deleted and created again (issue 21,
defect 1): a retried copy task, a zombie or a concurrent run copies from a stored plan, however
old. Offsets cannot tell the incarnations apart (a recreated topic reuses them from 0); topic ids
can, so the stale span copies nothing and the next run copies exactly what is missing."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from mirrorflow.clients import FlowClients
from mirrorflow.kafka import topic_ids
from mirrorflow.mm2.formats import OffsetSync
from mirrorflow.replicate import runner
from mirrorflow.replicate.copy import copy_slice
from mirrorflow.replicate.offset_syncs import incarnation_of
from mirrorflow.replicate.planner import make_plan

from .kafkatools import create_topics, produce, read_all
from .test_replicate_scenarios import mirror_config, run_once
from .test_topic_identity import batch, recreate


def plan_now(config, run_id: str):
    flow = config.flow("A", "B")
    clients = FlowClients.resolve(flow)
    plan = make_plan(flow, clients, run_id=run_id).plan
    return plan, runner.copy_job_for(flow, clients, plan)


@pytest.mark.parametrize("first", ["stale", "fresh"])
def test_a_plan_made_before_the_source_topic_was_recreated_copies_nothing_of_the_new_one(
    shared_clusters, unique, first
) -> None:
    """Old topic: 1000 records copied, 1000 more planned by the stale run. New topic: 1500 records
    when the fresh run plans (from its start), 3000 by the time anything copies. Either run may
    copy first; without topic ids the stale one copied the new topic's offsets as the old one's
    (the fresh one then resumed after them: 1000 records never copied), or after the fresh one
    (the next run then copied them all again)."""
    a, b, _ = shared_clusters
    topic = unique("stale")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, batch("old", 1000))
    config = mirror_config([a, b], ["A->B"], {"topics": topic})
    assert run_once(config, "A", "B").records == 1000
    produce(a.bootstrap, topic, batch("old-late", 1000))
    stale_plan, stale_job = plan_now(config, f"stale-{first}")
    recreate(a.bootstrap, topic)
    produce(a.bootstrap, topic, batch("new", 1500))
    fresh_plan, fresh_job = plan_now(config, f"fresh-{first}")
    assert fresh_plan.restarted(), "the fresh plan starts the new topic over"
    produce(a.bootstrap, topic, [{"value": f"new-{i}".encode()} for i in range(1500, 3000)])

    copies = {"stale": (stale_job, stale_plan), "fresh": (fresh_job, fresh_plan)}
    order = [first, "fresh" if first == "stale" else "stale"]
    results = {name: copy_slice(copies[name][0], copies[name][1].units()) for name in order}

    (stale,) = results["stale"]
    assert not stale.ok and stale.records == 0
    assert f"source topic {topic} was deleted and created again after this run's plan" in stale.error
    (fresh,) = results["fresh"]
    assert fresh.ok and fresh.records == 1500, fresh.error
    assert run_once(config, "A", "B").records == 1500
    values = [r.value for r in read_all(b.bootstrap, f"A.{topic}")]
    assert values == [f"old-{i}".encode() for i in range(1000)] + [f"new-{i}".encode() for i in range(3000)]


def test_a_plan_made_before_the_remote_topic_was_recreated_writes_nothing_into_the_new_one(
    shared_clusters, unique
) -> None:
    """Copied into the new remote topic from the old one's progress, the stale span left a hole
    (the new topic lacks what came before), and the next run, rebuilding it from the source,
    copied the rest twice."""
    a, b, _ = shared_clusters
    topic = unique("remote-stale")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, batch("r", 100))
    config = mirror_config([a, b], ["A->B"], {"topics": topic})
    assert run_once(config, "A", "B").records == 100
    produce(a.bootstrap, topic, [{"value": f"r-{i}".encode()} for i in range(100, 200)])
    plan, job = plan_now(config, "remote-stale")
    recreate(b.bootstrap, f"A.{topic}")

    (stale,) = copy_slice(job, plan.units())

    assert not stale.ok and f"remote topic A.{topic} was deleted and created again" in stale.error
    assert read_all(b.bootstrap, f"A.{topic}") == []
    assert run_once(config, "A", "B").records == 200
    assert [r.value for r in read_all(b.bootstrap, f"A.{topic}")] == [f"r-{i}".encode() for i in range(200)]
    # The rebuilt topic's offset-syncs name the incarnations they map between.
    ids = f"{topic_ids(AdminClient({'bootstrap.servers': a.bootstrap}), [topic])[topic]},"
    ids += topic_ids(AdminClient({"bootstrap.servers": b.bootstrap}), [f"A.{topic}"])[f"A.{topic}"]
    syncs = [
        r
        for r in read_all(a.bootstrap, "mm2-offset-syncs.B.internal")
        if OffsetSync.decode(r.key, r.value).topic == topic
    ]
    assert incarnation_of(syncs[-1].headers) == ids
