"""The manual `mirrorflow_migrate` DAG: a one-off migration as a cut-over workflow.

plan -> copy -> report copy everything up to a point in time (as before). Then, each step
optional from the trigger form:

* verify_plan -> verify -> verify_report: the copy proved record by record, exactly up to the
  ends the migration fixed (mirrorflow.ops.verify); a `failed` verdict stops the workflow.
* preview: the verification's verdict and the groups to move with their translated offsets (a
  failover dry run), written for the approver.
* approve: Airflow's human-in-the-loop approval shows the preview; Reject skips the cut-over,
  so nothing changes.
* cutover: failover of the chosen groups from source to target (a dry run when the form says so:
  the whole path is walked, no offset committed).
* final_report: one record of what happened (copy, verdict, decision, groups moved), stored in
  the run-records topic as `migration-summary` and returned; it fails when a step failed, so
  the run's state is the workflow's.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import DAG, Param, get_current_context, task

from mirrorflow.airflow.forms import UNTIL_PATTERN, migrate_form_problems
from mirrorflow.airflow.operators import MirrorflowCopyOperator, MirrorflowVerifyOperator
from mirrorflow.airflow.replicate import REPORT_TRIGGER_RULE, START, TAGS, failing_at_once
from mirrorflow.config import MirrorConfig

MIGRATE_DAG_ID = "mirrorflow_migrate"
SUMMARY_KIND = "migration-summary"
PREVIEW_ROWS = 50  # group rows in the approval's text; the preview's XCom has them all
# Steps after an optional one run when it succeeded or was skipped, never after a failure.
AFTER_OPTIONAL = "none_failed"


class _ClustersFromForm:
    """A Spark step whose source and target come from the trigger form."""

    def execute(self, context: Any) -> None:
        self.source = context["params"]["source"]
        self.target = context["params"]["target"]
        super().execute(context)  # type: ignore[misc]


def _form_flow(**kwargs: Any) -> dict[str, Any]:
    return {"source": "{{ params.source }}", "target": "{{ params.target }}", **kwargs}


class MigrationCopyOperator(_ClustersFromForm, MirrorflowCopyOperator):
    def __init__(self, *, config_path: str, **kwargs: Any) -> None:
        super().__init__(
            **_form_flow(
                config_path=config_path,
                name="mirrorflow-migrate",
                plan_offset="{{ ti.xcom_pull(task_ids='plan')['plan_offset'] }}",
                **kwargs,
            )
        )


class MigrationVerifyOperator(_ClustersFromForm, MirrorflowVerifyOperator):
    def __init__(self, *, config_path: str, **kwargs: Any) -> None:
        super().__init__(
            **_form_flow(
                config_path=config_path,
                name="mirrorflow-migrate-verify",
                plan_offset="{{ ti.xcom_pull(task_ids='verify_plan')['plan_offset'] }}",
                **kwargs,
            )
        )


class MigrationApproval(ApprovalOperator):
    """The approval step; skipped (the cut-over then runs unasked) when the form turns it off or
    there are no groups to move."""

    def execute(self, context: Any) -> Any:
        from airflow.sdk.exceptions import AirflowSkipException

        params = context["params"]
        if not params["approval"] or not params["groups"]:
            raise AirflowSkipException("no approval asked for (turned off in the form, or no groups to move)")
        return super().execute(context)


def migrate_form(clusters: list[str]) -> dict[str, Param]:
    return {
        "source": Param(
            clusters[0],
            enum=clusters,
            title="Source cluster",
            description="The cluster to copy from (an alias of the config's clusters).",
        ),
        "target": Param(
            clusters[-1],
            enum=clusters,
            title="Target cluster",
            description="The cluster to copy to; it must differ from the source. Topics get the "
            "replication policy's remote names there (source.topic by default).",
        ),
        "topics": Param(
            ".*",
            type="string",
            minLength=1,
            title="Topics (regex, full match)",
            description="Which source topics to copy, as one regular expression that must match the "
            "whole name, e.g. orders|payments\\..* ; internal topics are never copied.",
        ),
        "until": Param(
            "now",
            type="string",
            pattern=UNTIL_PATTERN,
            title="Copy up to",
            description="'now' (the end offsets when the run starts), epoch milliseconds, or an "
            "ISO-8601 time such as 2026-11-21T17:00:00Z (UTC when no zone is given): each partition is "
            "copied up to the first offset at or after that time.",
        ),
        "delivery": Param(
            "exactly-once",
            enum=["exactly-once", "at-least-once"],
            title="Delivery guarantee",
            description="exactly-once: each range and its progress commit in one transaction (the "
            "default); at-least-once: plain writes, a retried range may be written twice.",
        ),
        "verify": Param(
            True,
            type="boolean",
            title="Verify the copy",
            description="Compare every copied record with its source (key, value, headers, timestamp, "
            "order) up to exactly where the copy stopped; a failed verification stops the cut-over.",
        ),
        "groups": Param(
            "",
            type="string",
            title="Consumer groups to move (regex)",
            description="Groups to fail over from source to target after the copy, as one regular "
            "expression matching whole names, e.g. orders-.* ; empty: move no group (copy only).",
        ),
        "approval": Param(
            True,
            type="boolean",
            title="Ask for approval",
            description="Before moving groups, wait for a person to approve in Airflow (Required "
            "actions), shown the verification and every group's translated offsets. Reject changes nothing.",
        ),
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run of the cut-over",
            description="Walk the whole path (verify, approval, cut-over) without committing any offset: "
            "the cut-over shows what it would commit.",
        ),
    }


def _params() -> dict[str, Any]:
    return get_current_context()["params"]


def _run_id() -> str:
    return get_current_context()["run_id"]


def _xcom(task_id: str) -> Any:
    return get_current_context()["ti"].xcom_pull(task_ids=task_id)


def approval_body(
    verification: dict[str, Any] | None, moves: dict[str, Any] | None, params: dict[str, Any]
) -> str:
    """Markdown for the approver: the verdict, the groups and their translated offsets."""
    lines = [
        f"### Cut-over {params['source']} → {params['target']}" + (" (dry run)" if params["dry_run"] else "")
    ]
    if verification is None:
        lines.append("Verification: **not run** (turned off in the form).")
    else:
        totals = verification["totals"]
        lines.append(
            f"Verification: **{verification['verdict']}**: {totals['matched']:,} records equal, "
            f"{totals['wrong_total']:,} wrong, {totals['explained_total']:,} explained, "
            f"{totals['pending']:,} not copied."
        )
    if moves is None:
        lines.append("No groups to move.")
        return "\n\n".join(lines)
    rows = moves["rows"]
    lines.append(
        f"Groups matching `{params['groups']}`: {len({r['group'] for r in rows})} group(s), {len(rows)} partition(s); "
        f"{len(moves['refused'])} would be refused."
    )
    table = [
        "| group | topic on target | partition | offset on source | offset on target | how |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows[:PREVIEW_ROWS]:
        table.append(
            f"| {row['group']} | {row['topic']} | {row['partition']} | {row['source_offset']} | "
            f"{'-' if row['target_offset'] is None else row['target_offset']} | {row['status']} |"
        )
    lines.append("\n".join(table))
    if len(rows) > PREVIEW_ROWS:
        lines.append(f"... and {len(rows) - PREVIEW_ROWS} more rows (the preview task's XCom has them all).")
    lines += [f"Refused: {why}" for why in list(moves["refused"].values())[:10]]
    lines += [f"Warning: {w}" for w in moves["warnings"][:10]]
    return "\n\n".join(lines)


def migrate_dag(path: str, config: MirrorConfig) -> DAG:
    clusters = list(config.clusters)
    with DAG(
        dag_id=MIGRATE_DAG_ID,
        description="One-off migration: copy up to a point in time, verify, approve, move the consumer groups",
        schedule=None,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        tags=[*TAGS, "migrate"],
        default_args={"retries": 3, "retry_delay": timedelta(seconds=30)},
        params=migrate_form(clusters),
        render_template_as_native_obj=False,
        doc_md=(
            "Copies the chosen topics from **source** to **target** up to the end offsets fixed when the run "
            "starts (or the offsets of the given time), retrying until every range is done, and reports counts "
            "per topic. Progress is shared with the flow's replicate DAG, so nothing is copied twice.\n\n"
            "Then, each step optional in the form: **verify** the copy record by record up to exactly where it "
            "stopped (a failed verdict stops here); **preview** the verdict and the groups' translated offsets; "
            "**approve** (human in the loop: Reject changes nothing); **cutover** moves the groups (failover; a "
            "dry run commits nothing); **final_report** stores what happened as `migration-summary`."
        ),
    ) as dag:

        @task(task_id="plan", retries=1)
        def plan() -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowFailException

            from mirrorflow.replicate.service import plan_run

            params = _params()
            problems = migrate_form_problems(clusters, params)
            if problems:
                raise AirflowFailException("the trigger form needs changes:\n" + "\n".join(problems))
            with failing_at_once():
                return plan_run(
                    path,
                    params["source"],
                    params["target"],
                    run_id=_run_id(),
                    mode="migrate",
                    until=params["until"],
                    topics=params["topics"],
                    delivery=params["delivery"],
                )

        copy = MigrationCopyOperator(task_id="copy", config_path=path)

        @task(task_id="report", trigger_rule=REPORT_TRIGGER_RULE, retries=0)
        def report(planned: dict[str, Any]) -> dict[str, Any]:
            from mirrorflow.airflow.replicate import report_and_log
            from mirrorflow.config import load_config

            params = _params()
            flow = load_config(path).flow(params["source"], params["target"])
            return report_and_log(path, flow, planned, run_id=_run_id())

        @task(task_id="verify_plan", retries=1)
        def verify_plan(planned: dict[str, Any]) -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowSkipException

            from mirrorflow.clients import FlowClients
            from mirrorflow.ops import verify_service
            from mirrorflow.ops.verify import VerifyError
            from mirrorflow.replicate import runs
            from mirrorflow.replicate.plan import Plan

            params = _params()
            if not params["verify"]:
                raise AirflowSkipException("verification turned off in the form")
            flow = config.flow(params["source"], params["target"])
            _, _, _, body = runs.read_run_record(
                FlowClients.resolve(flow).target_consumer, planned["plan_offset"]
            )
            copied = Plan.from_json(body)
            with failing_at_once(VerifyError):
                return verify_service.plan(
                    path,
                    params["source"],
                    params["target"],
                    run_id=_run_id(),
                    topics=params["topics"],
                    delivery=copied.delivery,
                    ends={(s.topic, s.partition): s.end for s in copied.spans},
                )

        compare = MigrationVerifyOperator(task_id="verify", config_path=path)

        @task(task_id="verify_report", trigger_rule=REPORT_TRIGGER_RULE, retries=0)
        def verify_report(planned: dict[str, Any]) -> dict[str, Any]:
            from mirrorflow.ops import verify_service
            from mirrorflow.ops.verify import VerificationFailed, VerifyError

            params = _params()
            with failing_at_once(VerificationFailed, VerifyError):
                return verify_service.report(
                    path,
                    params["source"],
                    params["target"],
                    run_id=_run_id(),
                    plan_offset=planned["plan_offset"],
                )

        @task(task_id="preview", trigger_rule=AFTER_OPTIONAL, retries=0)
        def preview() -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowFailException

            from mirrorflow.ops.failover import FailoverError, failover

            params = _params()
            verification = _xcom("verify_report")
            if verification is not None and verification["verdict"] not in ("verified", "sample passed"):
                raise AirflowFailException(
                    f"the verification's verdict is {verification['verdict']!r}, not 'verified': "
                    f"{verification['totals']['pending']:,} offsets were not copied; the cut-over does not start"
                )
            moves = None
            if params["groups"]:
                with failing_at_once(FailoverError):
                    moves = failover(
                        path,
                        params["source"],
                        params["target"],
                        params["groups"],
                        dry_run=True,
                        require_enabled=False,
                    ).to_dict()
            return {"body": approval_body(verification, moves, params), "moves": moves}

        approve = MigrationApproval(
            task_id="approve",
            subject="Cut over {{ params.source }} -> {{ params.target }}: move the consumer groups?",
            body="{{ ti.xcom_pull(task_ids='preview')['body'] }}",
            trigger_rule=AFTER_OPTIONAL,
            retries=0,
        )

        @task(task_id="cutover", trigger_rule=AFTER_OPTIONAL, retries=0)
        def cutover() -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

            from mirrorflow.ops.failover import WOULD_COMMIT, FailoverError, failover

            params = _params()
            if not params["groups"]:
                raise AirflowSkipException("no groups to move")
            with failing_at_once(FailoverError):
                result = failover(
                    path,
                    params["source"],
                    params["target"],
                    params["groups"],
                    dry_run=bool(params["dry_run"]),
                    require_enabled=False,
                )
            if result.refused:
                raise AirflowFailException("groups not moved:\n" + "\n".join(result.refused.values()))
            return {
                # A dry run commits nothing: the groups it would have moved.
                "committed": result.committed
                if not result.dry_run
                else sorted({r.group for r in result.rows if r.action == WOULD_COMMIT}),
                "dry_run": result.dry_run,
                "partitions": len(result.rows),
                "warnings": result.warnings,
            }

        @task(task_id="final_report", trigger_rule="all_done", retries=0)
        def final_report() -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowFailException

            from mirrorflow.clients import FlowClients
            from mirrorflow.replicate import runs

            context = get_current_context()
            params, run_id = context["params"], context["run_id"]
            states = context["ti"].get_task_states(dag_id=MIGRATE_DAG_ID, run_ids=[run_id]).get(run_id, {})
            summary = _outcome(
                params, states, _xcom("report"), _xcom("verify_report"), _xcom("approve"), _xcom("cutover")
            )
            if states.get("plan") != "failed":  # a plan that failed may name no valid flow to store it with
                flow = config.flow(params["source"], params["target"])
                runs.write_run_record(
                    FlowClients.resolve(flow).target_producer,
                    flow.name,
                    run_id,
                    SUMMARY_KIND,
                    json.dumps(summary),
                )
            if summary["failed_steps"]:
                raise AirflowFailException(
                    f"the migration did not complete: {', '.join(summary['failed_steps'])} failed or could not "
                    "run (their task logs say why); this summary is stored as migration-summary"
                )
            return summary

        planned = plan()
        reported = report(planned)
        planned >> copy >> reported
        verify_planned = verify_plan(planned)
        reported >> verify_planned >> compare
        checked = verify_report(verify_planned)
        compare >> checked
        previewed = preview()
        checked >> previewed >> approve
        moved = cutover()
        approve >> moved >> final_report()
    return dag


def _outcome(
    params: dict[str, Any],
    states: dict[str, str],
    copied: dict[str, Any] | None,
    verified: dict[str, Any] | None,
    approval: dict[str, Any] | None,
    moved: dict[str, Any] | None,
) -> dict[str, Any]:
    """What the workflow did: each step's final state and result."""
    failed = sorted(
        task
        for task, state in states.items()
        if state in ("failed", "upstream_failed") and task != "final_report"
    )
    decision = "not asked"
    if states.get("approve") == "success":
        chosen = (approval or {}).get("chosen_options")
        if chosen is not None:
            decision = "approved" if chosen == [ApprovalOperator.APPROVE] else "rejected"
        else:
            decision = "rejected" if states.get("cutover") == "skipped" else "approved"
    return {
        "source": params["source"],
        "target": params["target"],
        "topics": params["topics"],
        "until": params["until"],
        "records": None if copied is None else copied["totals"]["records"],
        "verdict": None if verified is None else verified["verdict"],
        "approval": decision,
        "groups_moved": [] if moved is None or moved["dry_run"] else moved["committed"],
        "dry_run": bool(params["dry_run"]),
        "would_move": moved["committed"] if moved is not None and moved["dry_run"] else [],
        "steps": dict(sorted(states.items())),
        "failed_steps": failed,
    }


def build(path: str, config: MirrorConfig, wanted: str | None) -> dict[str, DAG]:
    if len(config.clusters) < 2 or wanted not in (None, MIGRATE_DAG_ID):
        return {}
    return {MIGRATE_DAG_ID: migrate_dag(path, config)}
