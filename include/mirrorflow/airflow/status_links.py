"""What the status page knows of Airflow: the DAGs and runs it links to, their states, and the
links into Airflow's UI.

Kafka holds what runs did (their summaries); only Airflow's metadata DB holds whether a run
happened and failed before it could write anything (a target that is down fails the plan, and
no summary is written). So the page asks Airflow, through an injected reader (AirflowReader, the
plugin's in the api-server), for each flow's last run and last successful run and how many runs
failed; without a reader (outside the api-server) links are built from names alone.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from urllib.parse import quote

from mirrorflow.config import MirrorConfig
from mirrorflow.control.mirror_status import FlowStatus, MirrorStatus

MIGRATE_DAG_ID = "mirrorflow_migrate"  # mirrorflow.airflow.migrate.MIGRATE_DAG_ID
HEARTBEATS_DAG_ID = "mirrorflow_heartbeats"  # mirrorflow.airflow.maintenance: one for every pair


def replicate_dag_id(source: str, target: str) -> str:
    """As mirrorflow.airflow.replicate names it (a unit test holds the two together)."""
    return f"mirrorflow__{source}__{target}__replicate"


def verify_dag_id(source: str, target: str) -> str:
    return f"mirrorflow__{source}__{target}__verify"


@dataclass(frozen=True)
class DagRunFacts:
    """One DAG run as Airflow's metadata DB has it."""

    run_id: str
    state: str
    start_ms: int | None = None
    end_ms: int | None = None

    @property
    def at_ms(self) -> int | None:
        return self.end_ms or self.start_ms


@dataclass(frozen=True)
class AirflowFacts:
    """What Airflow's metadata DB says of the DAGs and runs the page links to. `dags` is None when
    Airflow was not asked (no reader, or it failed): then every link is built from names alone."""

    dags: frozenset[str] | None = None  # DAG ids Airflow knows (not stale)
    paused: frozenset[str] = frozenset()
    runs: dict[tuple[str, str], str] = field(default_factory=dict)  # (dag_id, run_id) -> state
    last_run: dict[str, DagRunFacts] = field(default_factory=dict)  # dag_id -> its newest run
    # dag_id -> its newest run that ended (success or failed): a run under way after a failed
    # one leaves the flow red until it succeeds
    last_finished: dict[str, DagRunFacts] = field(default_factory=dict)
    last_success: dict[str, DagRunFacts] = field(default_factory=dict)  # dag_id -> newest success
    failed_runs: dict[str, int] = field(default_factory=dict)  # dag_id -> runs that failed


# (dag ids, (dag id, run id) pairs) -> what Airflow knows of them
AirflowReader = Callable[[Sequence[str], Sequence[tuple[str, str]]], AirflowFacts]

# --- links into Airflow's UI (routes of Airflow 3.3's React router) -----------------------------
# The page lives at <base>/mirrorflow/ui inside the UI's iframe: `../` is the UI's base, and links
# open in the whole window (target _top), not inside the iframe.


def dag_url(dag_id: str) -> str:
    return f"../dags/{quote(dag_id, safe='')}"


def run_url(dag_id: str, run_id: str) -> str:
    return f"{dag_url(dag_id)}/runs/{quote(run_id, safe='')}"


def task_url(dag_id: str, run_id: str, task_id: str) -> str:
    """The task instance's page, which opens on its logs."""
    return f"{run_url(dag_id, run_id)}/tasks/{quote(task_id, safe='')}"


def link(url: str, text: str, title: str | None = None) -> str:
    hint = f' title="{html.escape(title)}"' if title else ""
    return f'<a href="{html.escape(url)}" target="_top"{hint}>{html.escape(text)}</a>'


def log_links(dag_id: str, run_id: str, tasks: Sequence[str]) -> str:
    """`plan log · copy log · report log`: each task's page, which opens on its log."""
    return " · ".join(link(task_url(dag_id, run_id, t), f"{t} log", f"the {t} task's log") for t in tasks)


REPLICATE_TASKS = ("plan", "copy", "report")
VERIFY_TASKS = ("plan", "verify", "report")
MIGRATE_TASKS = ("check", "copy", "verify", "final_report")


def run_dag(candidates: Sequence[str], run_id: str, facts: AirflowFacts) -> str | None:
    """The DAG a run id belongs to: the first candidate Airflow has that run in; without Airflow
    to ask, the first candidate; None for a run Airflow never had (one started from the CLI)."""
    if facts.dags is None:
        return candidates[0] if candidates else None
    return next((dag for dag in candidates if (dag, run_id) in facts.runs), None)


