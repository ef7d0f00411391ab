"""Real Apache Kafka on this machine: KRaft clusters of one or more combined broker+controller
nodes, each its own `java kafka.Kafka` process, on 127.0.0.1 ports picked when the data dir is
new and kept in it, so a restart on the same dir comes back where clients expect it."""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from localkafka import runtime
from localkafka.settings import (
    NodeAddress,
    Security,
    client_settings,
    render_properties,
    server_properties,
)

STATE_FILE = "localkafka.json"
LOG4J2 = Path(__file__).with_name("log4j2.properties")
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


def random_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _die_with_parent() -> None:
    """Runs in the child before exec: a JVM whose launcher died gets SIGTERM, so it stops
    cleanly instead of outliving a killed test run."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Node:
    """One KRaft node's process, files and addresses."""

    def __init__(self, cluster: LocalKafka, address: NodeAddress) -> None:
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
        return f"{self.cluster.host}:{self.address.ports[listener]}"

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
        properties = {"log4j2.configurationFile": str(LOG4J2), "kafka.logs.dir": str(self.directory)}
        if jmx_port is not None:
            properties.update(jmx_properties(self.cluster.host, jmx_port))
        return runtime.java_command(main_class, *args, heap=heap, system_properties=properties)

    def format(self) -> None:
        if (self.directory / "data" / "meta.properties").exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self._write_properties()
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
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only sets the death signal
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


