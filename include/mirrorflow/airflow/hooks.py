"""The Airflow hook for a Kafka cluster's connection: what mirrorflow's tasks and the Connections
UI's Test button use.

A connection holds librdkafka properties in its extra JSON, as the Apache Kafka provider's `kafka`
connections do (`bootstrap.servers`, `security.protocol`, `sasl.*`, `ssl.*`). mirrorflow registers
the connection type `mirrorflow_kafka` (same fields, this hook) through its provider entry point, and
accepts connections of either type in `<alias>.airflow.connection.id`.

Against the provider's hook this one:
- builds clients whose librdkafka lines go through Python logging (held back when they repeat),
  not to stderr, where Airflow shows every one of them as an error;
- answers Test with why a cluster does not answer (the connection error behind librdkafka's
  "transport failure": refused, DNS, TLS, SASL) and the bootstrap servers it tried, in a few
  seconds, or with what it found (cluster id, brokers, the client's authorized operations);
- checks the extra before it connects: a JSON object, bootstrap servers present, every key a
  librdkafka property (a Java client key copied from MM2's properties is named with its
  librdkafka spelling when mirrorflow knows it).
Secrets in the extra never reach its messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from mirrorflow.kafka import LIBRDKAFKA_LOG
from mirrorflow.kafka_diagnosis import no_answer

CONN_TYPE = "mirrorflow_kafka"
TEST_TIMEOUT_S = 8.0


class MirrorflowKafkaHook(KafkaBaseHook):
    """Kafka clients for one cluster, from an Airflow connection of type `mirrorflow_kafka` or `kafka`."""

    conn_type = CONN_TYPE
    hook_name = "Kafka cluster (mirrorflow)"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema", "login", "password", "port", "host"],
            "relabeling": {"extra": "librdkafka properties (JSON)"},
            "placeholders": {
                "extra": '{"bootstrap.servers": "broker-1:9093", "security.protocol": "SASL_SSL", '
                '"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "mirrorflow", "sasl.password": "..."}',
            },
        }

    def client_config(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The connection's librdkafka properties (callbacks resolved as the provider does), with
        `overrides` on top and librdkafka's log routed through Python logging."""
        config = self._build_config()
        config.update(overrides or {})
        config.setdefault("logger", LIBRDKAFKA_LOG)
        return config

    def admin(self, **overrides: Any) -> AdminClient:
        return AdminClient(self.client_config(overrides))

    def consumer(self, **overrides: Any) -> Consumer:
        """An assigned-reads consumer: no offsets committed unless `overrides` say so."""
        settings = {"group.id": "mirrorflow-hook", "enable.auto.commit": False, **overrides}
        return Consumer(self.client_config(settings))

    def producer(self, **overrides: Any) -> Producer:
        # Never auto-create a topic (librdkafka's producer default): see FlowConfig.file_client_config.
        return Producer(self.client_config({"acks": "all", "allow.auto.create.topics": False, **overrides}))

    def test_connection(self) -> tuple[bool, str]:
        """The Connections UI's Test: (True, what was found) or (False, what is wrong and what to do)."""
        try:
            config = self._build_config()
        except Exception as exc:  # noqa: BLE001 - the UI shows the message; nothing else to do with it
            return False, f"connection {self.kafka_config_id!r}: {exc}"
        problem = extra_problem(config)
        if problem:
            return False, f"connection {self.kafka_config_id!r}: {problem}"
        bootstrap = str(config["bootstrap.servers"])
        try:
            why = no_answer(config, TEST_TIMEOUT_S)
        except KafkaException as exc:  # a property librdkafka refuses when the client is made
            return False, f"connection {self.kafka_config_id!r}: librdkafka refused the extra: {exc.args[0]}"
        if why is not None:
            return False, (
                f"{bootstrap} did not answer within {TEST_TIMEOUT_S:g} s: {why}. Check that the address "
                "resolves and is reachable from the Airflow api-server, and that security.protocol, "
                "sasl.* and ssl.* match the listener"
            )
        return True, describe(config, bootstrap)


def extra_problem(config: Mapping[str, Any]) -> str | None:
    """What makes a connection's extra unusable before any connection is tried, or None."""
    servers = str(config.get("bootstrap.servers") or config.get("metadata.broker.list") or "").strip()
    if not servers:
        return 'the extra has no "bootstrap.servers": add the cluster\'s host:port list'
    for key in config:
        hint = java_key_hint(str(key))
        if hint:
            return hint
    return None


def java_key_hint(key: str) -> str | None:
    """What to write instead of a Java client key copied into a librdkafka extra, or None."""
    from mirrorflow.config.librdkafka import JAVA_ONLY, JAVA_ONLY_PREFIXES, RENAMED

    if key in RENAMED:
        return f'"{key}" is the Java client\'s name: librdkafka calls it "{RENAMED[key]}"'
    if key == "sasl.jaas.config":
        return (
            '"sasl.jaas.config" is Java\'s login line: give "sasl.mechanism", "sasl.username" and '
            '"sasl.password" instead'
        )
    if key.startswith(("ssl.truststore.", "ssl.keystore.")):
        return (
            f'"{key}": librdkafka reads no Java stores: give the CA as "ssl.ca.location" (a PEM file) or '
            '"ssl.ca.pem", and a client certificate as "ssl.certificate.location" and "ssl.key.location"'
        )
    reason = JAVA_ONLY.get(key) or next((r for p, r in JAVA_ONLY_PREFIXES.items() if key.startswith(p)), None)
    if reason:
        return f'"{key}" is a Java-only setting ({reason}): remove it'
    return None


def describe(config: Mapping[str, Any], bootstrap: str) -> str:
    """One line on the cluster that answered: its id, brokers and what this principal may do."""
    admin = AdminClient({**config, "logger": LIBRDKAFKA_LOG})
    try:
        cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=TEST_TIMEOUT_S)
        found = cluster.result(TEST_TIMEOUT_S)
    except KafkaException as exc:
        return f"{bootstrap} answered (cluster metadata); describing the cluster failed: {exc.args[0]}"
    operations = sorted(op.name for op in found.authorized_operations or [])
    allowed = f"; authorized on the cluster: {', '.join(operations)}" if operations else ""
    return f"connected to cluster {found.cluster_id} at {bootstrap}: {len(found.nodes)} broker(s){allowed}"
