"""Which settings are secret, and the redacted views that may reach logs, Airflow and the UI."""

from __future__ import annotations

from collections.abc import Mapping

REDACTED = "[redacted]"

# Name fragments of settings that carry credentials: Kafka's PASSWORD-typed keys
# (ssl.*.password, ssl.keystore.key, sasl.jaas.config), librdkafka's (sasl.password,
# ssl.key.pem, sasl.oauthbearer.client.secret) and the usual names for API secrets.
_SECRET_FRAGMENTS = ("password", "secret", "jaas", "credential", "passphrase", "user.info", "key.pem")


def is_secret_key(name: str) -> bool:
    lowered = name.lower()
    return any(fragment in lowered for fragment in _SECRET_FRAGMENTS) or lowered.endswith(".key")


def redact_client_config(config: Mapping[str, object]) -> dict[str, object]:
    """A client config safe to log: secret values replaced."""
    return {key: REDACTED if is_secret_key(key) else value for key, value in config.items()}
