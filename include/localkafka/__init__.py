"""Real Apache Kafka (KRaft) on this machine for tests, the demo, benchmarks and local runs.

    from localkafka import LocalKafka
    with LocalKafka(tmp_path) as kafka:            # one node, free ports, formatted when new
        Producer({"bootstrap.servers": kafka.bootstrap})

The jars come from kafka/pom.xml through `make setup`; see runtime.py. Clusters of three nodes
(`brokers=3`) and secured listeners (`security=Security(...)`, with `make_tls` for certificates)
serve replication-factor, failover and security tests. `jmx=True` opens each node's JMX agent
on 127.0.0.1, so localkafka.jmx can read broker metrics (request counts) with Kafka's JmxTool.
"""

from localkafka.node import LocalKafka, LocalKafkaError, Node
from localkafka.runtime import RuntimeMissing, kafka_version
from localkafka.settings import QUICK_CLUSTER, Security, SettingsError
from localkafka.tls import TlsFiles, make_tls

__all__ = [
    "LocalKafka",
    "LocalKafkaError",
    "QUICK_CLUSTER",
    "Node",
    "RuntimeMissing",
    "Security",
    "SettingsError",
    "TlsFiles",
    "kafka_version",
    "make_tls",
]
