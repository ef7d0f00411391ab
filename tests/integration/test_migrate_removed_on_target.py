"""Copies the target removed (issue 36), in a migration: records whose copies the target's
retention or a DeleteRecords removed make the migration's verification incomplete when a group to
move has not read them or the migration itself copied them, and the cut-over leaves a group that
would skip them where it is, also when they were removed after the verification or the approval.
Those below every group's offset and before what the migration copied are counted in the approval.

The migration's steps run as the `mirrorflow_migrate` tasks call them (migrate_steps), without
Airflow: plan, copy and report, the verification's plan, compare (local workers) and report, the
preview and the cut-over, on uniquely named topics and groups of the shared clusters.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.airflow.migrate_steps import cutover_step, preview_step, verify_plan_step
from mirrorflow.airflow.verify import report_step
from mirrorflow.clients import FlowClients
from mirrorflow.config import load_config
from mirrorflow.ops.verification import service as verify_service
from mirrorflow.ops.verification.plan import read_plan
from mirrorflow.ops.verification.report import VerifyReport, store_report
from mirrorflow.ops.verification.run import compare_job_for, verify_locally
from mirrorflow.replicate import run_reading, runner
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.service import plan_run, report_run

from .kafkatools import create_topics, produce
from .mirror_setup import mm2_config, mm2_text, replicate_once
from .test_failover_helpers import commit_at, committed
from .test_verify_removed_on_target import copy_of, numbered, remove_on_target


class Migration:
    """The `mirrorflow_migrate` steps of one run, called as its tasks call them; `xcom` answers
    each step's return value as Airflow's XCom does."""

    def __init__(self, path: Path, topic: str, groups: str | None, *, verify: bool, run_id: str) -> None:
        self.path, self.run_id = str(path), run_id
        self.config = load_config(self.path)
        self.params = {
            "source": "A",
            "target": "B",
            "topics": topic,
            "until": "now",
            "groups": groups,
            "verify": verify,
            "approval": True,
            "dry_run": False,
            "delivery": "exactly-once",
        }
        self.results: dict[str, Any] = {"check": {"until_ms": None, "warnings": []}}

    def xcom(self, task_id: str) -> Any:
        return self.results.get(task_id)

    def copy(self) -> None:
        flow = self.config.flow("A", "B")
        clients = FlowClients.resolve(flow)
        planned = plan_run(
            self.config, "A", "B", run_id=self.run_id, mode="migrate", topics=self.params["topics"]
        )
        plan = Plan.from_json(run_reading.read_run_record(clients.target_consumer, planned["plan_offset"])[3])
        started = int(time.time() * 1000)
        results = runner.run_locally(runner.copy_job_for(flow, clients, plan), plan)
        runner.store_report(clients, plan, results, started)
        assert all(r.ok for r in results), [r.error for r in results if not r.ok]
        self.results["plan"] = planned
        self.results["report"] = report_run(
            self.config, "A", "B", run_id=self.run_id, plan_offset=planned["plan_offset"]
        )

    def verify(self) -> dict[str, Any]:
        """verify_plan, verify (local workers instead of Spark) and verify_report, which fails
        on any verdict short of verified: the summary it stored is returned either way."""
        planned = verify_plan_step(self.path, self.params, self.run_id, self.results["plan"])
        self.results["verify_plan"] = planned
        flow = self.config.flow("A", "B")
        clients = FlowClients.resolve(flow)
        plan = read_plan(clients, planned["plan_offset"], flow.name)
        started = int(time.time() * 1000)
        checks = verify_locally(compare_job_for(flow, clients, plan), plan)
        store_report(clients, VerifyReport.build(plan, checks, started))
        try:
            self.results["verify_report"] = report_step(
                self.path, "A", "B", self.run_id, planned["plan_offset"]
            )
        except AirflowFailException as exc:
            self.results["verify_report_failed"] = str(exc)
        return verify_service.report(
            self.config, "A", "B", run_id=self.run_id, plan_offset=planned["plan_offset"]
        )

    def preview(self) -> dict[str, Any]:
        self.results["preview"] = preview_step(self.path, self.params, self.run_id, self.xcom)
        return self.results["preview"]

    def cutover(self) -> dict[str, Any]:
        return cutover_step(self.path, self.params, self.run_id, self.xcom)


def migration(shared_clusters, tmp_path: Path, topic: str, groups: str | None, *, verify: bool, run_id: str):
    a, b, _ = shared_clusters
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b], ["A->B"]))
    return Migration(path, topic, groups, verify=verify, run_id=run_id)


def test_a_migration_whose_copies_a_group_needs_were_removed_is_incomplete_and_moves_no_group(
    shared_clusters, unique, tmp_path
) -> None:
    a, b, _ = shared_clusters
    topic, group = unique("rm-mig"), unique("shop")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, numbered(100))
    # Copied before, by the flow: the migration copies offsets 100 to 199 only.
    replicate_once(mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\n"), "A", "B", unique("copy"))
    produce(a.bootstrap, topic, numbered(100, start=100))
    commit_at(a.bootstrap, group, {(topic, 0): 40})
    run = migration(shared_clusters, tmp_path, topic, group, verify=True, run_id=unique("migrate"))
    run.copy()
    remove_on_target(b, f"A.{topic}", 70)

    summary = run.verify()

    assert summary["verdict"] == "incomplete", summary
    assert summary["totals"]["explained"]["removed_from_target"] == 40
    (row,) = summary["removed"]
    assert (row["from"], row["to"], row["needed_by"]) == (40, 70, f"group {group}")
    # verify_report fails with the range: the workflow stops there, before any group moves.
    assert "verify_report" not in run.results
    assert (
        f"{topic}-0 source offsets 40 to 69 (30 record(s), group {group} has read only up to 40)"
        in (run.results["verify_report_failed"])
    )


def test_a_copy_only_migration_whose_own_copies_were_removed_is_incomplete(
    shared_clusters, unique, tmp_path
) -> None:
    a, b, _ = shared_clusters
    topic = unique("rm-copy-only")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, numbered(100))
    replicate_once(mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\n"), "A", "B", unique("copy"))
    produce(a.bootstrap, topic, numbered(100, start=100))
    run = migration(shared_clusters, tmp_path, topic, None, verify=True, run_id=unique("migrate"))
    run.copy()
    remove_on_target(b, f"A.{topic}", 130)

    summary = run.verify()

    # Offsets 0 to 99 were copied before this migration and no group needs them: explained.
    # From 100 on, this migration copied them: its copy is not on the target any more.
    assert summary["verdict"] == "incomplete", summary
    assert summary["totals"]["explained"]["removed_from_target"] == 100
    (row,) = summary["removed"]
    assert (row["from"], row["to"], row["needed_by"], row["needed_from"]) == (100, 130, "migration", 100)
    assert "(30 record(s), this migration copied them from offset 100)" in run.results["verify_report_failed"]


def test_a_migration_shows_copies_removed_below_every_group_and_moves_the_groups(
    shared_clusters, unique, tmp_path
) -> None:
    a, b, _ = shared_clusters
    topic, group = unique("rm-mig-ok"), unique("shop")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, numbered(100))
    replicate_once(mm2_config([a, b], ["A->B"], f"A->B.topics = {topic}\n"), "A", "B", unique("copy"))
    produce(a.bootstrap, topic, numbered(100, start=100))
    commit_at(a.bootstrap, group, {(topic, 0): 150})
    run = migration(shared_clusters, tmp_path, topic, group, verify=True, run_id=unique("migrate"))
    run.copy()
    remove_on_target(b, f"A.{topic}", 60)

    summary = run.verify()
    preview = run.preview()
    moved = run.cutover()

    assert summary["verdict"] == "verified", summary
    assert summary["totals"]["explained"]["removed_from_target"] == 60
    assert "Of the explained, **60** record(s) are no longer on the target" in preview["body"]
    assert preview["evidence"]["movable"] == [group] and moved["committed"] == [group]
    remote = (f"A.{topic}", 0)
    assert committed(b.bootstrap, group, [remote]) == {remote: copy_of(b, remote[0], 150)}


def test_the_cut_over_blocks_a_group_whose_unread_copies_were_removed_since_the_approval(
    shared_clusters, unique, tmp_path
) -> None:
    """The target's retention keeps running between the verification, the approval and the
    cut-over: the evidence asks the clusters again, and a group that would skip records whose
    copies are gone is not moved; the others are."""
    a, b, _ = shared_clusters
    topic, behind, ahead = unique("rm-race"), unique("behind"), unique("ahead")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, numbered(200))
    commit_at(a.bootstrap, behind, {(topic, 0): 100})
    commit_at(a.bootstrap, ahead, {(topic, 0): 180})
    run = migration(
        shared_clusters, tmp_path, topic, f"{behind}|{ahead}", verify=False, run_id=unique("migrate")
    )
    run.copy()
    assert sorted(run.preview()["evidence"]["movable"]) == sorted([behind, ahead])
    remove_on_target(b, f"A.{topic}", 150)

    with pytest.raises(AirflowFailException) as stopped:
        run.cutover()

    message = str(stopped.value)
    assert (
        f"{behind} was not moved: {topic}-0: the target no longer holds the copies of source offsets 100 to 149"
        in (message)
    )
    remote = (f"A.{topic}", 0)
    assert committed(b.bootstrap, behind, [remote]) == {}
    assert committed(b.bootstrap, ahead, [remote]) == {remote: copy_of(b, remote[0], 180)}
    # A preview now does not offer it at all.
    again = run.preview()["evidence"]
    assert again["movable"] == [ahead] and "which the group has not read" in again["blocked"][behind]
