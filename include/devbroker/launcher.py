"""Start and stop devbroker processes: shared by the test fixtures, the demo and benchmarks.

Each broker is its own `python -m devbroker` process, as a user would run it. It is asked
for port 0 unless told otherwise and reports the port it bound in its ready line, so two
tests can never race for the same free port.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

READY = re.compile(
    r"^devbroker ready bootstrap=(?P<host>[^:\s]+):(?P<port>\d+) cluster_id=(?P<cluster_id>\S+)"
)


class DevBrokerError(RuntimeError):
    pass


class DevBroker:
    """One running devbroker process."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        cluster_id: str | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, object] | None = None,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.cluster_id = cluster_id
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.overrides = dict(overrides or {})
        self.log_path = Path(log_path) if log_path is not None else None
        self.process: subprocess.Popen[str] | None = None
        self._log_file = None
        self._stdout_drain: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "devbroker", "--host", self.host, "--port", str(self.port)]
        if self.cluster_id:
            cmd += ["--cluster-id", self.cluster_id]
        if self.data_dir is not None:
            cmd += ["--data-dir", str(self.data_dir)]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self, timeout: float = 30.0) -> DevBroker:
        if self.process is not None and self.process.poll() is None:
            raise DevBrokerError(f"devbroker on {self.bootstrap} is already running")
        stderr = subprocess.DEVNULL
        if self.log_path is not None:
            self._log_file = open(self.log_path, "a")  # noqa: SIM115 - lives as long as the process
            stderr = self._log_file
        self.process = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        line = self._read_ready_line(timeout)
        match = READY.match(line)
        if match is None:
            self.stop()
            raise DevBrokerError(f"devbroker did not report ready; it printed: {line!r}")
        self.port = int(match["port"])
        self.cluster_id = match["cluster_id"]
        # Keep reading stdout so the broker never blocks on a full pipe.
        self._stdout_drain = threading.Thread(target=self._drain, daemon=True)
        self._stdout_drain.start()
        return self

    def _read_ready_line(self, timeout: float) -> str:
        assert self.process is not None and self.process.stdout is not None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not result:
            self.stop()
            raise DevBrokerError(f"devbroker did not start within {timeout:.0f}s: {' '.join(self.command())}")
        if not result[0]:
            code = self.process.wait(5)
            raise DevBrokerError(
                f"devbroker exited with code {code} before it was ready: {' '.join(self.command())}"
            )
        return result[0].rstrip("\n")

    def _drain(self) -> None:
        stdout = self.process.stdout if self.process else None
        if stdout is None:
            return
        for _ in stdout:
            pass

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, wait for a clean exit, and kill only if it does not come."""
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL: what a crash looks like to the data dir."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)

    def compact_now(self, topic: str = "*", timeout: float = 30.0) -> None:
        """Compact `topic` (or every compacted topic, `*`) now, active segment included.

        Sends IncrementalAlterConfigs for the broker's own `devbroker.compact.now` key; the
        broker rolls and cleans the topics before it answers, and never stores the key."""
        from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        node_id = admin.describe_cluster(request_timeout=timeout).result(timeout).controller.id
        resource = ConfigResource(
            "broker",
            str(node_id),
            incremental_configs=[
                ConfigEntry("devbroker.compact.now", topic, incremental_operation=AlterConfigOpType.SET)
            ],
        )
        admin.incremental_alter_configs([resource], request_timeout=timeout)[resource].result(timeout)

    def restart(self, timeout: float = 30.0) -> DevBroker:
        """Stop and start again on the same port and data dir."""
        self.stop()
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.start(timeout=max(1.0, deadline - time.monotonic()))
            except DevBrokerError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def __enter__(self) -> DevBroker:
        if self.process is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
