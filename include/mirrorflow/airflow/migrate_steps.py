"""The migration's steps after the copy, as functions the `mirrorflow_migrate` tasks call: the
check of the form against the source, the verification's plan, the evidence gathered from what
the copy and the verification stored, the cut-over of the groups that evidence covers, and the
final outcome.

Each reads Kafka only through mirrorflow's own readers and hands on bounded results.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from mirrorflow.airflow.forms import COPY_UNTIL, GROUPS, TOPICS, groups_regex, migrate_form_problems
from mirrorflow.airflow.migrate_approval import approval_body
from mirrorflow.airflow.task_errors import failing_at_once, stop_the_run
from mirrorflow.config import load_config

log = logging.getLogger("mirrorflow.airflow.migrate")

XCom = Callable[[str], Any]  # task id -> its return value (None when it has none)
FINAL_STEP = "final_report"


def check_step(path: str, clusters: list[str], params: Mapping[str, Any]) -> dict[str, Any]:
    """Every field of the form read, and held against the source (request_check); fails at
    once with one sentence per problem, or returns what the run will cover and its warnings."""
    from mirrorflow.clients import FlowClients
    from mirrorflow.ops.request_check import check_request
    from mirrorflow.replicate.service import flow_for
    from mirrorflow.replicate.until import parse_until, utc_text

    with failing_at_once():
        problems = migrate_form_problems(clusters, params)
        if problems:
            stop_the_run("The trigger form needs changes: " + " ".join(problems), keep=[FINAL_STEP])
        flow = flow_for(path, params["source"], params["target"], params["topics"])
        until_ms = parse_until(params["until"])
        checked = check_request(
            flow,
            FlowClients.resolve(flow),
            topics_title=TOPICS,
            groups_regex=groups_regex(params),
            groups_title=GROUPS,
            until_ms=until_ms,
            until_title=COPY_UNTIL,
        )
        if checked.problems:
            stop_the_run("The trigger form needs changes: " + " ".join(checked.problems), keep=[FINAL_STEP])
    for warning in checked.warnings:
        log.warning("%s", warning)
    log.info(
        "the migration %s -> %s copies %d topic(s) (%s%s), %d partition(s), up to %s; groups to move: %s",
        params["source"],
        params["target"],
        checked.topics_count,
        ", ".join(checked.topics[:10]),
        " ..." if checked.topics_count > 10 else "",
        checked.partitions,
        "now" if until_ms is None else utc_text(until_ms),
        f"{checked.groups_count} ({', '.join(checked.groups[:10])})" if groups_regex(params) else "none",
    )
    return {**checked.to_dict(), "until_ms": until_ms}


def verify_plan_step(
    path: str, params: Mapping[str, Any], run_id: str, planned: Mapping[str, Any]
) -> dict[str, Any]:
    """The verification's plan, exactly up to the ends the copy's plan fixed. The copies the
    target must still hold are those of what this run copied and of every record the groups to
    move have not read; a copy the target removed there makes the verdict incomplete."""
    from airflow.sdk.exceptions import AirflowSkipException

    from mirrorflow.clients import FlowClients
    from mirrorflow.ops.verification import service as verify_service
    from mirrorflow.ops.verification.plan import VerifyError
    from mirrorflow.replicate import run_reading
    from mirrorflow.replicate.plan import Plan

    if not params["verify"]:
        raise AirflowSkipException("verification turned off in the form")
    flow = load_config(path).flow(params["source"], params["target"])
    groups = groups_regex(params)
    with failing_at_once(VerifyError):
        _, _, _, body = run_reading.read_run_record(
            FlowClients.resolve(flow).target_consumer, planned["plan_offset"]
        )
        copied = Plan.from_json(body)
        return verify_service.plan(
            path,
            params["source"],
            params["target"],
            run_id=run_id,
            topics=params["topics"],
            delivery=copied.delivery,
            ends={(s.topic, s.partition): s.end for s in copied.spans},
            groups=re.compile(groups).fullmatch if groups else _no_group,
            promised={(s.topic, s.partition): s.start for s in copied.spans if s.start < s.end},
        )


def _no_group(_group: str) -> bool:
    """A copy-only migration moves no group."""
    return False


def gather_evidence(
    path: str, params: Mapping[str, Any], run_id: str, xcom: XCom, *, with_groups: bool
) -> dict[str, Any]:
    """The evidence document (ops.migration_evidence) from the plan and the run's reports in
    the run-records topic, the verification's reports, and a failover dry run of the groups."""
    from mirrorflow.clients import FlowClients
    from mirrorflow.ops.failover import FailoverError, failover
    from mirrorflow.ops.migration_evidence import copied_partitions, evidence_document
    from mirrorflow.ops.removed_copies import skipped_records
    from mirrorflow.ops.verification.report import REPORT_KIND as VERIFY_REPORT_KIND
    from mirrorflow.ops.verification.report import VerifyReport
    from mirrorflow.replicate import run_reading
    from mirrorflow.replicate.plan import Plan
    from mirrorflow.replicate.report import RunReport

    flow = load_config(path).flow(params["source"], params["target"])
    clients = FlowClients.resolve(flow)
    consumer = clients.target_consumer
    planned, copied, verification = xcom("plan"), xcom("report"), xcom("verify_report")
    plan = Plan.from_json(run_reading.read_run_record(consumer, planned["plan_offset"])[3])
    bodies = run_reading.wait_for_run_records(
        consumer, flow.name, run_id, "report", start=planned["plan_offset"], timeout_s=10
    )
    report = RunReport.merge([RunReport.from_json(b) for b in bodies])
    checks = None
    if verification is not None:
        found = run_reading.wait_for_run_records(
            consumer,
            flow.name,
            run_id,
            VERIFY_REPORT_KIND,
            start=xcom("verify_plan")["plan_offset"],
            timeout_s=10,
        )
        checks = VerifyReport.merge([VerifyReport(**b) for b in found]).checks
    rows = skipped = None
    if with_groups:
        with failing_at_once(FailoverError):
            moves = failover(
                path,
                params["source"],
                params["target"],
                groups_regex(params) or "",
                dry_run=True,
                require_enabled=False,
            )
        rows = moves.to_dict()["rows"]
        ends = {k: p.copied_to for k, p in copied_partitions(plan, report, checks).items()}
        skipped = skipped_records(flow, clients, rows, ends)
    return evidence_document(
        plan=plan,
        report=report,
        lag_left=(copied or {}).get("totals", {}).get("lag_left"),
        verification=verification,
        checks=checks,
        rows=rows,
        asked={"topics": params["topics"], "until": params["until"], "until_ms": xcom("check")["until_ms"]},
        warnings=xcom("check")["warnings"],
        skipped=skipped,
    )


