"""The migration's evidence (no Kafka: a plan, a run report and a verification's checks as the
steps store them) and the final report's verdict on the run: a group moves only when every
partition it reads was copied and verified up to its committed offset, each reason for not
moving it is named, and the run is done only when no step failed and the cut-over was not
rejected."""

from __future__ import annotations

from typing import Any

from mirrorflow.airflow.migrate_approval import approval_body
from mirrorflow.airflow.migrate_steps import outcome
from mirrorflow.ops.migration_evidence import CopiedPartition, evidence_document, group_evidence
from mirrorflow.replicate.plan import PartitionSpan, Plan
from mirrorflow.replicate.report import RunReport

PARAMS = {"source": "A", "target": "B", "topics": "orders", "until": "now", "verify": True, "dry_run": False}


def plan() -> Plan:
    spans = (
        PartitionSpan("orders", 0, "A.orders", 0, 100),  # copied by this run
        PartitionSpan("orders", 1, "A.orders", 80, 80, progress=79),  # copied before, nothing left
    )
    return Plan("run-1", "A", "B", "migrate", 1_795_680_000_000, 1000, 1 << 20, "exactly-once", 2, spans)


def report(progress: int = 99) -> RunReport:
    unit = {
        "topic": "orders",
        "partition": 0,
        "remote_topic": "A.orders",
        "progress": progress,
        "planned_end": 100,
        "records": progress + 1,
        "bytes": 10 * (progress + 1),
    }
    return RunReport("run-1", "A->B", "migrate", "exactly-once", 0, 1, units=[unit])


def check(partition: int, compare_end: int, verdict: str = "match") -> dict[str, Any]:
    return {"topic": "orders", "partition": partition, "compare_end": compare_end, "verdict": verdict}


def row(group: str, topic: str, partition: int, committed: int, status: str = "exact") -> dict[str, Any]:
    return {
        "group": group,
        "topic": f"A.{topic}",
        "source_topic": topic,
        "partition": partition,
        "source_offset": committed,
        "target_offset": None if status == "untranslated" else committed,
        "status": status,
        "note": "no offset-sync at or before it" if status == "untranslated" else "",
    }


def evidence(
    rows: list[dict[str, Any]], checks: list[dict[str, Any]] | None, **changes: Any
) -> dict[str, Any]:
    totals = {
        "source_records": 180,
        "partitions": 2,
        "matched": 180,
        "wrong_total": 0,
        "explained_total": 0,
        "pending": 0,
    }
    verification = None if checks is None else {"verdict": "verified", "totals": totals}
    values: dict[str, Any] = {
        "plan": plan(),
        "report": report(),
        "lag_left": 30,
        "verification": verification,
        "checks": checks,
        "rows": rows,
        "asked": {"topics": "orders", "until": "now", "until_ms": None},
    }
    values.update(changes)
    return evidence_document(**values)


def test_a_group_moves_only_when_every_partition_it_reads_is_copied_and_verified_up_to_its_offset() -> None:
    rows = [
        row("shop", "orders", 0, 40),
        row("shop", "orders", 1, 70),
        row("billing", "billing-events", 0, 30, status="untranslated"),
        row("late", "orders", 0, 100),
        row("ahead", "orders", 1, 95),
    ]
    found = evidence(rows, [check(0, 100), check(1, 80)])
    assert found["movable"] == ["late", "shop"]
    assert found["blocked"] == {
        "ahead": "orders-1: the group has read up to offset 95, the copy reaches 80",
        "billing": "reads billing-events, not among this migration's topics (orders): not copied by it",
    }
    # What "Copy up to" resolved to, per partition, and the figures: this run copied orders-0,
    # orders-1 was copied before; nothing up to the ends is missing; 30 offsets past them.
    assert [(e["partition"], e["end"], e["copied_to"], e["verified_to"]) for e in found["ends"]] == [
        (0, 100, 100, 100),
        (1, 80, 80, 80),
    ]
    assert found["copy"] == {
        "topics": 1,
        "partitions": 2,
        "records": 100,
        "planned_offsets": 0,
        "missing": 0,
        "beyond_ends": 30,
        "failed_partitions": 0,
    }


def test_a_partition_not_verified_up_to_the_committed_offset_blocks_its_group() -> None:
    rows = [row("shop", "orders", 0, 40), row("shop", "orders", 1, 70)]
    mismatched = evidence(rows, [check(0, 100), check(1, 80, verdict="mismatch")])
    assert mismatched["blocked"] == {"shop": "orders-1: not verified up to offset 70 (mismatch)"}
    short = evidence(rows, [check(0, 30), check(1, 80)])
    assert short["blocked"] == {"shop": "orders-0: not verified up to offset 40 (match)"}
    # Verification turned off in the form: copied is what counts, and the approval says so.
    unverified = evidence(rows, None)
    assert unverified["movable"] == ["shop"]
    body = approval_body(unverified, {**PARAMS, "verify": False}, "shop")
    assert "**Verification**: **not run** (turned off in the form): what was copied is not proven." in body


def test_a_copy_that_stopped_short_blocks_the_groups_reading_past_it() -> None:
    found = evidence([row("shop", "orders", 0, 40)], None, report=report(progress=19))
    assert found["copy"]["missing"] == 80
    assert found["blocked"] == {"shop": "orders-0: the group has read up to offset 40, the copy reaches 20"}


def test_an_untranslated_offset_blocks_its_group() -> None:
    (group,) = group_evidence(
        [row("shop", "orders", 0, 40, status="untranslated")],
        {("orders", 0): CopiedPartition("orders", 0, 100, 100)},
        topics_regex="orders",
        verified=False,
    )
    assert group.blocked == ["orders-0: its offset does not translate (no offset-sync at or before it)"]


def test_the_approval_names_what_was_asked_copied_and_blocked() -> None:
    found = evidence(
        [row("shop", "orders", 0, 40), row("billing", "billing-events", 0, 30)], [check(0, 100), check(1, 80)]
    )
    body = approval_body(found, PARAMS, "shop|billing")
    assert "**Asked**: topics `orders` (regex, full match), copy up to **now**" in body
    assert "2026-11-26 08:00:00 UTC" in body  # when the plan fixed the ends
    assert "| orders | 0 | 100 | 100 | 100 (match) |" in body
    assert "this run copied **100** record(s); **0** offset(s) up to the ends are not on the target" in body
    assert "the source holds 30 more offset(s) past the ends, which this migration does not copy" in body
    assert "- **shop** (orders): moves." in body
    assert "- **billing** (billing-events): **BLOCKED**, stays where it is" in body
    asked = evidence(
        [], None, asked={"topics": "orders", "until": "2026-11-21T17:00:00Z", "until_ms": 1_795_280_400_000}
    )
    assert "copy up to `2026-11-21T17:00:00Z` = **2026-11-21 17:00:00 UTC**" in approval_body(
        asked, PARAMS, ""
    )


def _xcom(values: dict[str, Any]) -> Any:
    return lambda task: values.get(task)


def test_the_run_is_done_only_without_a_failed_step_or_a_rejection() -> None:
    form_refused = outcome(
        "r",
        PARAMS,
        {"check": "failed", "plan": "skipped", "final_report": "running"},
        {"check": "The trigger form needs changes: Topics (regex, full match): 'x' matches no topic."},
        _xcom({}),
    )
    assert not form_refused["done"]
    assert form_refused["outcome"] == (
        "The migration did not start: the trigger form needs changes: Topics (regex, full match): 'x' matches "
        "no topic."
    )
    assert form_refused["failed_steps"] == ["check"] and form_refused["not_run"] == ["plan"]

    copied = {"check": {"until_ms": None, "warnings": []}, "report": {"totals": {"records": 7}}}
    stopped = outcome(
        "r",
        PARAMS,
        {
            "check": "success",
            "plan": "success",
            "copy": "failed",
            "report": "upstream_failed",
            "verify_plan": "upstream_failed",
        },
        {"copy": "spark-submit exited with code 1; the job's last errors: orders-0: boom"},
        _xcom(copied),
    )
    assert stopped["outcome"] == (
        "The migration stopped at copy: spark-submit exited with code 1; the job's last errors: orders-0: boom. "
        "Not run after it: report, verify_plan."
    )

    states = {"check": "success", "approve": "success", "cutover": "skipped"}
    rejected = outcome("r", {**PARAMS, "groups": "shop"}, states, {}, _xcom(copied))
    assert not rejected["done"] and rejected["approval"] == "rejected"
    assert (
        rejected["outcome"]
        == "The cut-over was rejected: no consumer group was moved; what was copied (7 record(s)) stays on B."
    )

    moved = {
        **copied,
        "cutover": {"committed": ["shop"], "dry_run": False},
        "verify_report": {"verdict": "verified"},
    }
    done = outcome(
        "r", {**PARAMS, "groups": "shop"}, {"check": "success", "cutover": "success"}, {}, _xcom(moved)
    )
    assert done["done"] and done["groups_moved"] == ["shop"] and done["run_id"] == "r"
    assert (
        done["outcome"]
        == "The migration is done: 7 record(s) copied, verification verified; groups moved: shop."
    )
