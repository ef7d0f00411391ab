"""Verification DAGs: one manual `mirrorflow__<A>__<B>__verify` per enabled flow (plan -> verify ->
report), proving record by record what the flow has copied (mirrorflow.ops.verification).

The trigger form asks which topics, up to when and whether to sample. plan reads the form (every
problem a sentence naming its field), checks that both clusters answer and the ACLs are there,
and stores the plan; verify is the Spark job (spark_apps/mirrorflow_verify.py), which stores
every partition's check and succeeds whatever it found; report stores the bounded summary, logs
it as a table and returns it (XCom), and is the task that fails when the verdict is short of
passing: `failed` names each wrong record, `incomplete` says how much was not copied yet. Only a
verified copy (or a passed sample) ends green. Nothing is written to either cluster but the run
records, so a verification can run beside the flow's replicate runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, get_current_context, task

from mirrorflow.airflow.assets import verified_alias
from mirrorflow.airflow.forms import sample_fraction, verify_form, verify_form_problems
from mirrorflow.airflow.operators import MirrorflowVerifyOperator
from mirrorflow.airflow.replicate import REPORT_TRIGGER_RULE, START
from mirrorflow.airflow.tags import MANUAL_DAG_PAUSED, dag_tags
from mirrorflow.airflow.task_errors import failing_at_once
from mirrorflow.config import FlowConfig, MirrorConfig

log = logging.getLogger(__name__)

# The form's default topics: the flow's own topic filter, not a regex replacing it.
FLOW_TOPICS = ".*"


def verify_dag_id(source: str, target: str) -> str:
    return f"mirrorflow__{source}__{target}__verify"


def plan_step(
    path: str,
    source: str,
    target: str,
    params: dict[str, Any],
    run_id: str,
    options: Callable[[dict[str, Any]], dict[str, Any]],
) -> Any:
    """The plan task of a verify DAG: the form read first, then `options(params)` planned."""
    from airflow.sdk.exceptions import AirflowFailException

    from mirrorflow.ops.verification import service as verify_service
    from mirrorflow.ops.verification.plan import VerifyError

    with failing_at_once(VerifyError):
        problems = verify_form_problems(params)
        if problems:
            raise AirflowFailException("The trigger form needs changes: " + " ".join(problems))
        return verify_service.plan(path, source, target, run_id=run_id, **options(params))


def report_step(path: str, source: str, target: str, run_id: str, plan_offset: int) -> dict[str, Any]:
    """The report task: the summary stored and logged; failing on any verdict short of passing,
    emitting the flow's verified Asset event on a passing one (the task declares the flow's
    verified alias)."""
    from airflow.sdk.exceptions import AirflowFailException

    from mirrorflow.airflow.assets import announce_verified
    from mirrorflow.ops.verification import service as verify_service
    from mirrorflow.ops.verification.plan import VerifyError
    from mirrorflow.ops.verification.report import VerificationFailed, summary_lines, verdict_problem

    with failing_at_once(VerifyError):
        try:
            summary = verify_service.report(path, source, target, run_id=run_id, plan_offset=plan_offset)
        except VerificationFailed as exc:
            summary = exc.summary
        for line in summary_lines(summary):
            log.info("%s", line)
        problem = verdict_problem(summary)
        if problem:
            raise AirflowFailException(problem)
    announce_verified(path, source, target, summary)
    return summary


def verify_dag(path: str, flow: FlowConfig) -> DAG:
    source, target = flow.source, flow.target
    with DAG(
        dag_id=verify_dag_id(source, target),
        description=f"Verify, record by record, what {source} -> {target} has copied (manual)",
        schedule=None,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=MANUAL_DAG_PAUSED,
        tags=dag_tags("verify", flow.name),
        default_args={"retries": 1, "retry_delay": timedelta(seconds=30)},
        params=verify_form(source),
        doc_md=(
            f"Proves what the replicate DAG of **{source} → {target}** has copied: every source record up to "
            "the flow's progress is matched to its copy by the copy's provenance header and compared on key, "
            "value, headers, timestamp and order. Read-only on both clusters.\n\n"
            "* **plan**: reads the form, checks the clusters and the ACLs; fixes each partition's range (log "
            "start to the progress, at most *Verify up to*) and stores the plan.\n"
            "* **verify**: a Spark job compares the partitions and stores every partition's check; it "
            "succeeds whatever it finds.\n"
            "* **report**: stores, logs and returns the summary (verdict, totals, worst topics, first "
            "mismatches). It fails unless the verdict is `verified` or `sample passed`: `failed` (a wrong "
            "record, or a partition that could not be read) names each wrong record by source and target "
            "offset; `incomplete` says how many offsets were not copied yet."
        ),
    ) as dag:

        @task(task_id="plan", show_return_value_in_logs=False)
        def plan() -> dict[str, Any]:
            context = get_current_context()
            params = context["params"]
            return plan_step(
                path,
                source,
                target,
                params,
                context["run_id"],
                lambda form: {
                    "topics": None if form["topics"] == FLOW_TOPICS else form["topics"],
                    "until": form["until"],
                    "sample": sample_fraction(form["sample"]),
                },
            )

        compare = MirrorflowVerifyOperator(
            task_id="verify",
            config_path=path,
            source=source,
            target=target,
            plan_offset="{{ ti.xcom_pull(task_ids='plan')['plan_offset'] }}",
        )

        @task(
            task_id="report",
            trigger_rule=REPORT_TRIGGER_RULE,
            retries=0,
            show_return_value_in_logs=False,
            outlets=[verified_alias(source, target)],
        )
        def report(planned: dict[str, Any]) -> dict[str, Any]:
            return report_step(path, source, target, get_current_context()["run_id"], planned["plan_offset"])

        planned = plan()
        planned >> compare >> report(planned)
    return dag


def build(path: str, config: MirrorConfig, wanted: str | None) -> dict[str, DAG]:
    dags: dict[str, DAG] = {}
    for flow in config.replication_flows:
        dag_id = verify_dag_id(flow.source, flow.target)
        if wanted in (None, dag_id):
            dags[dag_id] = verify_dag(path, flow)
    return dags
