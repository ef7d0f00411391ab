"""Every example config under include/config loads, and means what its comments say."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from mirrorflow.config import MirrorConfig, load_config
from mirrorflow.policy import (
    IdentityReplicationPolicy,
    LegacyReplicationPolicy,
    remote_topic,
    should_replicate_topic,
)

CONFIG_DIR = Path(__file__).resolve().parents[2] / "include" / "config"
ENV = {
    "MIRRORFLOW_DEMO_PRIMARY": "127.0.0.1:19092",
    "MIRRORFLOW_DEMO_BACKUP": "127.0.0.1:19093",
    "DC1_KEYSTORE_PASSWORD": "dc1-pass",
    "DC2_KEYSTORE_PASSWORD": "dc2-pass",
    "RETAIL_MIRROR_PASSWORD": "r",
    "LOGISTICS_MIRROR_PASSWORD": "l",
    "FINANCE_MIRROR_PASSWORD": "f",
    "PLATFORM_MIRROR_PASSWORD": "p",
}
REQUIRED = [
    "demo.properties",
    "active-active.properties",
    "aggregation.properties",
    "examples/bidirectional-tls.properties",
    "examples/three-source-aggregation.properties",
    "examples/hdinsight-style.properties",
    "examples/mm1-legacy.properties",
]


# Where the examples keep their TLS material; mirrorflow reads the stores when it loads a config.
SECRETS_DIR = "/etc/kafka/secrets/"


def _write_example_secrets(directory: Path) -> None:
    """The CA bundle and PKCS12 key stores bidirectional-tls.properties names, with ENV's passwords."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mirror")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    (directory / "ca-bundle.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    for dc in ("dc1", "dc2"):
        password = ENV[f"{dc.upper()}_KEYSTORE_PASSWORD"].encode()
        (directory / f"mirror-{dc}.p12").write_bytes(
            pkcs12.serialize_key_and_certificates(
                b"mirror", key, cert, None, serialization.BestAvailableEncryption(password)
            )
        )


def _load_example(path: Path, secrets: Path) -> MirrorConfig:
    """The example as written, its key and trust stores looked for in `secrets`."""
    text = path.read_text()
    if SECRETS_DIR not in text:
        return load_config(path, env=ENV)
    _write_example_secrets(secrets)
    return load_config(text.replace(SECRETS_DIR, f"{secrets}/"), env=ENV)


def test_required_examples_exist() -> None:
    for name in REQUIRED:
        assert (CONFIG_DIR / name).is_file(), name


@pytest.mark.parametrize(
    "path", sorted(CONFIG_DIR.rglob("*.properties")), ids=lambda p: str(p.relative_to(CONFIG_DIR))
)
def test_every_example_loads_and_builds_clients(path: Path, tmp_path: Path) -> None:
    config = _load_example(path, tmp_path)
    assert config.replication_flows
    for flow in config.flows:
        for method in (
            "source_consumer",
            "source_producer",
            "source_admin",
            "target_consumer",
            "target_producer",
            "target_admin",
        ):
            client = getattr(flow, f"{method}_config")(connection_extra=lambda conn_id: {})
            assert client["bootstrap.servers"]


def test_demo() -> None:
    config = load_config(CONFIG_DIR / "demo.properties", env=ENV)
    assert config.clusters == ("primary", "backup")
    [flow] = config.replication_flows
    assert flow.name == "primary->backup"
    assert flow.source_consumer_config()["bootstrap.servers"] == "127.0.0.1:19092"
    assert flow.target_producer_config()["bootstrap.servers"] == "127.0.0.1:19093"
    assert (
        flow.replication_factor,
        flow.offset_syncs_topic_replication_factor,
        flow.checkpoints_topic_replication_factor,
        flow.heartbeats_topic_replication_factor,
    ) == (1, 1, 1, 1)
    assert flow.offset_syncs_topic_location == "source"
    assert flow.offset_syncs_topic == "mm2-offset-syncs.backup.internal"
    assert remote_topic(flow, "orders") == "primary.orders"
    assert config.warnings == ()
    assert config.redacted()["primary.bootstrap.servers"] == "${env:MIRRORFLOW_DEMO_PRIMARY}"


