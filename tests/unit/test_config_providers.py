"""Config providers (env, file, directory) resolved like Kafka, and redaction of what they return."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirrorflow.config import REDACTED, ConfigError, load_config, parse_config, redact_client_config

PROVIDERS = (
    "config.providers = env, file, directory\n"
    "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
    "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n"
    "config.providers.directory.class = org.apache.kafka.common.config.provider.DirectoryConfigProvider\n"
)
BASE = PROVIDERS + "clusters = A, B\nA->B.enabled = true\nB.bootstrap.servers = b:9092\n"


def _errors(text: str, env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        load_config(text, env=env or {})
    return [(p.key, p.message) for p in info.value.problems if p.is_error]


def test_env_file_and_directory_providers(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("password = s3cret\nuser: mm2\n")
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "truststore-path").write_text("/etc/ca.pem")
    text = BASE + (
        "A.bootstrap.servers = ${env:KAFKA_A}\n"
        "A.security.protocol = SASL_SSL\nA.sasl.mechanism = PLAIN\n"
        "A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="${{file:{secrets}:user}}" password="${{file:{secrets}:password}}";\n'
        f"A.ssl.truststore.type = PEM\nA.ssl.truststore.location = ${{directory:{keys}:truststore-path}}\n"
    )
    config = load_config(text, env={"KAFKA_A": "a1:9092,a2:9092"})
    client = config.flow("A", "B").source_consumer_config()
    assert client["bootstrap.servers"] == "a1:9092,a2:9092"
    assert client["sasl.username"] == "mm2"
    assert client["sasl.password"] == "s3cret"
    assert client["ssl.ca.location"] == "/etc/ca.pem"


def test_several_references_in_one_value() -> None:
    config = load_config(
        BASE + "A.bootstrap.servers = ${env:HOST}:${env:PORT}\n", env={"HOST": "h", "PORT": "1"}
    )
    assert config.cluster("A").bootstrap_servers == "h:1"


def test_redacted_views_show_references_and_hide_secrets(tmp_path: Path) -> None:
    secrets = tmp_path / "s.properties"
    secrets.write_text("pw = hunter22\n")
    text = BASE + (
        "A.bootstrap.servers = ${env:KAFKA_A}\n"
        "A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u" password="plain-in-file";\n'
        f"A.ssl.keystore.password = ${{file:{secrets}:pw}}\n"
    )
    config = load_config(text, env={"KAFKA_A": "secret-host:9092"})
    view = config.redacted()
    assert view["A.bootstrap.servers"] == "${env:KAFKA_A}"
    assert view["A.sasl.jaas.config"] == REDACTED
    assert view["A.ssl.keystore.password"] == REDACTED
    assert view["B.bootstrap.servers"] == "b:9092"
    flow_view = config.flow("A", "B").redacted()
    assert flow_view["source.cluster.bootstrap.servers"] == "${env:KAFKA_A}"
    rendered = (
        repr(config)
        + str(view)
        + str(flow_view)
        + repr(config.flow("A", "B"))
        + str(config.cluster("A").redacted())
    )
    for secret in ("secret-host", "plain-in-file", "hunter22"):
        assert secret not in rendered
    client = config.flow("A", "B").source_consumer_config()
    assert redact_client_config(client)["sasl.password"] == REDACTED
    assert redact_client_config({"ssl.key.pem": "k", "ssl.keystore.key": "k", "linger.ms": 5}) == {
        "ssl.key.pem": REDACTED,
        "ssl.keystore.key": REDACTED,
        "linger.ms": 5,
    }


def test_missing_env_variable_names_the_key() -> None:
    assert _errors(BASE + "A.bootstrap.servers = ${env:NOPE}\n") == [
        ("A.bootstrap.servers", "${env:NOPE}: environment variable NOPE is not set")
    ]


def test_unknown_provider_names_the_key() -> None:
    errors = _errors(BASE + "A.bootstrap.servers = a:1\nA.sasl.password = ${vault:secret/kafka:pw}\n")
    assert errors[0][0] == "A.sasl.password"
    assert "config provider 'vault'" in errors[0][1]


def test_missing_file_and_key(tmp_path: Path) -> None:
    present = tmp_path / "p.properties"
    present.write_text("a = 1\n")
    errors = _errors(
        BASE + f"A.bootstrap.servers = a:1\nA.x.password = ${{file:{tmp_path}/none.properties:a}}\n"
        f"B.y.password = ${{file:{present}:missing}}\n"
    )
    assert (
        "A.x.password",
        f"${{file:{tmp_path}/none.properties:a}}: cannot read {tmp_path}/none.properties: No such file or directory",
    ) in errors
    assert ("B.y.password", f"${{file:{present}:missing}}: {present} has no key missing") in errors


def test_directory_missing_file(tmp_path: Path) -> None:
    errors = _errors(BASE + f"A.bootstrap.servers = ${{directory:{tmp_path}:absent}}\n")
    assert errors == [
        ("A.bootstrap.servers", f"${{directory:{tmp_path}:absent}}: {tmp_path}/absent is not a file")
    ]


def test_env_allowlist_and_path_restrictions(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (tmp_path / "other.properties").write_text("k = v\n")
    text = (
        BASE + "config.providers.env.param.allowlist.pattern = KAFKA_.*\n"
        f"config.providers.file.param.allowed.paths = {allowed}\n"
        "A.bootstrap.servers = ${env:HOME_DIR}\n"
        f"A.ssl.key.password = ${{file:{tmp_path}/other.properties:k}}\n"
    )
    errors = dict(_errors(text, env={"HOME_DIR": "/root"}))
    assert "not allowed by config.providers.env.param.allowlist.pattern" in errors["A.bootstrap.servers"]
    assert "outside config.providers.file.param.allowed.paths" in errors["A.ssl.key.password"]


def test_env_provider_takes_no_path() -> None:
    errors = _errors(BASE + "A.bootstrap.servers = ${env:/x:HOST}\n", env={"HOST": "h"})
    assert "takes no path" in errors[0][1]


def test_provider_definitions_are_checked() -> None:
    config = parse_config(
        "config.providers = vault, env\n"
        "config.providers.vault.class = com.bettercloud.kafka.VaultConfigProvider\n"
        "clusters = A\n"
    )
    keys = {p.key: p for p in config.parse_problems}
    assert "cannot run the Java config provider" in keys["config.providers.vault.class"].message
    assert keys["config.providers.env.class"].message == "config provider 'env' has no class"


def test_unresolved_references_are_left_for_the_message_only() -> None:
    config = parse_config(BASE + "A.bootstrap.servers = ${env:NOPE}\n", env={})
    assert config.value("A.bootstrap.servers") == "${env:NOPE}"


def test_invalid_values_from_providers_are_not_echoed() -> None:
    errors = _errors(
        BASE + "A.bootstrap.servers = a:1\nA->B.replication.factor = ${env:RF}\n", env={"RF": "three-secret"}
    )
    assert errors == [
        (
            "A->B.replication.factor",
            "replication.factor: the value from ${env:RF} is invalid: '[redacted]' is not an integer",
        )
    ]