def summary_dags(flow: FlowStatus) -> list[str]:
    """DAGs that write a flow's run summaries: its replication DAG, or the migration DAG."""
    own = replicate_dag_id(str(flow.source), str(flow.target))
    mode = (flow.last_run or {}).get("mode")
    return [MIGRATE_DAG_ID, own] if mode == "migrate" else [own, MIGRATE_DAG_ID]


def verification_dags(flow: FlowStatus) -> list[str]:
    return [verify_dag_id(str(flow.source), str(flow.target)), MIGRATE_DAG_ID]


def wanted_from_airflow(
    status: MirrorStatus, config: MirrorConfig | None
) -> tuple[list[str], list[tuple[str, str]]]:
    """The DAG ids and (DAG, run) pairs the page asks Airflow about."""
    dags: set[str] = set()
    runs: set[tuple[str, str]] = set()
    for flow in status.flows:
        dags.add(replicate_dag_id(str(flow.source), str(flow.target)))
        dags.add(verify_dag_id(str(flow.source), str(flow.target)))
        if flow.last_run and flow.last_run.get("run_id"):
            runs.update((dag, flow.last_run["run_id"]) for dag in summary_dags(flow))
        if flow.last_verification and flow.last_verification.get("run_id"):
            runs.update((dag, flow.last_verification["run_id"]) for dag in verification_dags(flow))
        for entry in flow.history:
            if entry.get("run_id"):
                candidates = [MIGRATE_DAG_ID] if entry["kind"] == "migration" else verification_dags(flow)
                runs.update((dag, entry["run_id"]) for dag in candidates)
    if config is None or len(config.clusters) > 1:
        dags.add(MIGRATE_DAG_ID)
    if config is not None and config.heartbeat_flows:
        dags.add(HEARTBEATS_DAG_ID)
    return sorted(dags), sorted(runs)


# --- paused DAGs -----------------------------------------------------------------------------------


def paused_text(kind: str, dag_id: str) -> str:
    return f"the {kind} DAG {dag_id} is paused: unpause it in Airflow"


def upstream_heartbeat_dags(config: MirrorConfig, cluster: str) -> list[str]:
    """The heartbeat DAG, if its heartbeats make upstream clusters show on `cluster`: when a pair
    writes into a source of a flow into it (`A.heartbeats` on B is A's `heartbeats`, copied by
    A->B)."""
    sources = {f.source for f in config.replication_flows if f.target == cluster}
    return [HEARTBEATS_DAG_ID] if any(f.target in sources for f in config.heartbeat_flows) else []


def paused_hints(
    status: MirrorStatus, config: MirrorConfig | None, facts: AirflowFacts
) -> list[dict[str, str]]:
    """One hint per paused DAG the page's figures wait on: a flow's replication DAG, and the
    heartbeat DAGs behind each cluster's upstreams (generated DAGs start paused)."""
    if config is None or not facts.paused:
        return []
    hints: list[dict[str, str]] = []
    for flow in status.flows:
        dag = replicate_dag_id(str(flow.source), str(flow.target))
        if dag in facts.paused:
            text = f"{flow.flow}: " + paused_text("replication", dag)
            hints.append({"kind": "replication", "dag_id": dag, "subject": flow.flow, "text": text})
    seen: set[str] = set()
    for cluster in status.clusters:
        for dag in upstream_heartbeat_dags(config, cluster.alias):
            if dag in facts.paused and dag not in seen:
                seen.add(dag)
                text = f"upstreams of {cluster.alias}: " + paused_text("heartbeat", dag)
                hints.append({"kind": "heartbeats", "dag_id": dag, "subject": cluster.alias, "text": text})
    return hints


def airflow_runs_document(status: MirrorStatus, facts: AirflowFacts) -> dict[str, dict[str, object]]:
    """Per flow, what Airflow says of its replication DAG's runs: the last one (its state), the
    last successful one, and how many failed (the JSON's `airflow_runs`)."""
    out: dict[str, dict[str, object]] = {}
    for flow in status.flows:
        dag = replicate_dag_id(str(flow.source), str(flow.target))
        last, success = facts.last_run.get(dag), facts.last_success.get(dag)
        finished = facts.last_finished.get(dag)
        out[flow.flow] = {
            "dag_id": dag,
            "last_run": None if last is None else asdict(last) | {"at_ms": last.at_ms},
            "last_finished": None if finished is None else asdict(finished) | {"at_ms": finished.at_ms},
            "last_success": None if success is None else asdict(success) | {"at_ms": success.at_ms},
            "failed_runs": facts.failed_runs.get(dag, 0),
        }
    return out
