"""The manual `mirrorflow_migrate` DAG: a one-off migration as a cut-over workflow.

* check: every field of the form read and held against the source before anything runs (the
  topics must match topics of the source, the groups groups of it, "Copy up to" must be a time);
  a problem fails this task alone, at once, with one sentence per problem, and the run stops.
* plan -> copy -> report copy everything up to the moment asked for.
* verify_plan -> verify -> verify_report (optional): the copy proved record by record, exactly up
  to the ends the migration fixed; any verdict but verified stops the workflow (incomplete too
  when the target removed copies of what this run copied or of records a group to move has not
  read).
* preview: the evidence (mirrorflow.ops.migration_evidence): what was asked, what "Copy up to"
  resolved to, what was copied and verified, and per group to move whether every partition it
  reads was copied and verified up to its committed offset and the target still holds every
  copy the group has not read; a group that was not is blocked.
* approve (optional): Airflow's human-in-the-loop approval showing that evidence.
* cutover: failover of the movable groups only (a dry run when the form says so).
* final_report: one record of what happened, stored as `migration-summary` and returned; it fails,
  with one sentence, unless the migration is done: a step that failed (its own words) or a
  rejected cut-over leave the run red, never green.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import DAG, get_current_context, task

from mirrorflow.airflow.assets import copies_alias, cutover_alias, every_pair, verified_alias
from mirrorflow.airflow.forms import groups_regex, migrate_form
from mirrorflow.airflow.operators import MirrorflowCopyOperator, MirrorflowVerifyOperator
from mirrorflow.airflow.replicate import REPORT_TRIGGER_RULE, START, plan_and_log, report_and_log
from mirrorflow.airflow.tags import MANUAL_DAG_PAUSED, dag_tags
from mirrorflow.airflow.task_errors import ERROR_KEY, failing_at_once
from mirrorflow.config import MirrorConfig

log = logging.getLogger("mirrorflow.airflow.migrate")

MIGRATE_DAG_ID = "mirrorflow_migrate"
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
    there are no groups to move.

    A rejection ends it skipped too, never green: Airflow's approval succeeds whatever the answer,
    and a rejected cut-over showed a green approve task above a skipped cut-over. Its answer stays
    in its XCom (chosen_options, responded_by_user), which the final report reads, and its log
    says who rejected it."""

    def execute(self, context: Any) -> Any:
        from airflow.sdk.exceptions import AirflowSkipException

        params = context["params"]
        if not params["approval"] or groups_regex(params) is None:
            raise AirflowSkipException("no approval asked for (turned off in the form, or no groups to move)")
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        from airflow.providers.standard.operators.hitl import HITLOperator
        from airflow.sdk.exceptions import AirflowSkipException

        if "error" in event or event.get("chosen_options") == [self.APPROVE]:
            return super().execute_complete(context=context, event=event)
        # Airflow's own path for a rejection skips the steps after it through SkipMixin, which
        # ends this step a success. The answer is read and checked as Airflow does and kept; the
        # cut-over, which runs only once this step has ended, reads it and skips itself. (Skipping
        # the cut-over from here let the final report run, and take the run for done, while this
        # step was still running.)
        answer = dict(HITLOperator.execute_complete(self, context=context, event=event))
        context["ti"].xcom_push(key="return_value", value=answer)
        who = (answer.get("responded_by_user") or {}).get("name")
        raise AirflowSkipException(
            f"the cut-over was rejected{f' by {who}' if who else ''}: no consumer group is moved"
        )


def _params() -> dict[str, Any]:
    return get_current_context()["params"]


def _run_id() -> str:
    return get_current_context()["run_id"]


def _xcom(task_id: str) -> Any:
    return get_current_context()["ti"].xcom_pull(task_ids=task_id)


