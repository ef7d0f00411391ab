"""A cluster that cannot be reached says why in its own words, and at once when the reason is
certain (issue 10): a host that does not resolve is a DNS problem, not 15 s of "did not answer";
a SASL client at a plaintext listener, or a plaintext client at a SASL listener, is a protocol
mismatch with the setting to change. Checked on a real broker with both listeners."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from localkafka import LocalKafka, Security
from mirrorflow.cli import main
from mirrorflow.kafka_diagnosis import no_answer

from ..conftest import Cluster
from .mirror_setup import mm2_text

WAIT_S = 15.0
USER, PASSWORD = "mirror", "mirror-Secret-93"
SCRAM = (
    "sasl.mechanism = SCRAM-SHA-512\n"
    "{alias}.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="{USER}" password="{PASSWORD}";\n'
)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory):
    kafka = LocalKafka(
        tmp_path_factory.mktemp("sasl"),
        security=Security(listeners=("SASL_PLAINTEXT",), scram_users={USER: PASSWORD}),
    ).start()
    yield kafka
    kafka.stop()


def _validate(tmp_path, text: str) -> tuple[dict, float]:
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    started = time.monotonic()
    result = CliRunner().invoke(
        main, ["validate", "--connect", "--connect-timeout", str(WAIT_S), "--output", "json", str(path)]
    )
    took = time.monotonic() - started
    assert result.exit_code == 1, result.output
    return json.loads(result.output), took


def _error(body: dict, key: str) -> str:
    [problem] = [p for p in body["problems"] if p["severity"] == "error" and p["key"] == key]
    return problem["problem"]


def test_a_host_that_does_not_resolve_is_named_as_dns_in_seconds(shared_clusters, tmp_path) -> None:
    a, _, _ = shared_clusters
    nowhere = Cluster("B", "no-such-broker.invalid:9092")
    body, took = _validate(tmp_path, mm2_text([a, nowhere], ["A->B"]))
    message = _error(body, "B.bootstrap.servers")
    assert "cannot resolve host no-such-broker.invalid (DNS" in message, message
    assert "did not answer" not in message
    assert took < WAIT_S / 2, f"took {took:.1f}s, the whole wait is {WAIT_S}s"


def test_sasl_client_at_a_plaintext_listener_is_a_protocol_mismatch(secured: LocalKafka, tmp_path) -> None:
    plain = Cluster("A", secured.bootstrap)
    sasl = Cluster("B", secured.bootstrap_for("SASL_PLAINTEXT"))
    extra = "A.security.protocol = SASL_PLAINTEXT\nA." + SCRAM.format(alias="A")
    extra += "B.security.protocol = SASL_PLAINTEXT\nB." + SCRAM.format(alias="B")
    body, took = _validate(tmp_path, mm2_text([plain, sasl], ["A->B"], extra))
    message = _error(body, "A.bootstrap.servers")
    assert "likely a security protocol mismatch" in message, message
    assert "security.protocol=SASL_PLAINTEXT" in message and "does not expect SASL" in message
    assert "security.protocol=PLAINTEXT" in message
    assert PASSWORD not in json.dumps(body)
    assert [p for p in body["problems"] if p["key"] == "B.bootstrap.servers"] == []  # the right listener
    assert took < WAIT_S / 2, f"took {took:.1f}s, the whole wait is {WAIT_S}s"


def test_plaintext_client_at_a_sasl_listener_is_a_protocol_mismatch(secured: LocalKafka) -> None:
    started = time.monotonic()
    why = no_answer({"bootstrap.servers": secured.bootstrap_for("SASL_PLAINTEXT")}, WAIT_S)
    took = time.monotonic() - started
    assert why is not None and why.startswith("likely a security protocol mismatch"), why
    assert "security.protocol=SASL_PLAINTEXT with sasl.mechanism" in why
    assert took < WAIT_S / 2, f"took {took:.1f}s"


def test_refused_credentials_are_named_at_once(secured: LocalKafka) -> None:
    config = {
        "bootstrap.servers": secured.bootstrap_for("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": USER,
        "sasl.password": "not-the-password",
    }
    started = time.monotonic()
    why = no_answer(config, WAIT_S)
    assert why is not None and why.startswith("authentication failed (SASL)"), why
    assert "not-the-password" not in why
    assert time.monotonic() - started < WAIT_S / 2
    config["sasl.password"] = PASSWORD
    assert no_answer(config, WAIT_S) is None