def test_active_active() -> None:
    config = load_config(CONFIG_DIR / "active-active.properties")
    assert sorted(f.name for f in config.replication_flows) == ["east->west", "west->east"]
    east_west = config.flow("east", "west")
    assert should_replicate_topic(east_west, "orders")
    assert not should_replicate_topic(east_west, "west.orders")  # never sent back
    assert east_west.sync_group_offsets_enabled


def test_aggregation() -> None:
    config = load_config(CONFIG_DIR / "aggregation.properties")
    assert sorted(f.name for f in config.replication_flows) == ["apac->central", "eu->central", "us->central"]
    assert sorted(f.name for f in config.heartbeat_flows) == ["apac->central", "eu->central", "us->central"]
    assert {remote_topic(f, "clicks") for f in config.replication_flows} == {
        "eu.clicks",
        "us.clicks",
        "apac.clicks",
    }
    assert config.flow("eu", "central").replicate_schedule == "@hourly"


def test_bidirectional_tls(tmp_path: Path) -> None:
    config = _load_example(CONFIG_DIR / "examples/bidirectional-tls.properties", tmp_path)
    consumer = config.flow("dc1", "dc2").source_consumer_config()
    producer = config.flow("dc1", "dc2").target_producer_config()
    assert consumer["security.protocol"] == "SSL"
    assert consumer["ssl.ca.location"] == f"{tmp_path}/ca-bundle.pem"
    # Each cluster's PKCS12 key store, opened with its own password, reaches librdkafka as PEM.
    assert consumer["ssl.certificate.pem"] == (tmp_path / "ca-bundle.pem").read_text()
    assert consumer["ssl.key.pem"].startswith("-----BEGIN PRIVATE KEY-----")
    assert producer["ssl.key.pem"].startswith("-----BEGIN PRIVATE KEY-----")
    assert not any(key.startswith("ssl.keystore") for key in {**consumer, **producer})
    assert producer["compression.type"] == "zstd"
    assert config.warnings == ()


def test_three_source_aggregation() -> None:
    config = load_config(CONFIG_DIR / "examples/three-source-aggregation.properties", env=ENV)
    retail = config.flow("retail", "platform")
    assert retail.topic_filter.should_replicate_topic("pos.sales")
    assert not retail.topic_filter.should_replicate_topic("posXsales")
    assert retail.source_consumer_config()["sasl.username"] == "mirror-retail"
    assert retail.target_producer_config()["sasl.username"] == "mirror-platform"
    assert retail.offset_syncs_cluster == "platform"
    assert config.flow("finance", "platform").emit_checkpoints_interval is None


def test_hdinsight_style_blacklists() -> None:
    config = load_config(CONFIG_DIR / "examples/hdinsight-style.properties")
    flow = config.flow("primary", "secondary")
    assert not flow.topic_filter.should_replicate_topic("__transaction_state")
    assert not flow.group_filter.should_replicate_group("console-consumer-1")
    assert {p.key for p in config.warnings} == {
        "primary->secondary.topics.blacklist",
        "primary->secondary.groups.blacklist",
    }


def test_mm1_legacy() -> None:
    config = load_config(CONFIG_DIR / "examples/mm1-legacy.properties")
    flow = config.flow("source", "target")
    assert isinstance(flow.policy, LegacyReplicationPolicy)
    assert not isinstance(flow.policy, IdentityReplicationPolicy)
    assert remote_topic(flow, "orders") == "orders"
    assert flow.refresh_topics_interval is None
    assert flow.emit_checkpoints_interval is None
    assert flow.sync_topic_configs_interval is None
    assert flow.sync_topic_acls_interval is None
    assert config.heartbeat_flows == ()
    assert flow.source_consumer_config()["max.poll.records"] == "1000"