def migrate_dag(path: str, config: MirrorConfig) -> DAG:
    clusters = list(config.clusters)
    quiet = {"show_return_value_in_logs": False}
    with DAG(
        dag_id=MIGRATE_DAG_ID,
        description="One-off migration: copy up to a point in time, verify, approve, move the consumer groups",
        schedule=None,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=MANUAL_DAG_PAUSED,
        tags=dag_tags("migrate"),
        default_args={"retries": 3, "retry_delay": timedelta(seconds=30)},
        params=migrate_form(clusters),
        render_template_as_native_obj=False,
        doc_md=(
            "**check** reads the form and holds it against the source (the topics and groups must exist "
            "there, *Copy up to* must be a time); a problem stops the run here. Then it copies the chosen "
            "topics from **source** to **target** up to the end offsets fixed when the run starts (or the "
            "offsets of the given time) and reports counts per topic. Progress is shared with the flow's "
            "replicate DAG, so nothing is copied twice.\n\n"
            "Then, each step optional in the form: **verify** the copy record by record up to exactly where it "
            "stopped (any verdict but verified stops here); **preview** the evidence: what was copied and "
            "verified, and for each group whether every partition it reads was copied and verified up to its "
            "committed offset and the target still holds every copy it has not read (a group that was not "
            "is blocked and never moved); **approve** (human in the "
            "loop: Reject changes nothing); **cutover** moves the movable groups (a dry run commits nothing); "
            "**final_report** stores what happened as `migration-summary` and fails unless the migration is "
            "done (a failed step, or a rejected cut-over)."
        ),
    ) as dag:

        @task(task_id="check", retries=0, **quiet)
        def check() -> dict[str, Any]:
            from mirrorflow.airflow.migrate_steps import check_step

            return check_step(path, clusters, _params())

        @task(task_id="plan", retries=1, **quiet)
        def plan() -> dict[str, Any]:
            params = _params()
            return plan_and_log(
                path,
                params["source"],
                params["target"],
                mode="migrate",
                until=params["until"],
                topics=params["topics"],
                delivery=params["delivery"],
            )

        copy = MigrationCopyOperator(task_id="copy", config_path=path)

        @task(
            task_id="report",
            trigger_rule=REPORT_TRIGGER_RULE,
            retries=0,
            outlets=every_pair(config, copies_alias),
            **quiet,
        )
        def report(planned: dict[str, Any]) -> dict[str, Any]:
            params = _params()
            flow = config.flow(params["source"], params["target"])
            with failing_at_once():
                return report_and_log(path, flow, planned, run_id=_run_id())

        @task(task_id="verify_plan", retries=1, **quiet)
        def verify_plan(planned: dict[str, Any]) -> dict[str, Any]:
            from mirrorflow.airflow.migrate_steps import verify_plan_step

            return verify_plan_step(path, _params(), _run_id(), planned)

        compare = MigrationVerifyOperator(task_id="verify", config_path=path)

        @task(
            task_id="verify_report",
            trigger_rule=REPORT_TRIGGER_RULE,
            retries=0,
            outlets=every_pair(config, verified_alias),
            **quiet,
        )
        def verify_report(planned: dict[str, Any]) -> dict[str, Any]:
            from mirrorflow.airflow.verify import report_step

            params = _params()
            return report_step(path, params["source"], params["target"], _run_id(), planned["plan_offset"])

        @task(task_id="preview", trigger_rule=AFTER_OPTIONAL, retries=0, **quiet)
        def preview() -> dict[str, Any]:
            from mirrorflow.airflow.migrate_steps import preview_step

            return preview_step(path, _params(), _run_id(), _xcom)

        approve = MigrationApproval(
            task_id="approve",
            subject="Cut over {{ params.source }} -> {{ params.target }}: move the consumer groups?",
            body="{{ ti.xcom_pull(task_ids='preview')['body'] }}",
            trigger_rule=AFTER_OPTIONAL,
            # Airflow 3.3 can fail an approval answered within seconds (apache/airflow 72716,
            # 71580): a second try asks again instead of the run ending failed. The answer is
            # the operator's either way; a rejection is not a failure and is never asked again.
            retries=1,
            retry_delay=timedelta(seconds=5),
        )

        @task(
            task_id="cutover",
            trigger_rule=AFTER_OPTIONAL,
            retries=0,
            outlets=every_pair(config, cutover_alias),
            **quiet,
        )
        def cutover() -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowSkipException

            from mirrorflow.airflow.migrate_steps import cutover_step, rejected_by

            rejected = rejected_by(_xcom("approve"))
            if rejected is not None:
                raise AirflowSkipException(f"the cut-over was rejected{rejected}: no consumer group is moved")
            return cutover_step(path, _params(), _run_id(), _xcom)

        @task(task_id="final_report", trigger_rule="all_done", retries=0, **quiet)
        def final_report() -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowFailException

            from mirrorflow.airflow.migrate_steps import STEPS, outcome
            from mirrorflow.clients import FlowClients
            from mirrorflow.ops.migration_evidence import MIGRATION_SUMMARY_KIND
            from mirrorflow.replicate import runs

            context = get_current_context()
            params, run_id, ti = context["params"], context["run_id"], context["ti"]
            states = ti.get_task_states(dag_id=MIGRATE_DAG_ID, run_ids=[run_id]).get(run_id, {})
            errors = {
                step: ti.xcom_pull(task_ids=step, key=ERROR_KEY)
                for step in STEPS
                if states.get(step) == "failed"
            }
            summary = outcome(run_id, params, states, errors, _xcom)
            if states.get("check") == "success":  # a form that failed its check may name no valid flow
                try:
                    flow = config.flow(params["source"], params["target"])
                    runs.write_run_record(
                        FlowClients.resolve(flow).target_producer,
                        flow.name,
                        run_id,
                        MIGRATION_SUMMARY_KIND,
                        json.dumps(summary),
                    )
                except Exception as exc:  # noqa: BLE001 - the outcome below is what the run must say
                    log.warning("the migration summary could not be stored: %s", exc)
            with failing_at_once():
                if not summary["done"]:
                    raise AirflowFailException(summary["outcome"])
            log.info("%s", summary["outcome"])
            return summary

        checked = check()
        planned = plan()
        checked >> planned
        reported = report(planned)
        planned >> copy >> reported
        verify_planned = verify_plan(planned)
        reported >> verify_planned >> compare
        verified = verify_report(verify_planned)
        compare >> verified
        previewed = preview()
        verified >> previewed >> approve
        moved = cutover()
        reported_last = final_report()
        # The final report waits for the check too: a check that refuses the form skips every
        # step up to the report at once, and the report must not run before the check has failed.
        approve >> moved >> reported_last
        checked >> reported_last
    return dag


def build(path: str, config: MirrorConfig, wanted: str | None) -> dict[str, DAG]:
    if len(config.clusters) < 2 or wanted not in (None, MIGRATE_DAG_ID):
        return {}
    return {MIGRATE_DAG_ID: migrate_dag(path, config)}
