"""The data-plane DAGs: one `mirrorflow__<A>__<B>__replicate` per enabled flow (plan -> copy ->
report, on the flow's schedule) and the manual `mirrorflow_migrate` with a trigger form.

A failed plan is the run's one red task: a cluster that does not answer fails it within
mirrorflow.cluster.unreachable.timeout.ms without Airflow retries, and report, which has no plan
to report on then, ends upstream_failed instead of failing on the missing plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Param, get_current_context, task

from mirrorflow.airflow.forms import UNTIL_PATTERN, migrate_form_problems
from mirrorflow.airflow.operators import MirrorflowCopyOperator
from mirrorflow.config import FlowConfig, MirrorConfig

START = datetime(2024, 1, 1)
TAGS = ["mirrorflow"]
MIGRATE_DAG_ID = "mirrorflow_migrate"
# report runs after a failed copy too (it says which partitions failed), but only on a plan that
# succeeded: with both plan and copy upstream, "all done, at least one success" means exactly that.
REPORT_TRIGGER_RULE = "all_done_min_one_success"


def replicate_dag_id(source: str, target: str) -> str:
    return f"mirrorflow__{source}__{target}__replicate"


def _schedule(flow: FlowConfig) -> str:
    return flow.replicate_schedule


def _run_id() -> str:
    return get_current_context()["run_id"]


@contextmanager
def failing_at_once(*also: type[Exception]) -> Iterator[None]:
    """Fail the task without retries, with the error's message alone, where retrying cannot help.
    A cluster that did not answer has had its whole wait (mirrorflow.cluster.unreachable.timeout.ms)
    already: the task fails at once with that one message instead of being retried into minutes
    of the same wait; the next run is the retry. A missing ACL is not granted by waiting either,
    nor is anything in `also` (errors only a change of config or request fixes)."""
    from airflow.sdk.exceptions import AirflowFailException

    from mirrorflow.kafka import ClusterUnreachable
    from mirrorflow.ops.acls import MissingAcl

    try:
        yield
    except (ClusterUnreachable, MissingAcl, *also) as exc:
        raise AirflowFailException(str(exc)) from None


def _plan(config_path: str, source: str, target: str, **options: Any) -> dict[str, Any]:
    """plan_run for a plan task, failing at once where retrying cannot help (failing_at_once)."""
    from mirrorflow.replicate.service import plan_run

    with failing_at_once():
        return plan_run(config_path, source, target, run_id=_run_id(), **options)


def replicate_dag(path: str, flow: FlowConfig) -> DAG:
    source, target = flow.source, flow.target
    with DAG(
        dag_id=replicate_dag_id(source, target),
        description=f"Copy {source} to {target} ({flow.delivery}), MM2 semantics",
        schedule=_schedule(flow),
        start_date=START,
        catchup=False,
        max_active_runs=1,
        tags=[*TAGS, "replicate", f"{source}->{target}"],
        default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
        doc_md=(
            f"Replicates **{source} → {target}** with MirrorMaker 2's topic names, progress and offset-syncs.\n\n"
            "* **plan**: creates/grows remote topics, fixes each partition's end offset, stores the plan.\n"
            "* **copy**: a Spark job copies every partition's ranges (exactly-once by default).\n"
            "* **report**: stores and returns the run's figures; fails if any partition failed."
        ),
    ) as dag:

        @task(task_id="plan")
        def plan() -> dict[str, Any]:
            return _plan(path, source, target)

        copy = MirrorflowCopyOperator(
            task_id="copy",
            config_path=path,
            source=source,
            target=target,
            plan_offset="{{ ti.xcom_pull(task_ids='plan')['plan_offset'] }}",
        )

        @task(task_id="report", trigger_rule=REPORT_TRIGGER_RULE, retries=0)
        def report(planned: dict[str, Any]) -> dict[str, Any]:
            from mirrorflow.replicate.service import report_run

            return report_run(
                path,
                source,
                target,
                run_id=_run_id(),
                plan_offset=planned["plan_offset"],
                topic_errors=planned["topic_errors"],
                topic_errors_count=planned.get("topic_errors_count"),
            )

        planned = plan()
        planned >> copy >> report(planned)
    return dag


def migrate_dag(path: str, config: MirrorConfig) -> DAG:
    clusters = list(config.clusters)
    with DAG(
        dag_id=MIGRATE_DAG_ID,
        description="One-off copy of everything up to a point in time, then a report per topic",
        schedule=None,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        tags=[*TAGS, "migrate"],
        default_args={"retries": 3, "retry_delay": timedelta(seconds=30)},
        params={
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
        },
        render_template_as_native_obj=False,
        doc_md=(
            "Copies the chosen topics from **source** to **target** up to the end offsets fixed when the run "
            "starts (or the offsets of the given time), retrying until every range is done, then reports "
            "counts per topic. Progress is shared with the flow's replicate DAG, so nothing is copied twice."
        ),
    ) as dag:

        @task(task_id="plan", retries=1)
        def plan() -> dict[str, Any]:
            from airflow.sdk.exceptions import AirflowFailException

            params = get_current_context()["params"]
            problems = migrate_form_problems(clusters, params)
            if problems:
                raise AirflowFailException("the trigger form needs changes:\n" + "\n".join(problems))
            return _plan(
                path,
                params["source"],
                params["target"],
                mode="migrate",
                until=params["until"],
                topics=params["topics"],
                delivery=params["delivery"],
            )

        copy = MigrationCopyOperator(task_id="copy", config_path=path)

        @task(task_id="report", trigger_rule=REPORT_TRIGGER_RULE, retries=0)
        def report(planned: dict[str, Any]) -> dict[str, Any]:
            from mirrorflow.replicate.service import report_run

            params = get_current_context()["params"]
            return report_run(
                path,
                params["source"],
                params["target"],
                run_id=_run_id(),
                plan_offset=planned["plan_offset"],
                topic_errors=planned["topic_errors"],
                topic_errors_count=planned.get("topic_errors_count"),
            )

        planned = plan()
        planned >> copy >> report(planned)
    return dag


class MigrationCopyOperator(MirrorflowCopyOperator):
    """The copy step of a migration: source and target come from the trigger form."""

    def __init__(self, *, config_path: str, **kwargs: Any) -> None:
        super().__init__(
            config_path=config_path,
            name="mirrorflow-migrate",
            source="{{ params.source }}",
            target="{{ params.target }}",
            plan_offset="{{ ti.xcom_pull(task_ids='plan')['plan_offset'] }}",
            **kwargs,
        )

    def execute(self, context: Any) -> None:
        self.source = context["params"]["source"]
        self.target = context["params"]["target"]
        super().execute(context)


def build(path: str, config: MirrorConfig, wanted: str | None) -> dict[str, DAG]:
    dags: dict[str, DAG] = {}
    for flow in config.replication_flows:
        dag_id = replicate_dag_id(flow.source, flow.target)
        if wanted in (None, dag_id):
            dags[dag_id] = replicate_dag(path, flow)
    if len(config.clusters) >= 2 and wanted in (None, MIGRATE_DAG_ID):
        dags[MIGRATE_DAG_ID] = migrate_dag(path, config)
    return dags
