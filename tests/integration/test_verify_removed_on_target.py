"""Copies the target removed (issue 36): a verification does not explain away records whose
copies the target's retention or a DeleteRecords removed while a group to move has not read them;
those below every group's committed offset stay explained, and are counted on the status.

Each test copies a uniquely named topic between the shared clusters, commits the groups' offsets
on the source and removes copies on the target with DeleteRecords, as the target's retention or an
operator would. The flow's `groups` filter names the groups a failover of it would move.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from rich.console import Console

from mirrorflow.airflow.status_app import TOKEN_ENV
from mirrorflow.commands.verify import print_summary
from mirrorflow.config import MirrorConfig
from mirrorflow.control.mirror_status import mirror_status
from mirrorflow.control.status_copy import verification_health
from mirrorflow.ops.verification import service as verify_service
from mirrorflow.ops.verification.report import verdict_problem
from mirrorflow.policy.provenance import read_provenance

from .kafkatools import create_topics, produce, read_all
from .mirror_setup import mm2_config, replicate_once
from .test_failover_helpers import commit_at


def copy_of(cluster: Any, topic: str, source_offset: int) -> int:
    """The target offset of the copy of `source_offset` in `topic`-0, found by its provenance
    (an exactly-once copy's commit markers take offsets too)."""
    copies = read_all(cluster.bootstrap, topic)
    return next(r.offset for r in copies if read_provenance(list(r.headers)).source_offset >= source_offset)


def remove_on_target(cluster: Any, topic: str, before: int) -> None:
    """DeleteRecords on the target: every copy in `topic`-0 of a source offset below `before`."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, copy_of(cluster, topic, before))]).values():
        future.result(30)


def numbered(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(start, start + count)]


def copied_then_removed(
    a: Any, b: Any, run_id: str, topic: str, groups: dict[str, int], removed_below: int
) -> MirrorConfig:
    """200 records of `topic`-0 copied A->B by a flow whose `groups` filter names `groups`, each
    group committed on A at its offset, then the copies of source offsets below `removed_below`
    removed on B; the flow's config."""
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, numbered(200))
    config = mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\nA->B.groups = {'|'.join(groups)}\n")
    replicate_once(config, "A", "B", run_id)
    for group, offset in groups.items():
        commit_at(a.bootstrap, group, {(topic, 0): offset})
    remove_on_target(b, f"A.{topic}", removed_below)
    return config


def test_copies_removed_above_a_groups_offset_make_the_verification_incomplete_naming_the_range(
    shared_clusters, unique
) -> None:
    a, b, _ = shared_clusters
    topic, group = unique("rm-above"), unique("shop")
    config = copied_then_removed(a, b, unique("copy"), topic, {group: 100}, 150)

    summary = verify_service.run_locally(config, "A", "B", run_id=unique("verify"), topics=topic)

    totals = summary["totals"]
    assert summary["verdict"] == "incomplete", summary
    assert totals["wrong_total"] == 0 and totals["pending"] == 0 and totals["matched"] == 50
    # Below the group's offset the removed copies are explained; from it on they are not.
    assert totals["explained"]["removed_from_target"] == 100
    assert (totals["removed_needed"], totals["removed_partitions"]) == (50, 1)
    (row,) = summary["removed"]
    assert (row["topic"], row["partition"], row["from"], row["to"], row["records"]) == (
        topic,
        0,
        100,
        150,
        50,
    )
    assert (row["needed_by"], row["needed_from"]) == (f"group {group}", 100)
    problem = verdict_problem(summary)
    assert problem is not None
    assert (
        f"{topic}-0 source offsets 100 to 149 (50 record(s), group {group} has read only up to 100)"
        in problem
    )
    assert "would skip them" in problem
    # The command line's table output names the range too (its JSON always did).
    console = Console(record=True, width=200)
    print_summary(console, summary)
    printed = console.export_text()
    assert (
        f"{topic}-0: 50 copied record(s) removed on the target, source offsets 100 to 149, still needed "
        f"from offset 100 by group {group}"
    ) in printed, printed
    assert "INCOMPLETE" in printed
    # The status shows the verdict, and both counts under the verification's badge.
    flow = mirror_status(config, clusters=["B"]).flow("A->B")
    shown = flow.last_verification
    assert (shown["verdict"], shown["removed_from_target"], shown["removed_needed"]) == (
        "incomplete",
        100,
        50,
    )
    assert verification_health(flow).cause == (
        "50 equal, 50 removed from the target though still needed, "
        "100 removed from the target below every group's position"
    )


def test_copies_removed_below_every_groups_offset_stay_explained_and_are_counted(
    shared_clusters, unique, status_app, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, _ = shared_clusters
    topic, early, late = unique("rm-below"), unique("early"), unique("late")
    config = copied_then_removed(a, b, unique("copy"), topic, {early: 60, late: 190}, 60)

    summary = verify_service.run_locally(config, "A", "B", run_id=unique("verify"), topics=topic)

    totals = summary["totals"]
    assert summary["verdict"] == "verified", summary
    assert totals["explained"]["removed_from_target"] == 60 and totals["matched"] == 140
    assert totals["removed_needed"] == 0 and summary["removed"] == []
    shown = mirror_status(config, clusters=["B"]).flow("A->B").last_verification
    assert (shown["verdict"], shown["removed_from_target"], shown["removed_needed"]) == ("verified", 60, 0)
    # The status page says it where it says "140 equal, 0 wrong, 0 not copied yet".
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    page = status_app(config).get("/ui").text
    history = page[page.index("Migrations and verifications, the newest first") :]
    assert "0 not copied yet, 60 removed from the target below every group&#x27;s position" in history
