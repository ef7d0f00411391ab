"""mirrorflow's connection type in Airflow: the Connections UI's Test (POST /api/v2/connections/test,
what the UI's button calls) runs MirrorflowKafkaHook.test_connection against real clusters, and a
`mirrorflow_kafka` connection gives a flow its credentials like a `kafka` one."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap

from localkafka import Security

PASSWORD = "hook-Secret-42"

PROBE = textwrap.dedent(
    """
    import json, sys
    from fastapi.testclient import TestClient
    from airflow.api_fastapi.app import create_app
    from mirrorflow.config.airflow_connections import fetch_connection_extra

    cases = json.loads(sys.argv[1])
    client = TestClient(create_app())
    token = client.get("/auth/token").json()["access_token"]
    out = {}
    for name, extra in cases.items():
        answer = client.post(
            "/api/v2/connections/test",
            headers={"Authorization": f"Bearer {token}"},
            json={"connection_id": f"probe_{name}", "conn_type": "mirrorflow_kafka", "extra": json.dumps(extra)},
        )
        out[name] = [answer.status_code, answer.json()]
    out["fetched"] = fetch_connection_extra("mf_saved")
    print("RESULT " + json.dumps(out))
    """
)


def test_the_connections_ui_test_button_says_what_is_wrong(airflow_home, local_kafka) -> None:
    kafka = local_kafka(security=Security(listeners=("SASL_PLAINTEXT",), scram_users={"mf": PASSWORD}))
    sasl = kafka.client_config("SASL_PLAINTEXT")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{probe.getsockname()[1]}"
    cases = {
        "plain": {"bootstrap.servers": kafka.bootstrap},
        "sasl": sasl,
        "wrong_password": {**sasl, "sasl.password": "not-" + PASSWORD},
        "down": {"bootstrap.servers": dead},
        "java_key": {**sasl, "sasl.jaas.config": f'x required username="mf" password="{PASSWORD}";'},
        "no_servers": {"security.protocol": "SASL_PLAINTEXT"},
    }
    env = airflow_home.env(
        {
            "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW_CONN_MF_SAVED": json.dumps({"conn_type": "mirrorflow_kafka", "extra": sasl}),
        }
    )
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(cases)], env=env, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))

    for name in cases:
        assert result[name][0] == 200, result[name]
    answers = {name: result[name][1] for name in cases}
    assert answers["plain"]["status"] is True
    assert answers["plain"]["message"].startswith("connected to cluster ")
    assert "1 broker(s)" in answers["plain"]["message"]
    assert answers["sasl"]["status"] is True
    wrong = answers["wrong_password"]
    assert wrong["status"] is False and "did not answer" in wrong["message"]
    assert "Authentication failed" in wrong["message"] or "SASL" in wrong["message"], wrong
    down = answers["down"]
    assert down["status"] is False and dead in down["message"] and "Connection refused" in down["message"]
    java = answers["java_key"]
    assert java["status"] is False and '"sasl.jaas.config"' in java["message"]
    assert '"sasl.username"' in java["message"]
    assert (
        answers["no_servers"]["status"] is False and "bootstrap.servers" in answers["no_servers"]["message"]
    )
    # The password is in none of the answers (the wrong one neither).
    assert PASSWORD not in json.dumps(answers)
    # A flow's `<alias>.airflow.connection.id` may name a mirrorflow_kafka connection.
    assert result["fetched"]["sasl.password"] == PASSWORD
