"""The copy operator hands Airflow-connection credentials to spark-submit only through the
process environment, and refuses deploy modes that would turn them into Spark conf."""

from __future__ import annotations

import json

import pytest
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from mirrorflow.airflow.operators import CredentialsWouldLeak, MirrorflowCopyOperator
from mirrorflow.spark.copy_job import CONNECTION_EXTRAS_ENV

CREDENTIALS = json.dumps({"a": {"sasl.password": "x"}})


def _operator(conn_id: str, **kwargs: object) -> MirrorflowCopyOperator:
    return MirrorflowCopyOperator(
        task_id="copy",
        config_path="/cfg.properties",
        source="A",
        target="B",
        plan_offset="7",
        conn_id=conn_id,
        **kwargs,
    )


def test_local_mode_gets_credentials_in_the_environment_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    op = _operator("spark_local", env_vars={"KEEP": "1"})
    env, conf = op.submit_settings(CREDENTIALS)
    assert json.loads(env[CONNECTION_EXTRAS_ENV]) == {"a": {"sasl.password": "x"}}
    assert env["KEEP"] == "1" and env["PYSPARK_PYTHON"]
    assert "sasl" not in json.dumps(conf) and CONNECTION_EXTRAS_ENV not in json.dumps(conf)
    assert "-Dlog4j2.configurationFile=" in conf["spark.driver.extraJavaOptions"]
    # What spark-submit is given on its command line (the provider's own builder, as it runs it).
    hook = SparkSubmitHook(
        conn_id="spark_local", conf=conf, env_vars=env, application_args=op.application_args
    )
    command = " ".join(hook._build_spark_submit_command(op.application))
    assert "sasl" not in command and CONNECTION_EXTRAS_ENV not in command
    assert op.application_args == ["--config", "/cfg.properties", "--flow", "A->B", "--plan-offset", "7"]
    # The operator's own (rendered) fields never hold the credentials.
    assert op.env_vars == {"KEEP": "1"}


@pytest.mark.parametrize(
    ("connection", "deploy_mode"),
    [
        ({"conn_type": "spark", "host": "yarn"}, None),
        ({"conn_type": "spark", "host": "k8s://https://api:6443"}, None),
        (
            {
                "conn_type": "spark",
                "host": "spark://master",
                "port": 7077,
                "extra": {"deploy-mode": "cluster"},
            },
            None,
        ),
        ({"conn_type": "spark", "host": "spark://master", "port": 7077}, "cluster"),
    ],
)
def test_remote_drivers_are_refused_while_credentials_exist(
    monkeypatch: pytest.MonkeyPatch, connection, deploy_mode
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_REMOTE", json.dumps(connection))
    op = _operator("spark_remote", **({"deploy_mode": deploy_mode} if deploy_mode else {}))
    with pytest.raises(CredentialsWouldLeak, match="config providers"):
        op.submit_settings(CREDENTIALS)
    # Without credentials from Airflow a remote driver is fine, and keeps its own logging.
    env, conf = op.submit_settings(None)
    assert CONNECTION_EXTRAS_ENV not in env and "spark.driver.extraJavaOptions" not in conf


def test_a_spark_connection_that_cannot_be_read_counts_as_remote() -> None:
    with pytest.raises(CredentialsWouldLeak, match="defaults to YARN"):
        _operator("no_such_spark_connection").submit_settings(CREDENTIALS)
