"""Airflow 3 (api-server, scheduler, dag-processor, triggerer), real Spark and two real Kafka
clusters: the example DAG of docs/airflow/assets-and-lineage.md, scheduled on the Asset of
`primary.orders` on the backup cluster, runs after the replicate run that copied orders, reads
exactly the records that run brought, and does not run after an idle run; and with
apache-airflow-providers-openlineage's file transport on, the copy task's OpenLineage events name
each source topic as an input and each remote topic as an output, with what the run wrote into it.

One Airflow serves both checks (starting it is most of the test's time). The source cluster's
address is only in an Airflow connection that also holds a secret: the secret reaches neither
the Asset events nor the lineage nor the logs, and the source is named by host:port alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mirrorflow.airflow.local import AirflowHome, AirflowServer, free_port
from mirrorflow.airflow.settings import PROJECT_ROOT

from ..integration.kafkatools import create_topics, produce, read_all
from ..integration.mirror_setup import SINGLE_BROKER
from .browser_ui import run_path, until, wait_run, xcom

REPLICATE, CONSUMER = "mirrorflow__primary__backup__replicate", "orders_on_backup"
EXAMPLE = PROJECT_ROOT / "docs" / "airflow" / "examples" / f"{CONSUMER}.py"
SECRET = "hunter2-not-in-assets-or-lineage"
ORDERS, BILLING = 30, 10


def _config(tmp_path: Path, backup: str) -> Path:
    """The source only in an Airflow connection; the replicate DAG runs once when unpaused."""
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = primary, backup\n"
        "primary.bootstrap.servers = 127.0.0.1:1\n"
        "primary.airflow.connection.id = primary_kafka\n"
        f"backup.bootstrap.servers = {backup}\n"
        "primary->backup.enabled = true\n"
        "primary->backup.topics = orders|billing\n"
        "primary->backup.mirrorflow.replicate.schedule = @once\n" + SINGLE_BROKER
    )
    return path


def _dags_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "dags"
    folder.mkdir()
    shutil.copy(PROJECT_ROOT / "dags" / "mirrorflow_dags.py", folder)
    shutil.copy(EXAMPLE, folder)
    return folder


def _runs(server: AirflowServer, dag_id: str) -> list[dict]:
    return server.api(f"/api/v2/dags/{dag_id}/dagRuns?order_by=run_after")["dag_runs"]


def _events(server: AirflowServer) -> dict[str, list[dict]]:
    """The Asset events the replicate DAG's runs emitted, per run. (An Asset no DAG names, such
    as primary.billing here, is stored but not active: the assets list leaves it out.)"""
    found: dict[str, list[dict]] = {}
    for event in server.api(f"/api/v2/assets/events?source_dag_id={REPLICATE}&limit=100")["asset_events"]:
        found.setdefault(event["source_run_id"], []).append(event)
    return found


def _lineage(path: Path, job: str) -> list[dict]:
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if e.get("job", {}).get("name") == job]


@pytest.mark.timeout(600)
def test_a_dag_on_a_replicated_topic_runs_after_copies_only_and_lineage_names_each_topic(
    kafka_clusters, tmp_path
) -> None:
    primary, backup = kafka_clusters(2)
    create_topics(primary.bootstrap, ("orders", 2), ("billing", 1))
    produce(primary.bootstrap, "orders", [{"value": b"o%d" % i, "partition": i % 2} for i in range(ORDERS)])
    produce(primary.bootstrap, "billing", [{"value": b"b%d" % i} for i in range(BILLING)])
    lineage_file = tmp_path / "openlineage.jsonl"
    server = AirflowServer(
        AirflowHome(tmp_path / "airflow"),
        free_port(),
        env={
            "MIRRORFLOW_CONFIG": str(_config(tmp_path, backup.bootstrap)),
            "AIRFLOW__CORE__DAGS_FOLDER": str(_dags_folder(tmp_path)),
            "AIRFLOW_CONN_PRIMARY_KAFKA": json.dumps(
                {
                    "conn_type": "kafka",
                    "extra": {"bootstrap.servers": primary.bootstrap, "ssl.key.password": SECRET},
                }
            ),
            "AIRFLOW_CONN_KAFKA_BACKUP": json.dumps(
                {"conn_type": "kafka", "extra": {"bootstrap.servers": backup.bootstrap}}
            ),
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                {"type": "file", "log_file_path": str(lineage_file), "append": True}
            ),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": "mirrorflow-e2e",
        },
    )
    orders_uri = f"kafka://{backup.bootstrap}/primary.orders"
    billing_uri = f"kafka://{backup.bootstrap}/primary.billing"
    with server:
        server.wait_healthy(180)
        until(
            "the replicate and the example DAG are parsed",
            120,
            lambda: (
                {REPLICATE, CONSUMER} <= {d["dag_id"] for d in server.api("/api/v2/dags?limit=100")["dags"]}
            ),
        )
        # The consumer first: an event reaches the DAGs that are unpaused when it is emitted.
        for dag_id in (CONSUMER, REPLICATE):
            server.api(f"/api/v2/dags/{dag_id}", method="PATCH", body={"is_paused": False})

        # The @once run copies both topics; the consumer runs on the orders event.
        copy_run = until("the replicate DAG's run starts", 60, lambda: _runs(server, REPLICATE))[0][
            "dag_run_id"
        ]
        wait_run(server, REPLICATE, copy_run, 240)
        consumed = until("the example DAG runs on the orders event", 120, lambda: _runs(server, CONSUMER))
        wait_run(server, CONSUMER, consumed[0]["dag_run_id"], 120)
        read = xcom(server, CONSUMER, consumed[0]["dag_run_id"], "read_new_orders")
        assert read["records"] == ORDERS and read["runs"] == [{"run_id": copy_run, "records": ORDERS}]
        last = {str(p): read_all(backup.bootstrap, "primary.orders", p)[-1].offset for p in range(2)}
        assert read["read_up_to"] == last

        events = {e["uri"]: e for e in _events(server)[copy_run]}
        assert set(events) == {orders_uri, billing_uri}
        extra = events[orders_uri]["extra"]
        assert events[orders_uri]["source_task_id"] == "report"
        assert extra["source"] == f"kafka://{primary.bootstrap}/orders"
        assert (extra["records"], extra["partitions"], extra["flow"]) == (ORDERS, 2, "primary->backup")
        assert {p: o["target"] for p, o in extra["last_offsets"].items()} == last
        assert {p: o["source"] for p, o in extra["last_offsets"].items()} == {"0": 14, "1": 14}
        assert events[billing_uri]["extra"]["records"] == BILLING

        # An idle run: nothing new on the source, so no event and no run of the consumer.
        idle = server.api(f"/api/v2/dags/{REPLICATE}/dagRuns", method="POST", body={"logical_date": None})
        wait_run(server, REPLICATE, idle["dag_run_id"], 240)
        report = server.api(run_path(REPLICATE, idle["dag_run_id"]) + "/taskInstances/report")
        assert report["state"] == "success"
        assert idle["dag_run_id"] not in _events(server)
        assert server.api(f"/api/v2/dags/{CONSUMER}/assets/queuedEvents")["queued_events"] == []
        assert len(_runs(server, CONSUMER)) == 1
        idle_run = idle["dag_run_id"]

    assert SECRET not in json.dumps(events)
    assert SECRET not in "".join(p.read_text(errors="replace") for p in server.logs.rglob("*.log"))
    assert SECRET not in lineage_file.read_text()
    copies = _lineage(lineage_file, f"{REPLICATE}.copy")
    by_run = {}
    for event in copies:
        run_facet = event["run"]["facets"].get("mirrorflow_run", {})
        by_run.setdefault((run_facet.get("runId"), event["eventType"]), event)
    for run_id, records in (
        (copy_run, {"orders": ORDERS, "billing": BILLING}),
        (idle_run, {"orders": 0, "billing": 0}),
    ):
        start, complete = by_run[(run_id, "START")], by_run[(run_id, "COMPLETE")]
        for event in (start, complete):
            assert sorted((d["namespace"], d["name"]) for d in event["inputs"]) == [
                (f"kafka://{primary.bootstrap}", "billing"),
                (f"kafka://{primary.bootstrap}", "orders"),
            ]
            assert sorted((d["namespace"], d["name"]) for d in event["outputs"]) == [
                (f"kafka://{backup.bootstrap}", "primary.billing"),
                (f"kafka://{backup.bootstrap}", "primary.orders"),
            ]
            flow = event["job"]["facets"]["mirrorflow_flow"]
            assert (flow["flow"], flow["sourceNamespace"]) == (
                "primary->backup",
                f"kafka://{primary.bootstrap}",
            )
        written = {
            d["name"].removeprefix("primary."): d["outputFacets"]["outputStatistics"]["rowCount"]
            for d in complete["outputs"]
        }
        assert written == records, run_id
        run_facet = complete["run"]["facets"]["mirrorflow_run"]
        assert (run_facet["topics"], run_facet["topicsLeftOut"]) == (2, 0)
