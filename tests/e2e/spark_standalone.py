"""A Spark standalone cluster on loopback (one master, one worker) from pyspark's own scripts, for
the scale-out tests: the replicate DAG's copy (a batch run, a micro-batch window) then runs on a
`spark://` master, as it would on a real cluster, instead of in `local[N]`. One per test worker,
shared by those tests (the `spark_standalone` fixture)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

SPARK_CLASS = str(Path(sys.executable).parent / "spark-class")


MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
MASTER_UI_PORT = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")


@dataclass
class SparkStandalone:
    master_url: str
    master_ui: str
    processes: list[subprocess.Popen]
    work_dir: Path
    """Where the worker keeps each application's executors (app-*/N/stderr)."""

    def status(self) -> dict:
        with urllib.request.urlopen(f"{self.master_ui}/json", timeout=5) as response:
            return json.load(response)

    def connection(self, conf: dict[str, str] | None = None) -> str:
        """The `spark_default` Airflow connection that points spark-submit at this master, with
        Spark properties for its jobs in the extra's `conf` when given."""
        host, port = self.master_url.removeprefix("spark://").split(":")
        extra: dict[str, object] = {"deploy-mode": "client"}
        if conf:
            extra["conf"] = conf
        return json.dumps(
            {"conn_type": "spark", "host": f"spark://{host}", "port": int(port), "extra": extra}
        )

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def start_standalone(
    work_dir: Path, *, cores: int = 2, memory: str = "2g", timeout: float = 90
) -> SparkStandalone:
    if not shutil.which(SPARK_CLASS):
        raise RuntimeError(f"{SPARK_CLASS} is missing: pyspark installs it; run `make setup`")
    import pyspark

    env = {
        **os.environ,
        # pip's pyspark is a Spark distribution; say so rather than let spark-class search PATH.
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(work_dir / "work"),
        # The REST submission server would take the fixed port 6066; spark-submit does not use it.
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }
    logs = work_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def launch(name: str, *args: str) -> subprocess.Popen:
        with open(logs / f"{name}.log", "ab") as out:
            return subprocess.Popen([SPARK_CLASS, *args], env=env, stdout=out, stderr=subprocess.STDOUT)

    # Port 0 everywhere: the daemons bind what is free and log it, so nothing else can take a
    # port between our choosing it and the JVM binding it (a CI run once read another page's HTML).
    master = launch(
        "master",
        "org.apache.spark.deploy.master.Master",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--webui-port",
        "0",
    )
    deadline = time.monotonic() + timeout
    master_url = ui_port = None
    while master_url is None or ui_port is None:
        text = (logs / "master.log").read_text(errors="replace")
        master_url = (m := MASTER_URL.search(text)) and m.group(1)
        ui_port = (m := MASTER_UI_PORT.search(text)) and m.group(1)
        if master.poll() is not None or time.monotonic() > deadline:
            if master.poll() is None:
                master.kill()
            raise RuntimeError(f"the Spark master did not start; its log is in {logs}")
        time.sleep(0.2)
    cluster = SparkStandalone(master_url, f"http://127.0.0.1:{ui_port}", [master], work_dir / "work")
    try:
        worker = launch(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            master_url,
            "--host",
            "127.0.0.1",
            "--cores",
            str(cores),
            "--memory",
            memory,
            "--webui-port",
            "0",
        )
        cluster.processes.append(worker)
        while True:
            try:
                if any(w.get("state") == "ALIVE" for w in cluster.status().get("workers", [])):
                    return cluster
            except (OSError, ValueError):  # not listening yet, or not serving its JSON yet
                pass
            for process in cluster.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited; its log is in {logs}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no Spark worker registered within {timeout:.0f}s (logs in {logs})")
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise
