"""Credentials from Airflow: `<alias>.airflow.connection.id` names a `kafka` connection whose
`extra` JSON holds librdkafka properties for that cluster (the Apache Kafka provider's format; type
`mirrorflow_kafka` is the same with mirrorflow's hook, see mirrorflow.airflow.hooks).

They override the file's settings for that cluster's clients at run time, so passwords can
live in Airflow's secrets backend instead of the properties file. The lookup happens only when
such a key exists, and only inside Airflow (the import is inside the function).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mirrorflow.config.problems import ConfigError, error

ConnectionExtra = Callable[[str], Mapping[str, object]]
# mirrorflow's own type (its hook answers the Connections UI's Test with why a cluster does not
# answer) and the Apache Kafka provider's: the same extra JSON of librdkafka properties.
CONNECTION_TYPES = ("mirrorflow_kafka", "kafka")

# Settings a role must keep whatever the connection says (MM2 forces them too).
_FORCED = {"consumer": {"enable.auto.commit": "false"}}
# librdkafka takes the CA, and the client certificate and key, as files or as PEM strings, and
# loads both when both are set (the string last, so it would win). A connection that gives one
# form replaces the file's settings of either form, e.g. the ssl.ca.pem a JKS trust store became.
_CA = frozenset({"ssl.ca.location", "ssl.ca.pem"})
_CLIENT_CERTIFICATE = frozenset(
    {
        "ssl.certificate.location",
        "ssl.certificate.pem",
        "ssl.key.location",
        "ssl.key.pem",
        "ssl.keystore.location",
    }
)
_ALTERNATIVES = (
    (_CA, _CA),
    (_CLIENT_CERTIFICATE, _CLIENT_CERTIFICATE | {"ssl.key.password", "ssl.keystore.password"}),
)


def merge_connection_extra(
    client_config: Mapping[str, object], extra: Mapping[str, object], kind: str
) -> dict[str, object]:
    """File settings < connection extra; `kind` (consumer/producer/admin) keeps its forced settings."""
    replaced = {key for given, group in _ALTERNATIVES if given & extra.keys() for key in group}
    merged = {key: value for key, value in client_config.items() if key not in replaced}
    merged.update(extra)
    merged.update(_FORCED.get(kind, {}))
    return merged


def fetch_connection_extra(conn_id: str, *, key: str = "airflow.connection.id") -> dict[str, object]:
    """The extra of Airflow connection `conn_id` (type mirrorflow_kafka or kafka), looked up through the task SDK.

    `key` is the configuration key that named the connection, for error messages.
    """
    try:
        from airflow.sdk import Connection
    except ImportError as exc:
        raise ConfigError(
            [
                error(
                    key,
                    "the cluster's credentials are in an Airflow connection, but Airflow is not importable",
                    "run inside Airflow or remove the key",
                )
            ]
        ) from exc
    try:
        connection = Connection.get(conn_id)
    except Exception as exc:
        raise ConfigError(
            [
                error(
                    key,
                    f"Airflow connection {conn_id!r} could not be read: {exc}",
                    f"create connection {conn_id} of type mirrorflow_kafka (or kafka)",
                )
            ]
        ) from exc
    if connection.conn_type not in CONNECTION_TYPES:
        raise ConfigError(
            [
                error(
                    key,
                    f"Airflow connection {conn_id!r} has type {connection.conn_type!r}",
                    "use a connection of type mirrorflow_kafka or kafka whose extra JSON holds librdkafka properties",
                )
            ]
        )
    extra = connection.extra_dejson
    if not isinstance(extra, dict):
        raise ConfigError(
            [
                error(
                    key,
                    f"the extra of connection {conn_id!r} is not a JSON object",
                    "store librdkafka properties as a JSON object",
                )
            ]
        )
    return extra
