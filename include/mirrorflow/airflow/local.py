"""Run mirrorflow's DAGs on one machine with `airflow dags test`, as the demo and the end-to-end
tests do: a SQLite Airflow home migrated once, the real DAG file, the real spark-submit with Spark
in local mode (`local[2,3]`: two cores, failed tasks retried), and the mirrorflow config and
cluster addresses passed through the environment.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mirrorflow.airflow.settings import PROJECT_ROOT as ROOT

BIN = Path(sys.executable).parent
AIRFLOW = str(BIN / "airflow")


@dataclass
class DagRunResult:
    dag_id: str
    returncode: int
    state: str | None
    log: str
    run_id: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.returncode == 0 and self.state == "success"


class AirflowHome:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.home.mkdir(parents=True, exist_ok=True)

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2,3]"}),
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYSPARK_PYTHON": sys.executable,
        }
        env.update(extra or {})
        return env

    def migrate(self) -> None:
        """Create the SQLite metadata DB (`airflow db migrate`); `dags test` needs it."""
        subprocess.run(
            [AIRFLOW, "db", "migrate"], env=self.env(), check=True, capture_output=True, timeout=300
        )

    def dags_test(
        self, dag_id: str, *, env: dict[str, str], conf: dict | None = None, timeout: float = 600
    ) -> DagRunResult:
        cmd = [AIRFLOW, "dags", "test", dag_id]
        if conf is not None:
            cmd += ["-c", json.dumps(conf)]
        proc = subprocess.run(cmd, env=self.env(env), capture_output=True, text=True, timeout=timeout)
        log = proc.stdout + proc.stderr
        match = re.findall(r"DagRun Finished: dag_id=\S+.*?state=(\w+)", log)
        run_ids = re.findall(r"DagRun Finished: dag_id=\S+.*?run_id=([^,\s]+)", log)
        return DagRunResult(
            dag_id, proc.returncode, match[-1] if match else None, log, run_ids[-1] if run_ids else None
        )

    def task_states(self, dag_id: str, run_id: str, *, env: dict[str, str]) -> dict[str, str]:
        """Each task's final state in a run (`airflow tasks states-for-dag-run`): a task that never
        ran, such as one upstream_failed, leaves nothing in the run's log to tell its state."""
        cmd = [AIRFLOW, "tasks", "states-for-dag-run", dag_id, run_id, "--output", "json"]
        proc = subprocess.run(cmd, env=self.env(env), check=True, capture_output=True, text=True, timeout=120)
        table = next(line for line in reversed(proc.stdout.splitlines()) if line.startswith(("[{", "[]")))
        rows = json.loads(table)
        return {row["task_id"]: row["state"] for row in rows}
