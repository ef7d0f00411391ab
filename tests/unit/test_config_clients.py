"""Client configs: MM2's precedence and security propagation, then Java -> librdkafka translation,
checked by building real librdkafka clients from the results (no broker needed to build them)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from mirrorflow.config import ConfigError, FlowConfig, load_config, mapping_markdown, merge_connection_extra
from mirrorflow.config.java_credentials import parse_jaas
from mirrorflow.config.librdkafka import translate
from mirrorflow.config.providers import Setting

TWO = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b1:9092, b2:9092\nA->B.enabled = true\n"
ROLES = (
    "source_consumer",
    "source_producer",
    "source_admin",
    "target_consumer",
    "target_producer",
    "target_admin",
)


def _flow(extra: str = "", env: Mapping[str, str] | None = None) -> FlowConfig:
    return load_config(TWO + extra, env=env or {}).flow("A", "B")


def _configs(flow: FlowConfig) -> dict[str, dict[str, object]]:
    return {role: getattr(flow, f"{role}_config")() for role in ROLES}


def _settings(values: Mapping[str, str], prefix: str = "A.") -> dict[str, Setting]:
    return {key: Setting(value, prefix + key, value) for key, value in values.items()}


def test_bootstrap_and_consumer_defaults() -> None:
    configs = _configs(_flow())
    assert configs["source_consumer"] == {
        "bootstrap.servers": "a:9092",
        "enable.auto.commit": "false",
        "auto.offset.reset": "earliest",
        "client.id": "A->B|source-consumer",
    }
    assert configs["target_producer"] == {
        "bootstrap.servers": "b1:9092,b2:9092",
        "client.id": "A->B|target-producer",
        "allow.auto.create.topics": "false",
    }
    assert configs["source_producer"]["allow.auto.create.topics"] == "false"
    assert configs["source_admin"]["bootstrap.servers"] == "a:9092"
    assert configs["target_consumer"]["enable.auto.commit"] == "false"


def test_security_keys_propagate_from_cluster_and_top_level() -> None:
    flow = _flow(
        "security.protocol = SASL_SSL\nsasl.mechanism = PLAIN\n"
        "A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="a-secret";\n'
        "B.security.protocol = SSL\n"
    )
    configs = _configs(flow)
    for role in ("source_consumer", "source_producer", "source_admin"):
        assert configs[role]["security.protocol"] == "SASL_SSL"
        assert configs[role]["sasl.mechanism"] == "PLAIN"
        assert configs[role]["sasl.username"] == "alice"
        assert configs[role]["sasl.password"] == "a-secret"
    for role in ("target_consumer", "target_producer", "target_admin"):
        assert configs[role]["security.protocol"] == "SSL"  # cluster beats top level
        assert "sasl.username" not in configs[role]


def test_client_prefixed_settings_precedence() -> None:
    flow = _flow(
        "A.consumer.fetch.min.bytes = 10\n"
        "A->B.consumer.fetch.min.bytes = 20\n"
        "A->B.consumer.max.poll.interval.ms = 400000\n"
        "A->B.source.consumer.max.poll.interval.ms = 500000\n"
        "B.producer.linger.ms = 5\n"
        "A->B.producer.linger.ms = 7\n"
        "A->B.target.producer.batch.size = 65536\n"
        "A.admin.request.timeout.ms = 9000\n"
        "consumer.poll.timeout.ms = 250\n"
        "A.consumer.poll.timeout.ms = 750\n"
        "A.admin.timeout.ms = 750\n"
    )
    configs = _configs(flow)
    # source.consumer.* (from A.consumer.*) beats the flow's consumer.*
    assert configs["source_consumer"]["fetch.min.bytes"] == "10"
    assert configs["source_consumer"]["max.poll.interval.ms"] == "500000"
    # flow-level consumer.* reaches both consumers where nothing more specific is set
    assert configs["target_consumer"]["fetch.min.bytes"] == "20"
    assert configs["target_producer"]["linger.ms"] == "5"
    assert configs["target_producer"]["batch.size"] == "65536"
    assert configs["source_producer"]["linger.ms"] == "7"
    assert configs["source_admin"]["request.timeout.ms"] == "9000"
    # MM2's own consumer.poll.timeout.ms is not a client setting
    assert all("poll.timeout.ms" not in c and "timeout.ms" not in c for c in configs.values())
    assert flow.consumer_poll_timeout_ms == 250


def test_forced_consumer_settings_and_user_client_id() -> None:
    flow = _flow(
        "A.consumer.enable.auto.commit = true\nA.consumer.auto.offset.reset = latest\nA.consumer.client.id = mine\n"
    )
    config = flow.source_consumer_config()
    assert config["enable.auto.commit"] == "false"
    assert config["auto.offset.reset"] == "latest"
    assert config["client.id"] == "mine|A->B|source-consumer"


def test_cluster_level_plain_client_keys_do_not_reach_clients() -> None:
    flow = _flow("A.request.timeout.ms = 1234\n")
    assert "request.timeout.ms" not in flow.source_admin_config()


def test_librdkafka_credentials_spread_like_security_keys() -> None:
    flow = _flow("B.ssl.ca.location = /etc/ca.pem\nsasl.username = u\n")
    assert flow.target_admin_config()["ssl.ca.location"] == "/etc/ca.pem"
    assert "ssl.ca.location" not in flow.source_admin_config()
    assert flow.source_producer_config()["sasl.username"] == "u"


@pytest.mark.parametrize(
    ("java", "expected"),
    [
        ({"fetch.max.wait.ms": "100"}, {"fetch.wait.max.ms": "100"}),
        ({"max.request.size": "2097152"}, {"message.max.bytes": "2097152"}),
        ({"send.buffer.bytes": "131072"}, {"socket.send.buffer.bytes": "131072"}),
        ({"receive.buffer.bytes": "65536"}, {"socket.receive.buffer.bytes": "65536"}),
        ({"buffer.memory": "33554432"}, {"queue.buffering.max.kbytes": "32768"}),
        ({"auto.offset.reset": "none"}, {"auto.offset.reset": "error"}),
        ({"ssl.endpoint.identification.algorithm": ""}, {"ssl.endpoint.identification.algorithm": "none"}),
        (
            {"ssl.endpoint.identification.algorithm": "HTTPS"},
            {"ssl.endpoint.identification.algorithm": "https"},
        ),
        (
            {"partition.assignment.strategy": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"},
            {"partition.assignment.strategy": "cooperative-sticky"},
        ),
        (
            {"compression.type": "zstd", "compression.zstd.level": "5"},
            {"compression.type": "zstd", "compression.level": "5"},
        ),
        ({"compression.type": "lz4", "compression.zstd.level": "5"}, {"compression.type": "lz4"}),
        ({"bootstrap.servers": " a:1 , b:2 "}, {"bootstrap.servers": "a:1,b:2"}),
        ({"client.dns.lookup": "use_all_dns_ips"}, {"client.dns.lookup": "use_all_dns_ips"}),
        ({"queued.min.messages": "1000"}, {"queued.min.messages": "1000"}),
        (
            {"ssl.cipher.suites": "ECDHE-RSA-AES256-GCM-SHA384"},
            {"ssl.cipher.suites": "ECDHE-RSA-AES256-GCM-SHA384"},
        ),
    ],
)
def test_translation_table(java: dict[str, str], expected: dict[str, str]) -> None:
    config, problems = translate(_settings(java))
    assert config == expected
    assert problems == []


@pytest.mark.parametrize(
    "key",
    [
        "key.serializer",
        "value.deserializer",
        "max.block.ms",
        "interceptor.classes",
        "metric.reporters",
        "ssl.protocol",
        "sasl.login.refresh.window.factor",
        "partitioner.class",
    ],
)
def test_java_only_keys_are_dropped_with_a_warning(key: str) -> None:
    config, problems = translate(_settings({key: "x"}))
    assert config == {}
    assert [(p.key, p.severity.value) for p in problems] == [(f"A.{key}", "warning")]
    assert "Java-only" in problems[0].message


def test_iana_cipher_names_and_unknown_assignors_are_dropped() -> None:
    config, problems = translate(
        _settings(
            {
                "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                "partition.assignment.strategy": "org.apache.kafka.clients.consumer.StickyAssignor, range",
            }
        )
    )
    assert config == {"partition.assignment.strategy": "range"}
    assert {p.key for p in problems} == {"A.ssl.cipher.suites", "A.partition.assignment.strategy"}


def test_jaas_parsing() -> None:
    assert parse_jaas(
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2" password="p\\"w;x";'
    ) == ("org.apache.kafka.common.security.scram.ScramLoginModule", {"username": "mm2", "password": 'p"w;x'})
    assert parse_jaas("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab=/k;") == (
        "com.sun.security.auth.module.Krb5LoginModule",
        {"useKeyTab": "true", "keyTab": "/k"},
    )
    assert parse_jaas("not jaas at all") is None


def test_oauth_and_kerberos_jaas() -> None:
    oauth, problems = translate(
        _settings(
            {
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.login.callback.handler.class": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
                "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'clientId="mm2" clientSecret="s3cret" scope="kafka" extension_logicalCluster="lkc-1";',
            }
        )
    )
    assert problems == []
    assert oauth == {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "mm2",
        "sasl.oauthbearer.client.secret": "s3cret",
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
    }
    kerberos, problems = translate(
        _settings(
            {
                "sasl.kerberos.service.name": "kafka",
                "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
                'storeKey=true keyTab="/etc/mm2.keytab" principal="mm2@EXAMPLE.COM";',
            }
        )
    )
    assert problems == []
    assert kerberos == {
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.keytab": "/etc/mm2.keytab",
        "sasl.kerberos.principal": "mm2@EXAMPLE.COM",
    }


@pytest.mark.parametrize(
    ("jaas", "message"),
    [
        ("software.amazon.msk.auth.iam.IAMLoginModule required;", "no librdkafka equivalent"),
        (
            'org.apache.kafka.common.security.plain.PlainLoginModule required password="topsecret";',
            "lacks username or password",
        ),
        ("garbage", "cannot parse"),
    ],
)
def test_untranslatable_jaas_is_an_error(jaas: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _flow(f"A.sasl.jaas.config = {jaas}\n")
    [problem] = [p for p in info.value.problems if p.is_error]
    assert problem.key == "A.sasl.jaas.config"
    assert message in problem.message
    assert "topsecret" not in str(info.value)


def test_pkcs12_keystore_needs_its_password() -> None:
    with pytest.raises(ConfigError, match="PKCS12 key store /k.p12 needs its password") as info:
        _flow("B.ssl.keystore.type = PKCS12\nB.ssl.keystore.location = /k.p12\n")
    assert [p.key for p in info.value.problems if p.is_error] == ["B.ssl.keystore.password"]


def test_airflow_connection_extra_merges_over_file_settings() -> None:
    flow = _flow("B.airflow.connection.id = backup_kafka\nB.security.protocol = SASL_SSL\n")
    seen = []

    def extra(conn_id: str) -> dict[str, object]:
        seen.append(conn_id)
        return {
            "sasl.username": "from-airflow",
            "security.protocol": "SASL_PLAINTEXT",
            "enable.auto.commit": "true",
        }

    producer = flow.target_producer_config(connection_extra=extra)
    assert producer["security.protocol"] == "SASL_PLAINTEXT"
    assert producer["sasl.username"] == "from-airflow"
    consumer = flow.target_consumer_config(connection_extra=extra)
    assert consumer["enable.auto.commit"] == "false"  # forced, as MM2 forces it
    assert seen == ["backup_kafka", "backup_kafka"]


def test_no_connection_lookup_without_the_key() -> None:
    def refuse(conn_id: str) -> dict[str, object]:
        raise AssertionError("looked up a connection that is not configured")

    assert _flow().source_consumer_config(connection_extra=refuse)["bootstrap.servers"] == "a:9092"


def test_merge_is_pure() -> None:
    base = {"bootstrap.servers": "a:1", "enable.auto.commit": "false"}
    merged = merge_connection_extra(base, {"bootstrap.servers": "b:2"}, "consumer")
    assert merged == {"bootstrap.servers": "b:2", "enable.auto.commit": "false"}
    assert base == {"bootstrap.servers": "a:1", "enable.auto.commit": "false"}


def test_real_airflow_connection_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_BACKUP_KAFKA",
        '{"conn_type": "kafka", "extra": {"bootstrap.servers": "vault-b:9093", "sasl.password": "from-vault"}}',
    )
    monkeypatch.setenv("AIRFLOW_CONN_BACKUP_HTTP", '{"conn_type": "http", "host": "h"}')
    producer = _flow("B.airflow.connection.id = backup_kafka\n").target_producer_config()
    assert producer["bootstrap.servers"] == "vault-b:9093"
    assert producer["sasl.password"] == "from-vault"
    with pytest.raises(ConfigError, match="has type 'http'") as info:
        _flow("B.airflow.connection.id = backup_http\n").target_producer_config()
    assert info.value.problems[0].key == "B.airflow.connection.id"


def _write_tls_material(directory: Path) -> dict[str, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mirrorflow-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"keypass"),
    )
    paths = {"ca": directory / "ca.pem", "p12": directory / "client.p12", "pem": directory / "client.pem"}
    paths["ca"].write_bytes(cert_pem)
    paths["pem"].write_bytes(key_pem + cert_pem)
    paths["p12"].write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"client", key, cert, None, serialization.BestAvailableEncryption(b"storepass")
        )
    )
    return paths


def _build_clients(config: Mapping[str, object]) -> None:
    """librdkafka validates properties, certificates and keys when a client is created."""
    base = {k: v for k, v in config.items() if k != "bootstrap.servers"}
    producer_keys = {
        "message.max.bytes",
        "queue.buffering.max.kbytes",
        "compression.level",
        "compression.type",
        "linger.ms",
    }
    Producer(
        {
            k: v
            for k, v in base.items()
            if k not in {"fetch.wait.max.ms", "partition.assignment.strategy", "auto.offset.reset"}
        }
    )
    Consumer({**{k: v for k, v in base.items() if k not in producer_keys}, "group.id": "g"}).close()
    AdminClient({k: v for k, v in base.items() if k not in producer_keys})


@pytest.mark.parametrize("store", ["p12", "pem"])
def test_translated_tls_and_sasl_configs_build_real_librdkafka_clients(tmp_path: Path, store: str) -> None:
    paths = _write_tls_material(tmp_path)
    keystore = (
        f"A.ssl.keystore.type = PKCS12\nA.ssl.keystore.location = {paths['p12']}\nA.ssl.keystore.password = storepass\n"
        if store == "p12"
        else f"A.ssl.keystore.type = PEM\nA.ssl.keystore.location = {paths['pem']}\nA.ssl.key.password = keypass\n"
    )
    flow = _flow(
        "config.providers = env\n"
        "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        "A.security.protocol = SASL_SSL\nA.sasl.mechanism = SCRAM-SHA-512\n"
        "A.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="mm2" password="${env:MM2_PASSWORD}";\n'
        f"A.ssl.truststore.type = PEM\nA.ssl.truststore.location = {paths['ca']}\n"
        "A.ssl.endpoint.identification.algorithm =\n" + keystore + "A.consumer.fetch.max.wait.ms = 200\n"
        "A.consumer.partition.assignment.strategy = org.apache.kafka.clients.consumer.RoundRobinAssignor\n"
        "A.producer.max.request.size = 2097152\nA.producer.buffer.memory = 33554432\n"
        "A.producer.compression.type = zstd\nA.producer.compression.zstd.level = 3\n"
        "A.consumer.client.dns.lookup = use_all_dns_ips\n",
        env={"MM2_PASSWORD": "s3cret"},
    )
    consumer, producer = flow.source_consumer_config(), flow.source_producer_config()
    assert consumer["ssl.ca.location"] == str(paths["ca"])
    assert consumer["sasl.password"] == "s3cret"
    if store == "p12":
        # Read here and handed over in memory: no file for librdkafka, no password either.
        assert consumer["ssl.certificate.pem"] == paths["ca"].read_text()
        assert consumer["ssl.key.pem"].startswith("-----BEGIN PRIVATE KEY-----")
        assert not any(key.startswith("ssl.keystore") for key in consumer)
    else:
        assert consumer["ssl.certificate.location"] == consumer["ssl.key.location"] == str(paths["pem"])
    _build_clients({**consumer, **producer})


def test_mapping_table_markdown_lists_every_rule() -> None:
    table = mapping_markdown()
    for key in (
        "`max.request.size` | `message.max.bytes`",
        "`sasl.jaas.config`",
        "`key.serializer` | (dropped, warning)",
    ):
        assert key in table
