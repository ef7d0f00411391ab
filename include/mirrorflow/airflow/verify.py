"""Verification DAGs: one manual `mirrorflow__<A>__<B>__verify` per enabled flow (plan -> verify ->
report), proving record by record what the flow has copied (mirrorflow.ops.verify).

The trigger form asks which topics, up to when and whether to sample. plan checks the form, that
both clusters answer and the ACLs are there, and stores the plan; verify is the Spark job
(spark_apps/mirrorflow_verify.py), which stores every partition's check and succeeds whatever it
found; report stores the bounded summary and returns it (XCom), and is the task that fails, naming
each wrong record, when the verdict is `failed`. Nothing is written to either cluster but the run
records, so a verification can run beside the flow's replicate runs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, get_current_context, task

from mirrorflow.airflow.forms import UNTIL_PATTERN, sample_fraction, verify_form_problems
from mirrorflow.airflow.operators import MirrorflowVerifyOperator
from mirrorflow.airflow.replicate import REPORT_TRIGGER_RULE, START, TAGS, failing_at_once
from mirrorflow.config import FlowConfig, MirrorConfig

# The form's default topics: the flow's own topic filter, not a regex replacing it.
FLOW_TOPICS = ".*"


def verify_dag_id(source: str, target: str) -> str:
    return f"mirrorflow__{source}__{target}__verify"


def verify_form(flow: FlowConfig) -> dict[str, Param]:
    return {
        "topics": Param(
            FLOW_TOPICS,
            type="string",
            minLength=1,
            title="Topics (regex, full match)",
            description=f"Which of {flow.source}'s topics to verify, as one regular expression that must match "
            "the whole name, e.g. orders|payments\\..* ; .* (the default) means the flow's own topics "
            "(its topics and topics.exclude settings). Internal topics are never verified.",
        ),
        "until": Param(
            "now",
            type="string",
            pattern=UNTIL_PATTERN,
            title="Verify up to",
            description="'now' (each partition's last stable offset when the run starts), epoch milliseconds, "
            "or an ISO-8601 time such as 2026-11-21T17:00:00Z (UTC when no zone is given): each partition is "
            "verified up to the first offset at or after that time. Offsets the flow has not copied yet are "
            "reported as pending, never as wrong.",
        ),
        "sample": Param(
            None,
            type=["null", "number"],
            exclusiveMinimum=0,
            maximum=1,
            title="Sample (fraction)",
            description="Empty: compare every record. A fraction in (0, 1] such as 0.05: compare random "
            "stretches of 1,000 consecutive offsets covering that share of each partition, every record of "
            "a stretch exactly; the summary states what the sample proves.",
        ),
    }


def verify_dag(path: str, flow: FlowConfig) -> DAG:
    source, target = flow.source, flow.target
    with DAG(
        dag_id=verify_dag_id(source, target),
        description=f"Verify, record by record, what {source} -> {target} has copied (manual)",
        schedule=None,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        tags=[*TAGS, "verify", f"{source}->{target}"],
        default_args={"retries": 1, "retry_delay": timedelta(seconds=30)},
        params=verify_form(flow),
        doc_md=(
            f"Proves what the replicate DAG of **{source} → {target}** has copied: every source record up to "
            "the flow's progress is matched to its copy by the copy's provenance header and compared on key, "
            "value, headers, timestamp and order. Read-only on both clusters.\n\n"
            "* **plan**: checks the form, the clusters and the ACLs; fixes each partition's range (log start "
            "to the progress, at most *Verify up to*) and stores the plan.\n"
            "* **verify**: a Spark job compares the partitions and stores every partition's check; it "
            "succeeds whatever it finds.\n"
            "* **report**: stores and returns the summary (verdict, totals, worst topics, first mismatches). "
            "It fails when the verdict is `failed` (a wrong record, or a partition that could not be read), "
            "naming each wrong record by source and target offset; `incomplete` (offsets not copied yet) "
            "and `sample passed` succeed, with the verdict in the summary."
        ),
    ) as dag:

        @task(task_id="plan")
        def plan() -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowFailException

            from mirrorflow.ops import verify_service
            from mirrorflow.ops.verify import VerifyError

            context = get_current_context()
            params = context["params"]
            problems = verify_form_problems(params)
            if problems:
                raise AirflowFailException("the trigger form needs changes:\n" + "\n".join(problems))
            with failing_at_once(VerifyError):
                return verify_service.plan(
                    path,
                    source,
                    target,
                    run_id=context["run_id"],
                    topics=None if params["topics"] == FLOW_TOPICS else params["topics"],
                    until=params["until"],
                    sample=sample_fraction(params["sample"]),
                )

        compare = MirrorflowVerifyOperator(
            task_id="verify",
            config_path=path,
            source=source,
            target=target,
            plan_offset="{{ ti.xcom_pull(task_ids='plan')['plan_offset'] }}",
        )

        @task(task_id="report", trigger_rule=REPORT_TRIGGER_RULE, retries=0)
        def report(planned: dict[str, Any]) -> dict[str, Any]:
            from mirrorflow.ops import verify_service
            from mirrorflow.ops.verify import VerificationFailed, VerifyError

            with failing_at_once(VerificationFailed, VerifyError):
                return verify_service.report(
                    path,
                    source,
                    target,
                    run_id=get_current_context()["run_id"],
                    plan_offset=planned["plan_offset"],
                )

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
