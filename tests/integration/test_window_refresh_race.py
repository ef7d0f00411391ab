"""A micro-batch window whose refreshed plan raced a commit (issue 34, item 6).

A source topic is deleted and created again while a window copies it. The window's refresh plans
the new topic from the progress it reads; if the window commits more of the old topic after that
read, the copy of the refreshed span meets progress the plan did not see and refuses it as stale
(copy/resume.py), rightly: the plan was made from a view that no longer holds. The partition used
to keep that stale plan, failing every retry the same way, until the window ended: later refreshes
restarted a partition only when its topic incarnation changed, and this one had not. It is now
restarted by the next refresh that sees it otherwise.

The copies, the topic recreation and the progress are real (brokers, clients); the window's task
is driven batch by batch through its own refresh and partition state.
"""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient

from mirrorflow.kafka import topic_ids
from mirrorflow.replicate.copy import copy_unit
from mirrorflow.replicate.plan import PartitionSpan, Plan
from mirrorflow.replicate.window.settings import WindowSettings
from mirrorflow.replicate.window.share import Assignment
from mirrorflow.replicate.window.task import WindowTask

from .kafkatools import create_topics, produce, read_all
from .test_copy import make_job
from .test_topic_identity import recreate

RECREATED = "the source topic was deleted and created again"


def ids(bootstrap: str, topic: str) -> str:
    return topic_ids(AdminClient({"bootstrap.servers": bootstrap}), [topic])[topic]


def test_a_partition_whose_refreshed_plan_went_stale_is_restarted_by_the_next_refresh(clusters) -> None:
    src, dst = clusters
    create_topics(src.bootstrap, ("orders", 1))
    create_topics(dst.bootstrap, ("A.orders", 1))
    produce(src.bootstrap, "orders", [{"key": b"k%d" % i, "value": b"old%d" % i} for i in range(10)])
    remote = ids(dst.bootstrap, "A.orders")
    old = f"{ids(src.bootstrap, 'orders')},{remote}"
    job = make_job(src, dst)
    assert copy_unit(job, PartitionSpan("orders", 0, "A.orders", 0, 4, incarnation=old)).ok
    # The refresh reads progress 3 of the old topic; then the window commits up to 9 of it, and the
    # topic is deleted and created again: the refresh's plan of the new one saw progress 3.
    assert copy_unit(
        job,
        PartitionSpan("orders", 0, "A.orders", 4, 10, progress=3, incarnation=old, progress_incarnation=old),
    ).ok
    recreate(src.bootstrap, "orders")
    produce(src.bootstrap, "orders", [{"key": b"k%d" % i, "value": b"new%d" % i} for i in range(5)])
    new = f"{ids(src.bootstrap, 'orders')},{remote}"
    raced = PartitionSpan(
        "orders",
        0,
        "A.orders",
        0,
        5,
        progress=3,
        incarnation=new,
        progress_incarnation=old,
        restarted=RECREATED,
    )
    settings = WindowSettings(int(time.time() * 1000) + 600_000, 0.25, 0.0, 1.0, 1000)
    task = WindowTask(job, settings, Assignment("A->B", "window", 0, 0, 1, (raced,)))
    state = task.parts[("orders", 0)]

    span = state.next_span(5, 1000, always=False)
    stale = copy_unit(job, span)
    state.fold(span, stale, fenced=False, interval_s=settings.interval_s)

    assert not stale.ok and stale.stale, stale.error
    # The next refresh sees progress as it is now.
    seen = PartitionSpan(
        "orders",
        0,
        "A.orders",
        0,
        5,
        progress=9,
        incarnation=new,
        progress_incarnation=old,
        restarted=RECREATED,
    )
    task._refresh(Plan("window", "A", "B", "replicate", 0, 1000, 1 << 20, "exactly-once", 1, (seen,)))
    assert state.base == seen, "the partition kept its stale plan"

    span = state.next_span(5, 1000, always=False)
    copied = copy_unit(job, span)
    state.fold(span, copied, fenced=False, interval_s=settings.interval_s)

    assert copied.ok and copied.records == 5, copied.error
    assert not state.stale
    assert [r.value for r in read_all(dst.bootstrap, "A.orders")] == [
        *(b"old%d" % i for i in range(10)),
        *(b"new%d" % i for i in range(5)),
    ]
