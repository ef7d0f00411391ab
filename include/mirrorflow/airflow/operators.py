"""The Spark steps: SparkSubmitOperator running one of mirrorflow's Spark applications for one
plan, spark_apps/mirrorflow_copy.py (MirrorflowCopyOperator), spark_apps/mirrorflow_window.py
(MirrorflowWindowOperator, a micro-batch window) or spark_apps/mirrorflow_verify.py
(MirrorflowVerifyOperator). They take the same arguments and get credentials the same way.

Credentials kept in Airflow connections reach the Spark driver only through the spark-submit
process environment (client and local deploy modes), set when the task runs, so they are never
in the task's arguments, its rendered template fields, the spark-submit command line or the
Spark UI. Modes that would turn environment variables into Spark conf (YARN, Kubernetes,
cluster deploy) are refused while such credentials exist; give those clusters the credentials
through config providers instead.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException

from mirrorflow.airflow.settings import COPY_APPLICATION, VERIFY_APPLICATION, WINDOW_APPLICATION
from mirrorflow.airflow.spark_output import SparkOutputLog, failure_text
from mirrorflow.airflow.task_errors import record_error
from mirrorflow.config import ConfigError, load_config
from mirrorflow.config.airflow_connections import fetch_connection_extra
from mirrorflow.config.properties import parse_properties
from mirrorflow.config.secrets import is_secret_key
from mirrorflow.spark.copy_job import CONNECTION_EXTRAS_ENV

# A speculative duplicate of a copy task would only fence its twin, but costs a second copy;
# one of a verify task, a second read of both clusters.
SPARK_CONF = {"spark.speculation": "false"}
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
EXECUTOR_PYTHON = "spark.pyspark.python"
DRIVER_PYTHON = "spark.pyspark.driver.python"
# Spark logs at INFO by default: ~80 lines of SparkContext, BlockManager and DAGScheduler per run
# in the task log, around the job's own lines. This file keeps WARN and ERROR (and spark-submit's
# submission lines, which SparkSubmitHook reads in cluster modes).
DRIVER_LOG4J2 = Path(__file__).resolve().parents[1] / "spark" / "log4j2.properties"


def spark_defaults_value(key: str, environ: dict[str, str] | None = None) -> str | None:
    """`key` as spark-submit would read it from spark-defaults.conf ($SPARK_CONF_DIR, else
    $SPARK_HOME/conf), or None."""
    env = os.environ if environ is None else environ
    conf_dir = env.get("SPARK_CONF_DIR") or (env.get("SPARK_HOME") and str(Path(env["SPARK_HOME"]) / "conf"))
    path = Path(conf_dir) / "spark-defaults.conf" if conf_dir else None
    if path is None or not path.is_file():
        return None
    try:
        return parse_properties(path.read_text(errors="replace"), str(path)).values.get(key)
    except ConfigError:
        return None  # spark-submit itself will say what is wrong with it


def driver_logging_conf(conf: dict[str, Any], environ: dict[str, str] | None = None) -> dict[str, Any]:
    """`conf` with the driver logging at WARN through DRIVER_LOG4J2, added to the driver's Java
    options (the conf's, else spark-defaults.conf's, which a --conf would otherwise replace);
    unchanged when they name a log4j2 configuration of their own. Only for a driver on this
    machine (client or local mode): a remote driver has no such file."""
    given = conf.get(DRIVER_JAVA_OPTIONS)
    if given is None:
        given = spark_defaults_value(DRIVER_JAVA_OPTIONS, environ)
    options = str(given or "").strip()
    if "-Dlog4j2.configurationFile=" in options:
        return conf
    ours = f"-Dlog4j2.configurationFile={DRIVER_LOG4J2.as_uri()}"
    return {**conf, DRIVER_JAVA_OPTIONS: f"{options} {ours}".strip()}


class CredentialsWouldLeak(RuntimeError):
    pass


class MirrorflowSparkOperator(SparkSubmitOperator):
    """spark-submit APPLICATION for the plan at `plan_offset` (a template, usually an XCom pull)."""

    APPLICATION: Path
    NAME_PREFIX = "mirrorflow"

    def __init__(
        self,
        *,
        config_path: str,
        source: str,
        target: str,
        plan_offset: str,
        conn_id: str = "spark_default",
        conf: dict[str, Any] | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            application=str(self.APPLICATION),
            conn_id=conn_id,
            name=name or f"{self.NAME_PREFIX}-{source}-{target}",
            conf={**SPARK_CONF, **(conf or {})},
            application_args=[
                "--config",
                config_path,
                "--flow",
                f"{source}->{target}",
                "--plan-offset",
                plan_offset,
            ],
            **kwargs,
        )
        self.config_path = config_path
        self.source = source
        self.target = target
        self.spark_conn_id = conn_id
        self.deploy_mode = kwargs.get("deploy_mode")
        self._output: SparkOutputLog | None = None
        self._asked_to_stop = False

    def execute(self, context: Any) -> None:
        extras = self._connection_extras()
        env, conf = self.submit_settings(json.dumps(extras) if extras else None)
        # Set for this submission only, and put back after it: the rendered values are what
        # Airflow stores and shows, and they must never hold the credentials.
        rendered_env, rendered_conf = self.env_vars, self.conf
        self.env_vars, self.conf = env, conf
        try:
            self._refuse_if_asked_to_stop("before spark-submit started; nothing was submitted")
            super().execute(context)
        except Exception as exc:
            lost = self._output.lost if self._output is not None else None
            if lost is not None:
                # The copy waited out the unreachable limit already: no retry (the next run is
                # one), and the task's error is the sentence alone.
                from airflow.sdk.exceptions import AirflowFailException

                record_error(lost)
                raise AirflowFailException(lost) from None
            said = list(self._output.errors) if self._output is not None else []
            record_error(failure_text(exc, said))
            raise
        finally:
            self.env_vars, self.conf = rendered_env, rendered_conf

    def on_kill(self) -> None:
        """Airflow's request to stop (the task's SIGTERM handler). The provider's on_kill kills a
        spark-submit that runs; one asked before it started would start it afterwards and run
        the whole application (a window, for an hour). The flag makes execute refuse to start,
        and the hook kill a spark-submit started in the few lines between that check and the
        provider keeping its process (see _get_hook). Without a hook nothing runs yet, and the
        provider's on_kill would make one: a connection lookup from a signal handler."""
        self._asked_to_stop = True
        if self._hook is not None:
            super().on_kill()

    def _refuse_if_asked_to_stop(self, when: str) -> None:
        if self._asked_to_stop:
            raise AirflowException(f"{self.task_id}: the task was asked to stop (on_kill) {when}")

    def _get_hook(self) -> SparkSubmitHook:
        """The provider's hook, its output lines logged at their own levels (spark_output), and a
        spark-submit it starts after a stop request killed at once: the hook keeps its process in
        `_submit_sp` and then reads its output, so a request that came before `_submit_sp` was
        set is seen here, and one after it finds the process for the provider's on_kill."""
        hook = super()._get_hook()
        self._output = SparkOutputLog(hook.log)
        hook._log = self._output
        read_output = hook._process_spark_submit_log

        def read_unless_asked_to_stop(itr: Any) -> Any:
            process = hook._submit_sp
            if self._asked_to_stop and process is not None and process.poll() is None:
                self.log.info("the task was asked to stop as spark-submit started: killing it")
                process.kill()
            return read_output(itr)

        hook._process_spark_submit_log = read_unless_asked_to_stop
        return hook

    def submit_settings(self, connection_extras: str | None) -> tuple[dict[str, str], dict[str, Any]]:
        """The environment and Spark conf spark-submit gets: the rendered ones, plus the Python
        Spark's workers run, the Airflow-connection credentials (JSON, environment only), the Spark
        connection's `conf` (a shipped environment: spark.archives, spark.pyspark.python) and, for
        a driver on this machine, this task's Python and WARN-level logging. Refuses a remote
        driver while credentials exist (its environment would travel as Spark conf)."""
        spark = read_spark_connection(self.spark_conn_id, self.deploy_mode)
        if connection_extras is not None and spark.remote:
            raise CredentialsWouldLeak(
                f"spark connection {self.spark_conn_id!r} runs the driver remotely ({spark.where}), where "
                "credentials from Airflow connections could only travel as Spark conf. Use client deploy "
                "mode, or give the clusters their credentials with config providers (${env:...}, "
                "${file:...}) resolvable on the cluster."
            )
        env = {**(self.env_vars or {}), "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
        if connection_extras is not None:
            env[CONNECTION_EXTRAS_ENV] = connection_extras
        # The connection's conf first: the operator's own (spark.speculation=false) wins.
        conf = {**spark.conf, **(self.conf or {})}
        if spark.driver_here:
            conf = driver_python_conf(conf)
        return env, conf if spark.remote else driver_logging_conf(conf)

    # OpenLineage (apache-airflow-providers-openlineage calls these when it is configured): the
    # topics this run reads and writes, from the rendered arguments' plan (mirrorflow.airflow.lineage).
    def get_openlineage_facets_on_start(self) -> Any:
        from mirrorflow.airflow.lineage import StepRun, copy_on_start

        return copy_on_start(StepRun.from_args(self.application_args))

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from mirrorflow.airflow.lineage import StepRun, copy_on_complete

        return copy_on_complete(StepRun.from_args(self.application_args))

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """The plan's datasets: a failed copy may have left no report to count from."""
        return self.get_openlineage_facets_on_start()

    def _connection_extras(self) -> dict[str, dict[str, Any]]:
        from airflow.sdk.log import mask_secret

        flow = load_config(self.config_path).flow(self.source, self.target)
        extras = {}
        for side in ("source", "target"):
            conn_id = flow.airflow_connection_id(side)
            if conn_id and conn_id not in extras:
                extra = fetch_connection_extra(conn_id)
                for key, value in extra.items():
                    if is_secret_key(key):
                        mask_secret(str(value), key)
                extras[conn_id] = extra
        return extras


@dataclass(frozen=True)
class SparkConnection:
    """What mirrorflow reads from the Spark connection, as SparkSubmitHook reads it."""

    remote: bool
    """spark-submit's environment would travel as Spark conf: YARN or Kubernetes masters, or
    cluster deploy mode."""
    where: str
    driver_here: bool
    """The driver is a process of this task (client or local deploy mode)."""
    conf: dict[str, Any]
    """The extra's `conf`: Spark properties for every job run through the connection."""


def _conf_problem(conf: object) -> str:
    """What is wrong with a connection's conf, by key and type only: its values may be secrets."""
    if not isinstance(conf, dict):
        return f"it is a JSON {type(conf).__name__}"
    bad = sorted(str(key) for key, value in conf.items() if not isinstance(value, str | int | float | bool))
    return "these properties have values that are not strings, numbers or booleans: " + ", ".join(bad)


def read_spark_connection(conn_id: str, deploy_mode: str | None) -> SparkConnection:
    """The Spark connection's placement of the driver (the operator's deploy mode, else the
    extra's `deploy-mode`) and its `conf`. A connection that cannot be read is YARN to the hook,
    so remote here too."""
    from airflow.sdk import BaseHook

    try:
        connection = BaseHook.get_connection(conn_id)
    except Exception:  # noqa: BLE001 - the hook then defaults to YARN: treated as remote, never as local
        return SparkConnection(
            True, f"connection {conn_id!r} not found: SparkSubmitHook defaults to YARN", False, {}
        )
    master = f"{connection.conn_type or ''}://{connection.host or ''}".lower()
    extra = connection.extra_dejson
    mode = deploy_mode or extra.get("deploy-mode") or "client"
    conf = extra.get("conf") or {}
    if not isinstance(conf, dict) or not all(
        isinstance(value, str | int | float | bool) for value in conf.values()
    ):
        raise AirflowException(
            f"spark connection {conn_id!r}: the extra's conf must be an object of Spark properties "
            f'with plain values, such as {{"spark.pyspark.python": "./environment/bin/python"}}; '
            + _conf_problem(conf)
        )
    return SparkConnection(
        remote="yarn" in master or "k8s" in master or mode == "cluster",
        where=f"{connection.host or connection.conn_type}, deploy mode {mode}",
        driver_here=mode != "cluster",
        conf=conf,
    )


def driver_python_conf(conf: dict[str, Any], environ: dict[str, str] | None = None) -> dict[str, Any]:
    """`conf` with the driver on this machine running this task's interpreter (or
    PYSPARK_DRIVER_PYTHON) when it names the executors' Python (spark.pyspark.python, here or in
    spark-defaults.conf) and not the driver's: Spark starts the driver with the executors' Python
    otherwise, and a shipped environment's ./environment/bin/python exists only on executors."""
    if DRIVER_PYTHON in conf or spark_defaults_value(DRIVER_PYTHON, environ) is not None:
        return conf
    if conf.get(EXECUTOR_PYTHON) is None and spark_defaults_value(EXECUTOR_PYTHON, environ) is None:
        return conf
    env = os.environ if environ is None else environ
    return {**conf, DRIVER_PYTHON: env.get("PYSPARK_DRIVER_PYTHON") or sys.executable}


class MirrorflowCopyOperator(MirrorflowSparkOperator):
    """The copy step: spark_apps/mirrorflow_copy.py (mirrorflow.spark.copy_job)."""

    APPLICATION = COPY_APPLICATION


class MirrorflowWindowOperator(MirrorflowSparkOperator):
    """The copy step of a micro-batch flow: one window, spark_apps/mirrorflow_window.py
    (mirrorflow.spark.window_job), running until the next window has taken its slots over."""

    APPLICATION = WINDOW_APPLICATION
    NAME_PREFIX = "mirrorflow-window"


class MirrorflowVerifyOperator(MirrorflowSparkOperator):
    """The compare step of a verification: spark_apps/mirrorflow_verify.py (mirrorflow.spark.verify_job)."""

    APPLICATION = VERIFY_APPLICATION
    NAME_PREFIX = "mirrorflow-verify"

    def get_openlineage_facets_on_start(self) -> Any:
        from mirrorflow.airflow.lineage import StepRun, verify_lineage

        return verify_lineage(StepRun.from_args(self.application_args))

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return self.get_openlineage_facets_on_start()
