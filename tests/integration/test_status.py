"""Replication status on a real three-cluster chain A->B->C: MirrorClient's answers, heartbeat
ages, last runs, and the `mirrorflow status` command."""

from __future__ import annotations

import json
import re
import socket
import time

from click.testing import CliRunner

from mirrorflow.airflow.status_flows import PageView
from mirrorflow.airflow.status_page import render_content
from mirrorflow.cli import main
from mirrorflow.config import load_config
from mirrorflow.control.heartbeats import emit_heartbeats
from mirrorflow.control.mirror_client import MirrorClient
from mirrorflow.control.mirror_status import mirror_status
from mirrorflow.mm2.formats import Heartbeat

from .kafkatools import create_topics, produce, read_all
from .mirror_setup import mm2_config, mm2_text, replicate_once


def newest_heartbeat(bootstrap: str, topic: str) -> int:
    return max(Heartbeat.decode(r.key, r.value).timestamp_ms for r in read_all(bootstrap, topic))


def test_chain_status(kafka_clusters, tmp_path) -> None:
    a, b, c = kafka_clusters(3)
    config = mm2_config([a, b, c], ["A->B", "B->C"])
    # MM2 runs a heartbeat herder for every pair (heartbeats are on by default).
    assert len(config.heartbeat_flows) == 6
    create_topics(a.bootstrap, ("orders", 1))
    produce(a.bootstrap, "orders", [{"value": f"{i}".encode()} for i in range(5)])
    emit_heartbeats(config.heartbeat_flows)
    first = replicate_once(config, "A", "B", "run-ab")
    replicate_once(config, "B", "C", "run-bc")
    assert first["topics"]["orders"]["records"] == 5

    on_c = MirrorClient.for_cluster(config, "C")
    assert on_c.replication_hops("A") == 2
    assert on_c.replication_hops("B") == 1
    assert on_c.replication_hops("C") == -1
    assert on_c.upstream_clusters() == {"A", "B"}
    assert on_c.heartbeat_topics() == {"heartbeats", "B.heartbeats", "B.A.heartbeats"}
    assert on_c.remote_topics("B") == {"B.heartbeats", "B.A.heartbeats", "B.A.orders"}
    assert on_c.checkpoint_topics() == set()

    status = mirror_status(config)
    c_status = status.cluster("C")
    assert c_status.error is None
    upstream = {u.alias: u for u in c_status.upstreams}
    assert (upstream["A"].hops, upstream["A"].via) == (2, "B.A.heartbeats")
    assert upstream["A"].last_heartbeat_ms == newest_heartbeat(c.bootstrap, "B.A.heartbeats")
    assert upstream["A"].age_s >= 0
    assert upstream["B"].hops == 1
    # B's freshest proof is whichever of B.heartbeats / B.A.heartbeats holds the newest beat.
    assert upstream["B"].last_heartbeat_ms == max(
        newest_heartbeat(c.bootstrap, "B.heartbeats"), newest_heartbeat(c.bootstrap, "B.A.heartbeats")
    )
    assert set(c_status.heartbeat_jobs) == {"A->C", "B->C"}
    assert c_status.remote_topics == {"B": ["B.A.heartbeats", "B.A.orders", "B.heartbeats"]}
    assert status.cluster("A").upstreams == []
    assert [u.alias for u in status.cluster("B").upstreams] == ["A"]

    # The page colours each upstream's newest heartbeat against the time one needs to arrive:
    # A's emit interval (1 s) plus the A->B and B->C schedules (5 min each): all fresh here.
    page = render_content(
        PageView(status, {"refresh_interval_s": 15.0}, [], status.generated_ms, config=config)
    )
    c_rows = re.findall(r"<tr><td>C</td>(.*?)</tr>", page)
    assert len(c_rows) == 2 and all('<span class="badge ok"' in row for row in c_rows), c_rows
    assert "newest heartbeat: expected every 10 min; green under 30 min" in c_rows[0]

    runs = {f.flow: f for f in status.flows}
    assert set(runs) == {"A->B", "B->C"}
    assert runs["A->B"].last_run["run_id"] == "run-ab"
    assert runs["A->B"].last_run["topics"]["orders"]["records"] == 5
    assert runs["B->C"].last_run["run_id"] == "run-bc"
    assert runs["B->C"].last_run_ms is not None

    # A later run's summary replaces the earlier one. It copied nothing (issue 23: after an idle
    # run every figure is 0), so the last run that copied records is kept beside its figures, and
    # carried forward by the next idle run.
    replicate_once(config, "A", "B", "run-ab-2")
    later = mirror_status(config, clusters=["B"]).flow("A->B")
    assert later.last_run["run_id"] == "run-ab-2" and later.last_run["totals"]["records"] == 0
    copied = first["totals"]["records"]
    assert (later.last_run["last_copy"]["run_id"], later.last_run["last_copy"]["records"]) == (
        "run-ab",
        copied,
    )
    replicate_once(config, "A", "B", "run-ab-3")
    status = mirror_status(config, clusters=["B"])
    latest = status.flow("A->B").last_run
    assert (latest["run_id"], latest["last_copy"]["run_id"]) == ("run-ab-3", "run-ab")
    page = render_content(
        PageView(status, {"refresh_interval_s": 15.0}, [], status.generated_ms, config=config)
    )
    assert f"{copied:,} record(s) <time" in page

    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b, c], ["A->B", "B->C"]))
    shown = CliRunner().invoke(main, ["status", str(path), "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    hops = {
        u["alias"]: u["hops"] for u in next(x for x in data["clusters"] if x["alias"] == "C")["upstreams"]
    }
    assert hops == {"A": 2, "B": 1}
    table = CliRunner().invoke(main, ["status", str(path), "--cluster", "C"])
    assert table.exit_code == 0, table.output
    assert "B.A.heartbeats" in table.output and "run-bc" in table.output


def test_unreachable_cluster_is_reported_and_the_rest_still_shown(kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    config = load_config(
        f"clusters = A, B, D\nA.bootstrap.servers = {a.bootstrap}\nB.bootstrap.servers = {b.bootstrap}\n"
        f"D.bootstrap.servers = 127.0.0.1:{dead}\nA->B.enabled = true\nheartbeats.topic.replication.factor = 1\n"
    )
    emit_heartbeats([config.flow("A", "B")])
    status = mirror_status(config, timeout_s=2.0, clusters=["B", "D"])
    assert status.cluster("D").error
    assert status.cluster("B").error is None
    assert set(status.cluster("B").heartbeat_jobs) == {"A->B"}
    assert status.flow("A->B").last_run is None


def test_a_host_that_does_not_resolve_is_said_at_once(kafka_clusters) -> None:
    """`mirrorflow status` and the status page name DNS as the reason, without the whole wait."""
    (a,) = kafka_clusters(1)
    config = load_config(
        f"clusters = A, E\nA.bootstrap.servers = {a.bootstrap}\nE.bootstrap.servers = no-such-host.invalid:9092\n"
        "A->E.enabled = true\n"
    )
    started = time.monotonic()
    status = mirror_status(config, timeout_s=10.0)
    assert time.monotonic() - started < 8.0
    error = status.cluster("E").error
    assert error and "cannot resolve host" in error and "no-such-host.invalid" in error
    assert status.cluster("A").error is None
    assert status.flow("A->E").error  # nothing of a flow into it can be read, said once


def test_status_rejects_an_unknown_cluster(tmp_path, kafka_clusters) -> None:
    a, b = kafka_clusters(2)
    path = tmp_path / "mm2.properties"
    path.write_text(mm2_text([a, b], ["A->B"]))
    result = CliRunner().invoke(main, ["status", str(path), "--cluster", "Z"])
    assert result.exit_code == 2
    assert "Z not in clusters (A, B)" in result.output
