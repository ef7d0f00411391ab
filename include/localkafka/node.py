"""Real Apache Kafka on this machine: KRaft clusters of one or more combined broker+controller
nodes, each its own `java kafka.Kafka` process, on 127.0.0.1 ports picked when the data dir is
new and kept in it, so a restart on the same dir comes back where clients expect it."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import signal
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from localkafka import runtime
from localkafka.broker import LocalKafkaError, Node, free_port
from localkafka.latency import LatencyProxy
from localkafka.settings import SLOW_LISTENER, NodeAddress, Security, client_settings

STATE_FILE = "localkafka.json"

__all__ = ["LocalKafka", "LocalKafkaError", "Node", "free_port"]


def random_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class LocalKafka:
    """A KRaft cluster of `brokers` nodes (1 or 3 in practice) in `data_dir`.

    `port` fixes the first node's PLAINTEXT port (0: pick free ones). Ports, node ids and the
    cluster id are written to the data dir the first time and reused by every later start.
    `overrides` are broker properties applied last (e.g. `log.cleaner.backoff.ms`). `jmx=True`
    opens each node's JMX agent on a free port of `host` (unauthenticated; off by default), picked
    at every launch, for reading broker metrics with localkafka.jmx (`node.jmx_url`). `line`
    picks the Kafka release line the nodes run ("3.9": the pinned 3.9 release, see
    runtime.line; default: the main line); a data dir keeps the line it was formatted with.
    `link_delay_ms` puts the cluster at the far end of a slow link: a SLOW listener whose
    advertised addresses are a latency proxy's (localkafka.latency) that holds every byte that
    long each way; `bootstrap_for("SLOW")` reaches it, PLAINTEXT stays direct."""

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
        line: str | None = None,
        link_delay_ms: float | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.line = runtime.line(line)
        self.link_delay_ms = link_delay_ms
        self.proxy: LatencyProxy | None = None
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
            formatted = state.get("kafka_version", self.line.version)
            if runtime.version_key(formatted) > runtime.version_key(self.line.version):
                raise LocalKafkaError(
                    f"{self.data_dir} was formatted by Kafka {formatted}, newer than {self.line.version}; "
                    "a broker only reads data dirs of its own release or older: use another data dir"
                )
            self.cluster_id = state["cluster_id"]
            self.addresses = [
                NodeAddress(
                    n["node_id"], n["controller_port"], dict(n["ports"]), dict(n.get("advertised", {}))
                )
                for n in state["nodes"]
            ]
            if port and self.addresses[0].ports["PLAINTEXT"] != port:
                first = self.addresses[0]
                self.addresses[0] = dataclasses.replace(first, ports={**first.ports, "PLAINTEXT": port})
            missing = [name for name in self.security.listeners if name not in self.addresses[0].ports]
            if missing:
                self.addresses = [
                    dataclasses.replace(a, ports={**a.ports, **{m: free_port(host) for m in missing}})
                    for a in self.addresses
                ]
        else:
            self.cluster_id = cluster_id or random_cluster_id()
            self.addresses = self._pick_addresses(brokers, port)
        self.addresses = [self._with_slow_listener(a) for a in self.addresses]
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

    def _with_slow_listener(self, address: NodeAddress) -> NodeAddress:
        if self.link_delay_ms is None or SLOW_LISTENER in address.ports:
            return address
        return dataclasses.replace(
            address,
            ports={**address.ports, SLOW_LISTENER: free_port(self.host)},
            advertised={**address.advertised, SLOW_LISTENER: free_port(self.host)},
        )

    def _read_state(self) -> dict[str, Any] | None:
        path = self.data_dir / STATE_FILE
        return json.loads(path.read_text()) if path.exists() else None

    def _write_state(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        state = {
            "cluster_id": self.cluster_id,
            "kafka_version": self.line.version,
            "nodes": [
                {
                    "node_id": a.node_id,
                    "controller_port": a.controller_port,
                    "ports": dict(a.ports),
                    "advertised": dict(a.advertised),
                }
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
        if self.link_delay_ms is not None and self.proxy is None:
            self.proxy = self._proxy(self.link_delay_ms).start()
        for node in self.nodes:
            if not node.running:
                node.launch()
        return self

    def _proxy(self, delay_ms: float) -> LatencyProxy:
        return LatencyProxy(
            delay_ms, {a.advertised[SLOW_LISTENER]: a.ports[SLOW_LISTENER] for a in self.addresses}
        )

    def set_link_delay(self, delay_ms: float) -> None:
        """Give the SLOW listener another one-way delay; open connections are cut (clients reconnect)."""
        if self.link_delay_ms is None:
            raise LocalKafkaError("this cluster has no slow link: start it with link_delay_ms=...")
        self.link_delay_ms = delay_ms
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = self._proxy(delay_ms).start()

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
                picked = self._pick_addresses(len(self.addresses), 0)
                self.addresses = [self._with_slow_listener(a) for a in picked]
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
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None

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