class LocalKafka:
    """A KRaft cluster of `brokers` nodes (1 or 3 in practice) in `data_dir`.

    `port` fixes the first node's PLAINTEXT port (0: pick free ones). Ports, node ids and the
    cluster id are written to the data dir the first time and reused by every later start.
    `overrides` are broker properties applied last (e.g. `log.cleaner.backoff.ms`). `jmx=True`
    opens each node's JMX agent on a free port of `host` (unauthenticated; off by default), picked
    at every launch, for reading broker metrics with localkafka.jmx (`node.jmx_url`)."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        brokers: int = 1,
        port: int = 0,
        host: str = "127.0.0.1",
        cluster_id: str | None = None,
        security: Security | None = None,
        overrides: Mapping[str, object] | None = None,
        heap: str = runtime.DEFAULT_HEAP,
        jmx: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.jmx = jmx
        self.host = host
        self.security = security or Security()
        self.overrides = dict(overrides or {})
        self.heap = heap
        self._ports_picked = False
        state = self._read_state()
        if state is not None:
            if brokers != len(state["nodes"]) and brokers != 1:
                raise LocalKafkaError(
                    f"{self.data_dir} holds a {len(state['nodes'])}-node cluster, not {brokers}"
                )
            if cluster_id is not None and cluster_id != state["cluster_id"]:
                raise LocalKafkaError(
                    f"{self.data_dir} was formatted for cluster {state['cluster_id']}, not {cluster_id}; "
                    "use another --data-dir or drop --cluster-id"
                )
            self.cluster_id = state["cluster_id"]
            self.addresses = [
                NodeAddress(n["node_id"], n["controller_port"], dict(n["ports"])) for n in state["nodes"]
            ]
            if port and self.addresses[0].ports["PLAINTEXT"] != port:
                first = self.addresses[0]
                self.addresses[0] = NodeAddress(
                    first.node_id, first.controller_port, {**first.ports, "PLAINTEXT": port}
                )
            missing = [name for name in self.security.listeners if name not in self.addresses[0].ports]
            if missing:
                self.addresses = [
                    NodeAddress(
                        a.node_id, a.controller_port, {**a.ports, **{m: free_port(host) for m in missing}}
                    )
                    for a in self.addresses
                ]
        else:
            self.cluster_id = cluster_id or random_cluster_id()
            self.addresses = self._pick_addresses(brokers, port)
        self.nodes = [Node(self, address) for address in self.addresses]

    # -- addresses and state -------------------------------------------------------------
    def _pick_addresses(self, brokers: int, port: int) -> list[NodeAddress]:
        self._ports_picked = port == 0
        addresses = []
        for index in range(brokers):
            ports = {"PLAINTEXT": port if index == 0 and port else free_port(self.host)}
            ports.update({name: free_port(self.host) for name in self.security.listeners})
            addresses.append(NodeAddress(index + 1, free_port(self.host), ports))
        return addresses

    def _read_state(self) -> dict[str, Any] | None:
        path = self.data_dir / STATE_FILE
        return json.loads(path.read_text()) if path.exists() else None

    def _write_state(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        state = {
            "cluster_id": self.cluster_id,
            "kafka_version": runtime.kafka_version(),
            "nodes": [
                {"node_id": a.node_id, "controller_port": a.controller_port, "ports": dict(a.ports)}
                for a in self.addresses
            ],
        }
        (self.data_dir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")

    # -- addresses for clients -------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """PLAINTEXT bootstrap servers of every node."""
        return self.bootstrap_for("PLAINTEXT")

    def bootstrap_for(self, listener: str) -> str:
        return ",".join(node.bootstrap_for(listener) for node in self.nodes)

    def client_config(
        self, listener: str = "PLAINTEXT", *, user: str | None = None, **extra: object
    ) -> dict[str, object]:
        """librdkafka settings for `listener` as `user` (SCRAM user or client certificate)."""
        return {**client_settings(self.bootstrap_for(listener), listener, self.security, user=user), **extra}

    # -- lifecycle ---------------------------------------------------------------------------
    def launch(self) -> LocalKafka:
        """Start every node's JVM without waiting: `start` then only waits. Launch several
        clusters first and start them after, and they come up side by side."""
        self._write_state()
        for node in self.nodes:
            if not node.running:
                node.launch()
        return self

    def start(self, timeout: float = 90.0) -> LocalKafka:
        """Format a new data dir, start every node, and return once all serve metadata."""
        for attempt in range(3):
            self.launch()
            try:
                self.wait_ready(timeout)
                return self
            except LocalKafkaError as exc:
                # A JMX port taken meanwhile reads "Port already in use"; the next launch picks another.
                clash = "Address already in use" in str(exc) or "Port already in use" in str(exc)
                self.stop()
                if not (clash and self._ports_picked and attempt < 2):
                    raise
                # Another process took a port between picking and binding: pick again.
                self.addresses = self._pick_addresses(len(self.addresses), 0)
                self.nodes = [Node(self, address) for address in self.addresses]
        raise AssertionError("unreachable")

    def wait_ready(self, timeout: float = 90.0, nodes: list[Node] | None = None) -> None:
        """Until every node in `nodes` (default: all running) is a registered broker that
        answers a metadata request."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        waiting = [n for n in (nodes or self.nodes) if n.running] or list(nodes or self.nodes)
        deadline = time.monotonic() + timeout
        for node in waiting:
            admin = AdminClient(
                {"bootstrap.servers": node.bootstrap_for(), "log_level": 0, "error_cb": lambda _err: None}
            )
            while True:
                if not node.running:
                    code = node.process.returncode if node.process else None
                    raise LocalKafkaError(
                        f"node {node.node_id} exited with code {code} before it was ready\n{node.log_tail()}"
                    )
                try:
                    metadata = admin.list_topics(timeout=1.0)
                    if node.node_id in metadata.brokers:
                        break
                except KafkaException:
                    pass
                if time.monotonic() > deadline:
                    node.stop(10)
                    raise LocalKafkaError(
                        f"node {node.node_id} did not serve metadata within {timeout:.0f}s\n{node.log_tail()}"
                    )
                time.sleep(0.1)

    def stop(self, timeout: float = 60.0) -> None:
        """Stop every node cleanly (brokers first would leave no quorum: all get SIGTERM at once)."""
        for node in self.nodes:
            if node.running:
                assert node.process is not None
                node.process.send_signal(signal.SIGTERM)
        for node in self.nodes:
            node.stop(timeout)

    def kill(self) -> None:
        for node in self.nodes:
            node.kill()

    def restart(self, timeout: float = 90.0) -> LocalKafka:
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
