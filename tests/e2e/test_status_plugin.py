"""The plugin mounts the status app in Airflow's own api-server app: login enforced on the page
and JSON, metrics open (no token set), numbers read from the clusters by the refresh thread the
first request starts."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from mirrorflow.airflow.settings import PROJECT_ROOT

PROBE = textwrap.dedent(
    """
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
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout
    assert "health 200" in lines
    assert "status 401" in lines and "ui 401" in lines
    assert "metrics 200" in lines
    assert 'mirrorflow_cluster_up{cluster="primary"} 1.0' in lines
    assert 'mirrorflow_cluster_up{cluster="backup"} 1.0' in lines
