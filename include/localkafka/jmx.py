"""Broker metrics over JMX, read with Kafka's own JmxTool (org.apache.kafka.tools.JmxTool).

A cluster started with `LocalKafka(..., jmx=True)` opens each node's JMX agent on 127.0.0.1.
`request_counts(cluster)` reads every `kafka.network:type=RequestMetrics,name=RequestsPerSec`
counter (one per request type and version, what a broker has served since it started) and sums
them per request type over the nodes; the difference of two readings is what the clients sent
in between, counted where it arrived.

JmxTool lives in the kafka-tools jar, which the broker does not need: `make setup` puts it in
kafka/tools, not kafka/libs (a jar there would join every broker's classpath and class-data
sharing archive). Its own dependencies (argparse4j, jackson) are among the broker's jars.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from localkafka import runtime

if TYPE_CHECKING:
    from localkafka.node import LocalKafka

REQUESTS = "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=*,version=*"
# Requests the nodes send each other (KRaft quorum, broker registration and heartbeats): the
# cluster's own background, not work any client asked for.
NODE_TO_NODE = frozenset(
    {
        "BrokerHeartbeat",
        "BrokerRegistration",
        "ControllerRegistration",
        "Vote",
        "BeginQuorumEpoch",
        "EndQuorumEpoch",
        "FetchSnapshot",
        "DescribeQuorum",
        "AddRaftVoter",
        "RemoveRaftVoter",
        "UpdateRaftVoter",
    }
)
# Sub-counters a broker keeps beside Fetch (fetches by consumers, by follower replicas): counted
# in Fetch already.
FETCH_SHARES = frozenset({"FetchConsumer", "FetchFollower"})
_LINE = re.compile(r"^(?P<name>kafka\.[^:]+:[^:]+):(?P<attribute>\w+)=(?P<value>[-0-9.Ee]+)$")


def tools_jar() -> Path:
    """The kafka-tools jar of the pinned version: kafka/tools (where `make setup` puts it),
    kafka/libs, then the local Maven repository."""
    version = runtime.kafka_version()
    name = f"kafka-tools-{version}.jar"
    maven = Path(os.environ.get("MAVEN_REPOSITORY", Path.home() / ".m2" / "repository"))
    tools = runtime.libs_dir().parent / "tools"
    for candidate in (
        tools / name,
        runtime.libs_dir() / name,
        maven / "org/apache/kafka/kafka-tools" / version / name,
    ):
        if candidate.exists():
            return candidate
    raise runtime.RuntimeMissing(
        f"{name} (Kafka's JmxTool) is not in {tools}, {runtime.libs_dir()} or {maven}; `make setup` "
        "puts it in kafka/tools"
    )


def read_attribute(
    url: str, object_name: str, attribute: str = "Count", timeout_s: float = 60.0
) -> dict[str, float]:
    """`attribute` of every MBean matching `object_name` (a JMX pattern) on the agent at `url`,
    by MBean name, from one JmxTool reading."""
    jars = [*runtime.classpath(), tools_jar()]
    command = [
        runtime.java_binary(),
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Xmx128m",
        "-cp",
        os.pathsep.join(str(j) for j in jars),
        "org.apache.kafka.tools.JmxTool",
        "--jmx-url",
        url,
        "--object-name",
        object_name,
        "--attributes",
        attribute,
        "--one-time",
        "true",
        "--report-format",
        "properties",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"JmxTool on {url} failed (exit {result.returncode}): {result.stderr.strip()[-2000:]}"
        )
    values = {}
    for line in result.stdout.splitlines():
        match = _LINE.match(line.strip())
        if match and match["attribute"] == attribute:
            values[match["name"]] = float(match["value"])
    return values


def request_counts(cluster: LocalKafka, *, include_node_to_node: bool = False) -> Counter[str]:
    """Requests every node of `cluster` has served since it started, by request type (all
    versions together; Fetch once, not again as FetchConsumer or FetchFollower); the nodes' own
    quorum and heartbeat traffic left out unless asked for."""
    counts: Counter[str] = Counter()
    for node in cluster.nodes:
        for name, value in read_attribute(node.jmx_url, REQUESTS).items():
            request = re.search(r"request=([^,]+)", name)
            if request is None or request[1] in FETCH_SHARES:
                continue
            if request[1] in NODE_TO_NODE and not include_node_to_node:
                continue
            counts[request[1]] += int(value)
    return counts
