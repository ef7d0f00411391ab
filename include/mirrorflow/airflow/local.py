"""Run mirrorflow's DAGs on one machine: a SQLite Airflow home migrated once, the real DAG file and
plugin, the real spark-submit with Spark in local mode (`local[2,3]`: two cores, failed tasks
retried), and the mirrorflow config and cluster addresses passed through the environment.

`AirflowHome.dags_test` runs one DAG with `airflow dags test`, as the demo and the end-to-end tests
do; `AirflowServer` runs the whole of Airflow (api-server, scheduler, dag-processor, triggerer) on
loopback, as `scripts/airflow-local` (`make airflow`, mirrorflow.airflow.local_launcher) and the
browser tests do.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

from mirrorflow.airflow.process_stop import running, wait_gone, wait_gone_ending_idle_workers
from mirrorflow.airflow.settings import PROJECT_ROOT as ROOT

BIN = Path(sys.executable).parent
AIRFLOW = str(BIN / "airflow")
LOOPBACK = "127.0.0.1"
SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
HEALTH_PATH = "/api/v2/monitor/health"
DEFAULT_USER = "admin"
DEFAULT_HOME = ROOT / ".airflow"
DEFAULT_PORT = 8080
SPARK_LOCAL = json.dumps({"conn_type": "spark", "host": "local[2,3]"})
API_GRACE_S = 30.0  # for the api-server to end once everything else has (slow on a loaded machine)


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
            "AIRFLOW_CONN_SPARK_DEFAULT": SPARK_LOCAL,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYSPARK_PYTHON": sys.executable,
        }
        env.update(extra or {})
        return env

    @property
    def passwords_file(self) -> Path:
        return self.home / "simple_auth_manager_passwords.json.generated"

    def password(self, user: str = DEFAULT_USER) -> str:
        """The user's password for Airflow's simple auth manager, made once and kept in the home's
        passwords file (readable by its owner only), which the api-server reads as its own."""
        stored = json.loads(self.passwords_file.read_text() or "{}") if self.passwords_file.exists() else {}
        if user not in stored:
            stored[user] = secrets.token_urlsafe(12)
            self.passwords_file.touch(mode=0o600)
            self.passwords_file.write_text(json.dumps(stored) + "\n")
        return stored[user]

    def server_env(
        self, port: int, *, user: str = DEFAULT_USER, extra: dict[str, str] | None = None
    ) -> dict[str, str]:
        """env() for the long-running components: the api-server on loopback at `port`, tasks
        sent to its execution API, LocalExecutor, and the simple auth manager with one admin."""
        return self.env(
            {
                "AIRFLOW__API__HOST": LOOPBACK,
                "AIRFLOW__API__PORT": str(port),
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{LOOPBACK}:{port}/execution/",
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                # A task's supervisor notices that its task process ended at its next wake-up, up to
                # this many seconds (5 by default) after the task's last line: every task, and so
                # every stop, took up to 5 s longer. It also sets how often a running task tells the
                # api-server it lives, a small request on loopback.
                "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
                # LocalExecutor forks this many workers up front: 32 by default, 8 do for one machine.
                "AIRFLOW__CORE__PARALLELISM": os.environ.get("AIRFLOW__CORE__PARALLELISM", "8"),
                "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{user}:admin",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.passwords_file),
                **(extra or {}),
            }
        )

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def port_is_free(port: int) -> bool:
    """Whether a server can listen on the port (as uvicorn does, SO_REUSEADDR: connections of an
    earlier server left in TIME_WAIT do not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


class ComponentExited(RuntimeError):
    """An Airflow component stopped on its own while the others ran."""


class AirflowServer:
    """Airflow's api-server, scheduler, dag-processor and triggerer for one AirflowHome, on
    loopback, stopped together. Each component runs in a process group of its own, its output in
    <home>/logs/<component>.log; stop() signals the groups and every process they started (task
    runs put themselves in groups of their own), then kills what is left after a grace period."""

    def __init__(
        self,
        home: AirflowHome,
        port: int,
        *,
        user: str = DEFAULT_USER,
        env: dict[str, str] | None = None,
    ) -> None:
        self.home = home
        self.port = port
        self.user = user
        self.extra_env = dict(env or {})
        self.logs = home.home / "logs"
        self.processes: dict[str, subprocess.Popen] = {}
        self.idle_workers_ended: list[str] = []
        self.stop_phases: dict[str, float] = {}
        self._known: dict[int, psutil.Process] = {}
        self._token: str | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def log_path(self, component: str) -> Path:
        return self.logs / f"{component}.log"

    def start(self) -> None:
        if not port_is_free(self.port):
            raise RuntimeError(f"port {self.port} on {LOOPBACK} is in use: choose another with --port")
        self.home.migrate()
        self.home.password(self.user)
        self.logs.mkdir(parents=True, exist_ok=True)
        env = self.home.server_env(self.port, user=self.user, extra=self.extra_env)
        for component in COMPONENTS:
            with self.log_path(component).open("ab") as out:
                self.processes[component] = subprocess.Popen(
                    [AIRFLOW, component],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=self.home.home,
                    start_new_session=True,
                )

    def exited(self) -> dict[str, int]:
        return {name: proc.returncode for name, proc in self.processes.items() if proc.poll() is not None}

    def log_tail(self, component: str, lines: int = 30) -> str:
        path = self.log_path(component)
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def health(self) -> dict | None:
        """The api-server's health document, None while it does not answer."""
        try:
            with urllib.request.urlopen(self.url + HEALTH_PATH, timeout=5) as response:
                return json.load(response)
        except (OSError, ValueError):
            return None

    def healthy(self) -> bool:
        health = self.health()
        return bool(health) and all(
            part.get("status") == "healthy" for part in health.values() if isinstance(part, dict)
        )

    def api(self, path: str, *, method: str = "GET", body: dict | None = None) -> dict:
        """One call of Airflow's REST API as the admin user (a token from /auth/token, kept)."""
        if self._token is None:
            login = {"username": self.user, "password": self.home.password(self.user)}
            self._token = self._request("/auth/token", "POST", login, None)["access_token"]
        return self._request(path, method, body, self._token)

    def _request(self, path: str, method: str, body: dict | None, token: str | None) -> dict:
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                **({"Authorization": f"Bearer {token}"} if token else {}),
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def wait_healthy(self, timeout: float = 180) -> None:
        """Until the metadata DB, scheduler, dag-processor and triggerer all report healthy; fails at
        once, with the log's end, when a component exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._remember_descendants()
            if gone := self.exited():
                name, code = next(iter(gone.items()))
                raise ComponentExited(
                    f"airflow {name} exited with code {code} ({self.log_path(name)}):\n{self.log_tail(name)}"
                )
            if self.healthy():
                return
            time.sleep(1)
        raise TimeoutError(f"Airflow at {self.url} was not healthy within {timeout:.0f}s: {self.health()}")

    def _remember_descendants(self) -> None:
        """Note every process the components started: a task run moves itself to a process group of
        its own, so signalling our groups alone could leave it (and its spark-submit) behind."""
        for proc in self.processes.values():
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(proc.pid)
                for child in [root, *root.children(recursive=True)]:
                    self._known.setdefault(child.pid, child)

    def pids(self) -> set[int]:
        """Every process of this server still running (components and what they started)."""
        self._remember_descendants()
        return {pid for pid, proc in self._known.items() if running(proc)}

    def _signal_groups(self, signum: int, components: tuple[str, ...] = COMPONENTS) -> None:
        for name in components:
            proc = self.processes.get(name)
            if proc is not None and proc.poll() is None:  # its group's leader lives: the group is ours
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signum)

    def _api_server_tree(self) -> set[int]:
        proc = self.processes.get("api-server")
        if proc is None:
            return set()
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(proc.pid)
            return {root.pid, *(child.pid for child in root.children(recursive=True))}
        return {proc.pid}

    def stop(self, grace: float = 30) -> list[str]:
        """Stop everything in two steps, each process signalled once, then SIGKILL what is still
        there after `grace` seconds.

        First the scheduler, dag-processor, triggerer and every task they started get SIGTERM,
        while the api-server keeps answering: Airflow 3 asks a running task to stop through its
        operator's on_kill, and the task then reports its end through the api-server (a task
        that cannot would retry for half a minute). Once: a scheduler signalled again while it
        waits for its executor's workers gives up waiting and hangs at exit. Then the api-server,
        with a grace of its own. Returns the command lines of the processes that had to be
        killed (none when everything stopped when asked); `idle_workers_ended` names the idle
        LocalExecutor workers ended so that the scheduler could exit (see
        process_stop.wait_gone_ending_idle_workers)."""
        began = time.monotonic()
        self._remember_descendants()
        api = self._api_server_tree()
        others = tuple(c for c in COMPONENTS if c != "api-server")
        first = [proc for pid, proc in self._known.items() if pid not in api]
        self._signal_groups(signal.SIGTERM, others)
        self._terminate_outside_groups(first, others)
        scheduler = self.processes.get("scheduler")
        alive, self.idle_workers_ended = wait_gone_ending_idle_workers(
            first, scheduler.pid if scheduler is not None else None, grace
        )
        tasks_done = time.monotonic()
        self._signal_groups(signal.SIGTERM, ("api-server",))
        self._terminate_outside_groups([p for p in self._known.values() if p.pid in api], ("api-server",))
        alive = [*alive, *wait_gone([p for p in self._known.values() if p.pid in api], API_GRACE_S)]
        self.stop_phases = {
            "scheduler and tasks": tasks_done - began,
            "api-server": time.monotonic() - tasks_done,
        }
        killed = []
        for leftover in alive:
            with contextlib.suppress(psutil.Error):
                killed.append(" ".join(leftover.cmdline()) or str(leftover.pid))
        self._signal_groups(signal.SIGKILL)
        for leftover in alive:
            with contextlib.suppress(psutil.Error):
                leftover.kill()
        wait_gone(alive, 10)
        for proc in self.processes.values():
            proc.wait(timeout=10)
        return killed

    def _terminate_outside_groups(self, procs: list[psutil.Process], components: tuple[str, ...]) -> None:
        """SIGTERM those of `procs` the components' group signal did not reach: task runs, which
        put themselves in process groups of their own."""
        groups = {proc.pid for name, proc in self.processes.items() if name in components}
        for known in procs:
            with contextlib.suppress(psutil.Error, OSError):
                if os.getpgid(known.pid) not in groups:
                    known.terminate()

    def __enter__(self) -> AirflowServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