def evidence_lines(evidence: Mapping[str, Any]) -> list[str]:
    """The evidence as a task log tells it: what was copied, the verdict, each group's fate."""
    from mirrorflow.ops.verification.report import removed_from_target_text

    copy = evidence["copy"]
    verification = evidence["verification"]
    lines = [
        f"copied: {copy['partitions']:,} partition(s) of {copy['topics']:,} topic(s), {copy['records']:,} record(s) "
        f"by this run, {copy['missing']:,} offset(s) up to the ends missing on the target",
        "verification: "
        + ("not run" if verification is None else verification["verdict"])
        + ("" if verification is None else removed_from_target_text(verification["totals"])),
    ]
    for group in evidence["groups"]:
        fate = "moves" if group["movable"] else "blocked: " + "; ".join(group["blocked"])
        lines.append(f"group {group['group']} ({', '.join(group['topics'])}): {fate}")
    return lines


def preview_step(path: str, params: Mapping[str, Any], run_id: str, xcom: XCom) -> dict[str, Any]:
    """The evidence and the approval's text; fails when groups were asked for and none can move."""
    from airflow.sdk.exceptions import AirflowFailException

    groups = groups_regex(params)
    with failing_at_once():
        evidence = gather_evidence(path, params, run_id, xcom, with_groups=groups is not None)
        for line in evidence_lines(evidence):
            log.info("%s", line)
        if groups is not None and not evidence["movable"]:
            raise AirflowFailException(
                f"No group matching {groups!r} can be cut over, so none is offered: "
                + " ".join(f"{g} is blocked: {why}." for g, why in list(evidence["blocked"].items())[:10])
            )
    return {
        "body": approval_body(evidence, params, groups or ""),
        "evidence": evidence,
    }


def exact_names(groups: list[str]) -> str:
    """A regex matching exactly these group names (failover matches whole names)."""
    return "|".join(re.escape(g) for g in groups)


