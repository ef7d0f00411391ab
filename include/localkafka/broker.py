"""One node of a local cluster: its `java kafka.Kafka` process, its files, the storage-tool format
of its data dir on the cluster's Kafka line, and how it is stopped (cleanly) or killed (a crash)."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any, Protocol

from localkafka import formats, runtime
from localkafka.settings import NodeAddress, render_properties, server_properties

LOG4J2 = Path(__file__).with_name("log4j2.properties")
RELOAD4J = Path(__file__).with_name("log4j-reload4j.properties")
_PR_SET_PDEATHSIG = 1


class LocalKafkaError(RuntimeError):
    """A node did not start or stop as asked; the message carries the tail of its log."""


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def jmx_properties(host: str, port: int) -> dict[str, str]:
    """System properties that open the JVM's own JMX agent on host:port (registry and RMI on the
    same port), without authentication or TLS: for local benchmarks and tests only."""
    return {
        "com.sun.management.jmxremote": "true",
        "com.sun.management.jmxremote.port": str(port),
        "com.sun.management.jmxremote.rmi.port": str(port),
        "com.sun.management.jmxremote.host": host,
        "com.sun.management.jmxremote.authenticate": "false",
        "com.sun.management.jmxremote.ssl": "false",
        "com.sun.management.jmxremote.local.only": "false",
        "java.rmi.server.hostname": host,
    }


def die_with_parent() -> None:
    """Runs in the child before exec: a JVM whose launcher died gets SIGTERM, so it stops
    cleanly instead of outliving a killed test run."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class NodeCluster(Protocol):
    """What a node reads of its cluster (localkafka.node.LocalKafka), named here so that this
    module needs nothing of the one that builds clusters from nodes."""

    addresses: Any
    cluster_id: str
    data_dir: Path
    heap: Any
    host: str
    jmx: bool
    line: Any
    overrides: Any
    security: Any


class Node:
    """One KRaft node's process, files and addresses."""

    def __init__(self, cluster: NodeCluster, address: NodeAddress) -> None:
        self.cluster = cluster
        self.address = address
        self.directory = cluster.data_dir / f"node-{address.node_id}"
        self.process: subprocess.Popen[bytes] | None = None
        self.jmx_port: int | None = None

    @property
    def node_id(self) -> int:
        return self.address.node_id

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def bootstrap_for(self, listener: str = "PLAINTEXT") -> str:
        port = self.address.advertised.get(listener, self.address.ports[listener])
        return f"{self.cluster.host}:{port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _write_properties(self) -> Path:
        props = server_properties(
            self.address,
            self.cluster.addresses,
            host=self.cluster.host,
            data_dir=str(self.directory / "data"),
            security=self.cluster.security,
            overrides=self.cluster.overrides,
        )
        path = self.directory / "server.properties"
        path.write_text(render_properties(props))
        path.chmod(0o600)  # it can hold the broker's TLS key
        return path

    @property
    def jmx_url(self) -> str:
        """The JMX service URL of a running node of a cluster started with `jmx=True`."""
        if self.jmx_port is None:
            raise LocalKafkaError(
                f"node {self.node_id} of {self.cluster.data_dir} has no JMX port (jmx=True)"
            )
        return f"service:jmx:rmi:///jndi/rmi://{self.cluster.host}:{self.jmx_port}/jmxrmi"

    def _java(
        self, main_class: str, *args: str, heap: str | None = None, jmx_port: int | None = None
    ) -> list[str]:
        line = self.cluster.line
        properties = {"kafka.logs.dir": str(self.directory)}
        if line.log4j2:
            properties["log4j2.configurationFile"] = str(LOG4J2)
        else:
            properties.update({"log4j.configuration": RELOAD4J.as_uri(), "localkafka.log.file": "server.log"})
        if jmx_port is not None:
            properties.update(jmx_properties(self.cluster.host, jmx_port))
        return runtime.java_command(
            main_class, *args, heap=heap, system_properties=properties, kafka_line=line
        )

    def format(self, *, reuse: bool = True) -> None:
        """Format a new data dir with the line's storage tool, or from a copy of what it wrote
        for a node of the same kind (localkafka.formats) unless `reuse` is False."""
        data = self.directory / "data"
        if (data / "meta.properties").exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self._write_properties()
        cluster = self.cluster
        key = (
            formats.kind(
                cluster.line.version,
                cluster.overrides,
                cluster.security.format_arguments(),
                len(cluster.addresses),
            )
            if reuse
            else None
        )
        if formats.copy_into(key, data, cluster_id=cluster.cluster_id, node_id=self.node_id):
            return
        command = self._java(
            "kafka.tools.StorageTool",
            "format",
            # One argument: a random id may start with '-', which a separate value would not survive.
            f"--cluster-id={self.cluster.cluster_id}",
            "--config",
            str(config),
            *self.cluster.security.format_arguments(),
        )
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise LocalKafkaError(
                f"formatting {self.directory} failed (exit {result.returncode}): {result.stdout}{result.stderr}"
            )
        formats.keep(key, data)

    def launch(self) -> None:
        """Start the JVM; `LocalKafka.wait_ready` decides when it serves clients."""
        if self.running:
            raise LocalKafkaError(f"node {self.node_id} of {self.cluster.data_dir} is already running")
        self.format()
        config = self._write_properties()
        self.jmx_port = free_port(self.cluster.host) if self.cluster.jmx else None
        with open(self.directory / "jvm.out", "ab") as out:
            self.process = subprocess.Popen(
                self._java("kafka.Kafka", str(config), heap=self.cluster.heap, jmx_port=self.jmx_port),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - only sets the death signal
            )

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (Kafka's controlled shutdown), and SIGKILL only if it does not finish in time."""
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash, as the log dirs see it."""
        if self.running:
            assert self.process is not None
            self.process.kill()
            self.process.wait(10)

    def log_tail(self, lines: int = 20) -> str:
        """The JVM's own output, the broker log's first errors (with their causes) and its last lines."""
        parts = []
        out = self.directory / "jvm.out"
        if out.exists() and out.stat().st_size:
            parts.append(
                f"--- {out} ---\n" + "\n".join(out.read_text(errors="replace").splitlines()[-lines:])
            )
        if self.log_path.exists():
            text = self.log_path.read_text(errors="replace").splitlines()
            errors = [
                line
                for line in text
                if " ERROR " in line or " FATAL " in line or line.startswith("Caused by")
            ]
            parts.append(f"--- {self.log_path} (errors) ---\n" + "\n".join(errors[:lines]))
            parts.append(f"--- {self.log_path} (last lines) ---\n" + "\n".join(text[-5:]))
        return "\n".join(parts)
