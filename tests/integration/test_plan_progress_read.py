"""A plan hands its settled read of the flow's progress to the copy tasks (Plan.progress_read,
CopyJob.progress_start): a task's progress reader starts where the plan's read ended and reads
only what was written since, instead of the progress topic's whole history, which on a busy
flow grows through the day until a segment rolls and is compacted."""

from __future__ import annotations

import logging
import uuid

from confluent_kafka.admin import AdminClient

from mirrorflow.clients import FlowClients
from mirrorflow.kafka import topic_ids
from mirrorflow.replicate import planner, run_reading, runner, service
from mirrorflow.replicate.copy import SharedClients
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.progress import ProgressReader, read_progress_entries

from .kafkatools import create_topics, produce, read_topic
from .test_replicate_scenarios import mirror_config, run_once

PARTITIONS = 8


def test_a_plan_hands_its_read_of_progress_to_the_tasks_which_read_only_what_came_after(
    shared_clusters, unique
) -> None:
    a, b, _ = shared_clusters
    topic, progress_topic = unique("handed"), unique("progress")
    create_topics(a.bootstrap, (topic, PARTITIONS))
    config = mirror_config(
        [a, b], ["A->B"], {"topics": topic, "B.offset.storage.topic": progress_topic, "tasks.max": "1"}
    )

    def records(first: int) -> list[dict]:
        return [{"value": b"%d" % (first + i), "partition": i % PARTITIONS} for i in range(40)]

    for first in (0, 40):  # two runs: progress holds a history of records per partition
        produce(a.bootstrap, topic, records(first))
        run_once(config, "A", "B")
    produce(a.bootstrap, topic, records(80))

    flow = config.flow("A", "B")
    planned = service.plan_run(config, "A", "B", run_id=f"test__{uuid.uuid4().hex[:12]}")
    clients = FlowClients.resolve(flow)
    plan = Plan.from_json(run_reading.read_run_record(clients.target_consumer, planned["plan_offset"])[3])
    read = plan.progress_read
    assert read is not None and read.topic == progress_topic
    assert (
        read.topic_id
        == topic_ids(AdminClient({"bootstrap.servers": b.bootstrap}), [progress_topic])[progress_topic]
    )
    assert read.stored() == read_progress_entries(clients.target_consumer, progress_topic, "A")
    assert len(read.stored()) == PARTITIONS

    job = runner.copy_job_for(flow, clients, plan)
    with SharedClients(job) as shared:
        shared.progress.settle()
        assert shared.progress.records_read == 0, "the task read the progress history the plan had read"
        assert shared.progress.entries() == read.stored()
    results = runner.copy_slice(job, plan.slices()[0])
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    copied = read_topic(b.bootstrap, f"A.{topic}", PARTITIONS)
    values = sorted(int(r.value) for rows in copied.values() for r in rows)
    assert values == list(range(120)), "a record was lost or copied twice"
    after = read_progress_entries(clients.target_consumer, progress_topic, "A")
    assert {where: stored.offset for where, stored in after.items()} == {
        (topic, p): 14 for p in range(PARTITIONS)
    }


def test_a_plan_reads_progress_on_from_the_previous_plans_read(
    shared_clusters, unique, monkeypatch, caplog
) -> None:
    """A run's plan reads the flow's progress on from where the flow's newest plan read it (its
    progress_read, in the run-records topic), not from the topic's start: a scheduled flow's
    progress grows through the day until a segment rolls and is compacted. What it finds is
    what a read from the start finds."""
    a, b, _ = shared_clusters
    topic, progress_topic = unique("onward"), unique("progress")
    create_topics(a.bootstrap, (topic, PARTITIONS))
    config = mirror_config(
        [a, b], ["A->B"], {"topics": topic, "B.offset.storage.topic": progress_topic, "tasks.max": "1"}
    )
    first = None
    for n in range(3):  # three runs: progress holds a history of records per partition
        produce(
            a.bootstrap,
            topic,
            [{"value": b"%d" % (n * 40 + i), "partition": i % PARTITIONS} for i in range(40)],
        )
        last = run_once(config, "A", "B")
        first = first or last
    produce(a.bootstrap, topic, [{"value": b"x", "partition": 0}])

    readers: list[ProgressReader] = []

    class Counted(ProgressReader):
        def __exit__(self, *exc: object) -> None:
            readers.append(self)
            super().__exit__(*exc)

    monkeypatch.setattr(planner, "ProgressReader", Counted)
    caplog.clear()  # the runs' own plans said it too, where the worker logs INFO already
    with caplog.at_level(logging.INFO, logger="mirrorflow.replicate.service"):
        planned = service.plan_run(config, "A", "B", run_id=f"test__{uuid.uuid4().hex[:12]}")
    (said,) = [r.getMessage() for r in caplog.records if "progress read on from plan" in r.getMessage()]
    assert f"{PARTITIONS} source partition(s) found" in said and progress_topic in said
    assert last.planned["run_id"] in said and first.planned["run_id"] not in said  # the newest plan's
    (reader,) = readers
    # The last run's copy wrote one progress record per partition after its plan read.
    assert reader.records_read == PARTITIONS, reader.records_read
    clients = FlowClients.resolve(config.flow("A", "B"))
    plan = Plan.from_json(run_reading.read_run_record(clients.target_consumer, planned["plan_offset"])[3])
    assert plan.progress_read is not None
    assert plan.progress_read.stored() == read_progress_entries(clients.target_consumer, progress_topic, "A")
    assert {(s.topic, s.partition): (s.start, s.end) for s in plan.spans if s.pending} == {
        (topic, 0): (15, 16)
    }
