"""The copy operator hands Airflow-connection credentials to spark-submit only through the
process environment, and refuses deploy modes that would turn them into Spark conf."""

from __future__ import annotations

import json

import pytest

from mirrorflow.airflow.operators import CredentialsWouldLeak, MirrorflowCopyOperator
from mirrorflow.spark.copy_job import CONNECTION_EXTRAS_ENV


def _operator(conn_id: str) -> MirrorflowCopyOperator:
    op = MirrorflowCopyOperator(
        task_id="copy",
        config_path="/cfg.properties",
        source="A",
        target="B",
        plan_offset="7",
        conn_id=conn_id,
    )
    op._runtime_env = {
        "PYSPARK_PYTHON": "python",
        CONNECTION_EXTRAS_ENV: json.dumps({"a": {"sasl.password": "x"}}),
    }
    return op


def test_local_mode_gets_credentials_in_the_environment_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    op = _operator("spark_local")
    hook = op._get_hook()
    assert json.loads(hook._env_vars[CONNECTION_EXTRAS_ENV]) == {"a": {"sasl.password": "x"}}
    command = " ".join(hook._build_spark_submit_command(op.application))
    assert "sasl" not in command and CONNECTION_EXTRAS_ENV not in command
    assert op.application_args == ["--config", "/cfg.properties", "--flow", "A->B", "--plan-offset", "7"]


@pytest.mark.parametrize(
    "connection",
    [
        {"conn_type": "spark", "host": "yarn"},
        {"conn_type": "spark", "host": "spark://master", "port": 7077, "extra": {"deploy-mode": "cluster"}},
    ],
)
def test_remote_drivers_are_refused_while_credentials_exist(
    monkeypatch: pytest.MonkeyPatch, connection
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_REMOTE", json.dumps(connection))
    with pytest.raises(CredentialsWouldLeak, match="config providers"):
        _operator("spark_remote")._get_hook()
