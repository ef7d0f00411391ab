"""The copy operator hands Airflow-connection credentials to spark-submit only through the
process environment, and refuses deploy modes that would turn them into Spark conf."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import psutil
import pytest
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk.exceptions import AirflowException

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


def _fake_spark_submit(tmp_path, monkeypatch: pytest.MonkeyPatch) -> tuple[MirrorflowCopyOperator, object]:
    """An operator whose `spark-submit` is a real process that says it started (its pid) and then
    waits a minute: what a stop has to end, without a JVM."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    started = tmp_path / "started"
    script = bin_dir / "spark-submit"
    script.write_text(f"#!/bin/sh\necho $$ > {started}\nexec sleep 60\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
        "A->B.enabled = true\n"
    )
    op = MirrorflowCopyOperator(
        task_id="copy",
        config_path=str(config),
        source="A",
        target="B",
        plan_offset="7",
        conn_id="spark_local",
    )
    return op, started


def test_a_stop_asked_before_spark_submit_started_starts_nothing(tmp_path, monkeypatch) -> None:
    # Airflow calls on_kill from the task's SIGTERM handler, which can come before execute got
    # to spark-submit (at shutdown, as the task starts): the application must not run after it.
    op, started = _fake_spark_submit(tmp_path, monkeypatch)
    op.on_kill()
    with pytest.raises(
        AirflowException, match="asked to stop .*before spark-submit started; nothing was submitted"
    ):
        op.execute({})
    assert not started.exists()


def test_a_stop_asked_as_spark_submit_starts_kills_it(tmp_path, monkeypatch) -> None:
    # The request comes after execute's check, before the provider keeps the process it starts
    # (its on_kill would find nothing to kill): the spark-submit started is killed at once.
    op, _ = _fake_spark_submit(tmp_path, monkeypatch)
    build_hook = op._get_hook

    def hook_then_stop() -> SparkSubmitHook:
        hook = build_hook()
        op.on_kill()  # the signal, between the check and the provider's Popen
        return hook

    monkeypatch.setattr(op, "_get_hook", hook_then_stop)
    begun = time.monotonic()
    with pytest.raises(AirflowException, match="-9"):
        op.execute({})
    assert time.monotonic() - begun < 30  # not the fake application's minute
    process = op._hook._submit_sp
    assert process.returncode == -9  # started, then killed (possibly before its first line)
    with pytest.raises(psutil.NoSuchProcess):
        psutil.Process(process.pid).status()


def test_a_stop_asked_while_spark_submit_runs_kills_it(tmp_path, monkeypatch) -> None:
    # The provider's own path, kept: a spark-submit under way is killed by on_kill.
    op, started = _fake_spark_submit(tmp_path, monkeypatch)

    def stop_once_started() -> None:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        op.on_kill()

    stopper = threading.Thread(target=stop_once_started)
    stopper.start()
    with pytest.raises(AirflowException, match="-9"):
        op.execute({})
    stopper.join()


SHIPPED = {
    "spark.archives": "/opt/mirrorflow-executor-env.tar.gz#environment",
    "spark.pyspark.python": "./environment/bin/python",
}


def test_the_spark_connection_conf_ships_the_executors_python_and_the_driver_keeps_the_tasks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    extra = {"deploy-mode": "client", "conf": {**SHIPPED, "spark.speculation": "true"}}
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CLUSTER",
        json.dumps({"conn_type": "spark", "host": "spark://master", "port": 7077, "extra": extra}),
    )
    _, conf = _operator("spark_cluster").submit_settings(CREDENTIALS)
    assert {key: conf[key] for key in SHIPPED} == SHIPPED
    assert conf["spark.pyspark.driver.python"] == sys.executable
    assert conf["spark.speculation"] == "false"  # mirrorflow's own setting wins
    hook = SparkSubmitHook(conn_id="spark_cluster", conf=conf)
    command = hook._build_spark_submit_command("app.py")
    assert f"spark.archives={SHIPPED['spark.archives']}" in command

    # A driver Python named in the connection, or in PYSPARK_DRIVER_PYTHON, is kept.
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", "/opt/airflow/bin/python")
    assert _operator("spark_cluster").submit_settings(None)[1]["spark.pyspark.driver.python"] == (
        "/opt/airflow/bin/python"
    )
    extra["conf"]["spark.pyspark.driver.python"] = "/usr/bin/python3.11"
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CLUSTER",
        json.dumps({"conn_type": "spark", "host": "spark://master", "port": 7077, "extra": extra}),
    )
    assert _operator("spark_cluster").submit_settings(None)[1]["spark.pyspark.driver.python"] == (
        "/usr/bin/python3.11"
    )


def test_a_driver_in_the_cluster_runs_the_shipped_python_too(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"deploy-mode": "cluster", "conf": SHIPPED}
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_YARN", json.dumps({"conn_type": "spark", "host": "yarn", "extra": extra})
    )
    _, conf = _operator("spark_yarn").submit_settings(None)
    assert {key: conf[key] for key in SHIPPED} == SHIPPED
    assert "spark.pyspark.driver.python" not in conf


def test_a_spark_connection_conf_that_is_not_properties_is_refused_with_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_BAD",
        json.dumps({"conn_type": "spark", "host": "local[2]", "extra": {"conf": ["spark.archives=x"]}}),
    )
    with pytest.raises(AirflowException, match=r"the extra's conf must be an object of Spark properties"):
        _operator("spark_bad").submit_settings(None)


def test_a_refused_spark_connection_conf_names_its_keys_and_never_its_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A conf's values may be credentials (an object store's secret key): the refusal names the
    properties at fault, not what they hold."""
    conf = {"spark.hadoop.fs.s3a.secret.key": {"value": "s3cr3t-value"}, "spark.archives": "env.tar.gz"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_SECRET",
        json.dumps({"conn_type": "spark", "host": "local[2]", "extra": {"conf": conf}}),
    )
    with pytest.raises(AirflowException) as refused:
        _operator("spark_secret").submit_settings(None)
    assert "spark.hadoop.fs.s3a.secret.key" in str(refused.value)
    assert "s3cr3t-value" not in str(refused.value) and "env.tar.gz" not in str(refused.value)