def cutover_step(path: str, params: Mapping[str, Any], run_id: str, xcom: XCom) -> dict[str, Any]:
    """Move the groups the approved evidence showed movable and that still are (a new dry run
    held against the same evidence: a group that read further since is blocked now), logging
    the offsets committed per group and partition; a cut-over that moved groups emits the flow's
    cut-over Asset event (the task declares the cut-over aliases)."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    from mirrorflow.airflow.assets import announce_cutover
    from mirrorflow.airflow.failover import log_failover, refused_message
    from mirrorflow.ops.failover import WOULD_COMMIT, FailoverError, failover

    if groups_regex(params) is None:
        raise AirflowSkipException("no groups to move (copy only)")
    approved = xcom("preview")["evidence"]["movable"]
    with failing_at_once(FailoverError):
        now = gather_evidence(path, params, run_id, xcom, with_groups=True)
        moving = [g for g in approved if g in now["movable"]]
        since = {g: now["blocked"][g] for g in approved if g in now["blocked"]}
        for group, why in since.items():
            log.warning("group %s is blocked since the approval and stays where it is: %s", group, why)
        if not moving:
            raise AirflowFailException(
                "No approved group can be cut over any more: "
                + " ".join(f"{g} is blocked: {why}." for g, why in since.items())
            )
        result = failover(
            path,
            params["source"],
            params["target"],
            exact_names(moving),
            dry_run=bool(params["dry_run"]),
            require_enabled=False,
        )
        log_failover(result)
        if result.refused or since:
            refused = refused_message(result) if result.refused else ""
            blocked = " ".join(f"{g} was not moved: {why}." for g, why in since.items())
            raise AirflowFailException(" ".join(part for part in (refused, blocked) if part))
    moved = {
        # A dry run commits nothing: the groups it would have moved.
        "committed": result.committed
        if not result.dry_run
        else sorted({r.group for r in result.rows if r.action == WOULD_COMMIT}),
        "dry_run": result.dry_run,
        "partitions": len(result.rows),
        "blocked": dict(xcom("preview")["evidence"]["blocked"]),
        "warnings": result.warnings,
    }
    announce_cutover(path, params["source"], params["target"], run_id, moved, params["topics"])
    return moved


STEPS = (
    "check",
    "plan",
    "copy",
    "report",
    "verify_plan",
    "verify",
    "verify_report",
    "preview",
    "approve",
    "cutover",
)


def rejected_by(approval: Mapping[str, Any] | None) -> str | None:
    """ " by <who>" (or "") when the approval step's answer is a rejection; None otherwise (approved,
    or never asked: the step was skipped by the form and left no answer)."""
    chosen = (approval or {}).get("chosen_options")
    if chosen is None or chosen == ["Approve"]:
        return None
    who = ((approval or {}).get("responded_by_user") or {}).get("name")
    return f" by {who}" if who else ""


def decision(states: Mapping[str, str], approval: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """(approved | rejected | not asked, who answered). A rejection ends the approve step
    skipped with its answer in XCom (MigrationApproval); skipped without one, it was not asked."""
    who = ((approval or {}).get("responded_by_user") or {}).get("name")
    chosen = (approval or {}).get("chosen_options")
    if states.get("approve") == "skipped" and chosen is not None and chosen != ["Approve"]:
        return "rejected", who
    if states.get("approve") != "success":
        return "not asked", None
    if chosen is not None:
        return ("approved" if chosen == ["Approve"] else "rejected"), who
    return ("rejected" if states.get("cutover") == "skipped" else "approved"), who


def outcome(
    run_id: str,
    params: Mapping[str, Any],
    states: Mapping[str, str],
    errors: Mapping[str, str | None],
    xcom: XCom,
) -> dict[str, Any]:
    """What the workflow did, each step's final state and result, and in `outcome` one sentence
    saying whether it is done and, if not, why: the first step that failed with its own words
    (`check`: the run did not start), or the cut-over rejected. `done` is False for both."""
    copied, verified, moved = xcom("report"), xcom("verify_report"), xcom("cutover")
    preview = xcom("preview") or {}
    chosen, who = decision(states, xcom("approve"))
    records = None if copied is None else copied["totals"]["records"]
    failed = [s for s in STEPS if states.get(s) == "failed"]
    after = STEPS[STEPS.index(failed[0]) + 1 :] if failed else ()
    not_run = [s for s in after if states.get(s) in ("upstream_failed", "skipped")]
    if failed:
        why = (errors.get(failed[0]) or "see its log").rstrip(".")
        text = (
            f"The migration did not start: {why[:1].lower()}{why[1:]}."
            if failed[0] == "check"
            else f"The migration stopped at {failed[0]}: {why}."
        )
        if not_run and failed[0] != "check":
            text += f" Not run after it: {', '.join(not_run)}."
    elif chosen == "rejected":
        text = (
            f"The cut-over was rejected{f' by {who}' if who else ''}: no consumer group was moved; what was "
            f"copied ({records or 0:,} record(s)) stays on {params['target']}."
        )
    else:
        groups = (moved or {}).get("committed", [])
        blocked = (preview.get("evidence") or {}).get("blocked", {})
        verb = "would move" if params.get("dry_run") else "moved"
        text = (
            f"The migration is done: {records or 0:,} record(s) copied, verification "
            f"{'not run' if verified is None else verified['verdict']}; "
            + (
                f"groups {verb}: {', '.join(groups) or 'none'}"
                if groups_regex(params)
                else "copy only, no group moved"
            )
            + (f"; blocked, not moved: {', '.join(blocked)}" if blocked else "")
            + "."
        )
    return {
        "run_id": run_id,
        "source": params["source"],
        "target": params["target"],
        "topics": params["topics"],
        "until": params["until"],
        "until_ms": (xcom("check") or {}).get("until_ms"),
        "records": records,
        "verdict": None if verified is None else verified["verdict"],
        "approval": chosen,
        "approved_by": who,
        "groups_moved": [] if moved is None or moved["dry_run"] else moved["committed"],
        "groups_blocked": dict((preview.get("evidence") or {}).get("blocked", {})),
        "dry_run": bool(params.get("dry_run")),
        "would_move": moved["committed"] if moved is not None and moved["dry_run"] else [],
        "steps": dict(sorted(states.items())),
        "failed_steps": failed,
        "not_run": not_run,
        "warnings": list((xcom("check") or {}).get("warnings", [])),
        "done": not failed and chosen != "rejected",
        "outcome": text,
    }
