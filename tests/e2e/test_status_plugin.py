"""The plugin mounts the status app in Airflow's own api-server app: login enforced on the page
and JSON, metrics open (no token set), numbers read from the clusters by the refresh thread the
first request starts, and Airflow's metadata DB read for the DAGs the page waits on: paused ones
are named, with what to do. A flow's copy and its verification each have their own badge."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from mirrorflow.airflow.local import AIRFLOW
from mirrorflow.airflow.settings import PROJECT_ROOT
from mirrorflow.airflow.status_links import paused_text, upstream_heartbeat_dags
from mirrorflow.config import load_config

PROBE = textwrap.dedent(
    """
    import json
    import time
    from fastapi.testclient import TestClient
    from airflow.api_fastapi.app import create_app
    client = TestClient(create_app())
    print("health", client.get("/api/v2/monitor/health").status_code)
    print("status", client.get("/mirrorflow/status").status_code)
    print("ui", client.get("/mirrorflow/ui").status_code)
    # The mounted app gets no startup event: its first request starts the refresh thread, and
    # requests answer "collecting" until the first snapshot is read.
    deadline = time.monotonic() + 60
    while True:
        metrics = client.get("/mirrorflow/metrics")
        if "mirrorflow_status_ready 1.0" in metrics.text or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    print("metrics", metrics.status_code)
    print(metrics.text)
    # Logged in as the UI's user would be (a JWT from the api-server's own auth manager).
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="ADMIN"))
    headers = {"Authorization": "Bearer " + token}
    print("HINTS " + json.dumps(client.get("/mirrorflow/status", headers=headers).json()["hints"]))
    print("PAGE " + json.dumps(client.get("/mirrorflow/ui", headers=headers).text))
    """
)


def test_plugin_serves_status_inside_the_api_server(airflow_home, kafka_clusters) -> None:
    primary, backup = kafka_clusters(2)
    env = airflow_home.env(
        {
            "MIRRORFLOW_CONFIG": str(PROJECT_ROOT / "include" / "config" / "demo.properties"),
            "MIRRORFLOW_DEMO_PRIMARY": primary.bootstrap,
            "MIRRORFLOW_DEMO_BACKUP": backup.bootstrap,
        }
    )
    env.pop("MIRRORFLOW_METRICS_TOKEN", None)
    # The DAGs as the dag-processor stores them: generated DAGs start paused; pause the ones the
    # page waits on explicitly (an earlier test of this Airflow home may have run them).
    config = load_config(str(PROJECT_ROOT / "include" / "config" / "demo.properties"), env=env)
    replicate = "mirrorflow__primary__backup__replicate"
    heartbeats = upstream_heartbeat_dags(config, "backup")
    subprocess.run([AIRFLOW, "dags", "reserialize"], env=env, check=True, capture_output=True, timeout=300)
    for dag in (replicate, *heartbeats):
        subprocess.run([AIRFLOW, "dags", "pause", dag], env=env, check=True, capture_output=True, timeout=120)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout
    assert "health 200" in lines
    assert "status 401" in lines and "ui 401" in lines
    assert "metrics 200" in lines
    assert 'mirrorflow_cluster_up{cluster="primary"} 1.0' in lines
    assert 'mirrorflow_cluster_up{cluster="backup"} 1.0' in lines

    hints = json.loads(next(line[6:] for line in lines.splitlines() if line.startswith("HINTS ")))
    page = json.loads(next(line[5:] for line in lines.splitlines() if line.startswith("PAGE ")))
    texts = [hint["text"] for hint in hints]
    assert f"primary->backup: {paused_text('replication', replicate)}" in texts
    # The clusters are new: no heartbeat reached backup, and the page says which DAG to unpause.
    assert heartbeats, "a heartbeat DAG writes into primary, which primary->backup copies"
    for dag in heartbeats:
        assert f"upstreams of backup: {paused_text('heartbeat', dag)}" in texts
        assert paused_text("heartbeat", dag) in page
    assert "no upstream clusters" in page
    assert '<span class="badge warn" title="unpause it in Airflow">paused</span>' in page
    # Two badges per flow, one meaning each: whether it copies (no run yet), and the verdict of its
    # last verification (none); the heartbeats written into each cluster have a table of their own.
    assert "<th>Copy</th><th>Verification</th>" in page
    assert ">no run yet</span>" in page and ">never verified</span>" in page
    assert "<h2>Heartbeats written into each cluster</h2>" in page
    assert "<strong>Copy</strong>" in page and "<strong>Verification</strong>" in page
