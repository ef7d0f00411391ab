"""Every job on secured clusters, with the secrets nowhere they could be read.

Two clusters serve SASL_SSL with SCRAM-SHA-512 (trusted through a PEM CA) and mutual TLS. The
jobs (replicate, migrate, checkpoints, group sync, heartbeats, topic refresh, config and ACL
sync, failover, the status page and its metrics) run with the credentials written the three
ways an MM2 user has them: in the properties file as MM2 reads it (`sasl.jaas.config`), through
`${env:...}` / `${file:...}` config providers, and from Airflow connections of type kafka; and
over mutual TLS. Everything they print or log (librdkafka's debug output included), every run
record they store in Kafka, the status page and the metrics are searched for the SCRAM
password: it must not be there.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localkafka import LocalKafka, Security, TlsFiles, make_tls
from mirrorflow.clients import FlowClients
from mirrorflow.config import load_config
from mirrorflow.control.checkpoints import emit_checkpoints
from mirrorflow.control.group_sync import sync_group_offsets
from mirrorflow.control.heartbeats import emit_heartbeats
from mirrorflow.control.topic_sync import run_refresh_topics, run_sync_topic_acls, run_sync_topic_configs
from mirrorflow.kafka import LIBRDKAFKA_LOG, RepeatFilter
from mirrorflow.ops.failover import failover
from mirrorflow.replicate import run_reading
from mirrorflow.replicate.copy import copy_unit
from mirrorflow.replicate.plan import Plan
from mirrorflow.replicate.runner import copy_job_for, store_report
from mirrorflow.replicate.service import plan_run, report_run

from ..conftest import cluster_pair
from .kafkatools import create_topics, produce, read_topic
from .status_helpers import status_client
from .test_failover_helpers import commit_at

pytestmark = pytest.mark.local_kafka

PASSWORD = "scram-Pass-71-never-shown"
USER = "mirror"
PARTITIONS = 2
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PROVIDERS = (
    "config.providers = env, file\n"
    "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
    "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n"
)
SINGLE_BROKER = (
    "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
    "heartbeats.topic.replication.factor = 1\noffset.storage.replication.factor = 1\n"
)


@dataclasses.dataclass
class SecuredPair:
    tls: TlsFiles
    a: LocalKafka
    b: LocalKafka
    directory: Path


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredPair]:
    directory = tmp_path_factory.mktemp("secured")
    tls = make_tls(directory / "tls", clients=(USER,))
    security = Security(listeners=("SASL_SSL", "MTLS"), scram_users={USER: PASSWORD}, tls=tls)
    with cluster_pair(tmp_path_factory, security) as (a, b):
        yield SecuredPair(tls, a, b, directory)


def config_text(pair: SecuredPair, how: str, topic: str) -> str:
    """The same flow A->B with the credentials written `how`."""
    lines = [
        "clusters = A, B",
        "A->B.enabled = true",
        f"A->B.topics = {topic}",
        "sync.group.offsets.enabled = true",
        SINGLE_BROKER + (PROVIDERS if how == "providers" else ""),
    ]
    secrets = pair.directory / "secrets.properties"
    secrets.write_text(f"password={PASSWORD}\n")
    for alias, kafka in (("A", pair.a), ("B", pair.b)):
        # librdkafka's security debug output too must not show the password.
        lines += [f"{alias}.{client}.debug = security" for client in ("consumer", "producer", "admin")]
        if how == "mtls":
            client = pair.tls.client(USER)
            lines += [
                f"{alias}.bootstrap.servers = {kafka.bootstrap_for('MTLS')}",
                f"{alias}.security.protocol = SSL",
                f"{alias}.ssl.truststore.type = PEM",
                f"{alias}.ssl.truststore.location = {pair.tls.ca}",
                f"{alias}.ssl.certificate.location = {client.certificate}",
                f"{alias}.ssl.key.location = {client.key}",
            ]
            continue
        lines += [
            f"{alias}.bootstrap.servers = {kafka.bootstrap_for('SASL_SSL')}",
            f"{alias}.security.protocol = SASL_SSL",
            f"{alias}.sasl.mechanism = SCRAM-SHA-512",
            f"{alias}.ssl.truststore.type = PEM",
            f"{alias}.ssl.truststore.location = {pair.tls.ca}",
        ]
        if how == "file":
            lines.append(
                f'{alias}.sasl.jaas.config = {SCRAM_MODULE} required username="{USER}" password="{PASSWORD}";'
            )
        elif how == "providers":
            secret = "${env:MIRROR_SCRAM_PASSWORD}" if alias == "A" else f"${{file:{secrets}:password}}"
            lines.append(
                f'{alias}.sasl.jaas.config = {SCRAM_MODULE} required username="{USER}" password="{secret}";'
            )
        else:  # the Airflow connection holds the credentials; the file only says how to connect
            lines.append(f"{alias}.airflow.connection.id = kafka_{alias.lower()}")
    return "\n".join(lines) + "\n"


def connection_extra(conn_id: str) -> dict[str, str]:
    assert conn_id in ("kafka_a", "kafka_b")
    return {"sasl.username": USER, "sasl.password": PASSWORD}


def replicate(config, extra) -> dict:
    """One run as the replicate DAG does it: plan, copy every unit, store the report, summarise."""
    flow = config.flow("A", "B")
    clients = FlowClients.resolve(flow, extra)
    run_id = f"secured-{time.monotonic_ns()}"
    planned = plan_run(config, "A", "B", run_id=run_id, connection_extra=extra)
    plan = Plan.from_json(run_reading.read_run_record(clients.target_consumer, planned["plan_offset"])[3])
    job = copy_job_for(flow, clients, plan)
    store_report(clients, plan, [copy_unit(job, unit) for unit in plan.units()], int(time.time() * 1000))
    return report_run(
        config,
        "A",
        "B",
        run_id=run_id,
        plan_offset=planned["plan_offset"],
        topic_errors=planned["topic_errors"],
        connection_extra=extra,
    )


@pytest.mark.parametrize("how", ["file", "providers", "airflow-connection", "mtls"])
def test_every_job_runs_on_secured_clusters_and_no_secret_is_shown(
    secured, how, caplog, capfd, monkeypatch, unique
) -> None:
    monkeypatch.setenv("MIRROR_SCRAM_PASSWORD", PASSWORD)
    # librdkafka's lines of a kind pass once per 30 s in a process: forget the earlier cases'
    # lines, so that this case's debug output is all searched.
    for repeat_filter in (f for f in LIBRDKAFKA_LOG.filters if isinstance(f, RepeatFilter)):
        monkeypatch.setattr(repeat_filter, "seen", {})
    # Set-up and checks go through the clusters' plaintext listener; the jobs never do.
    topic, group = unique("orders"), unique("readers")
    create_topics(secured.a.bootstrap, (topic, PARTITIONS))
    produce(
        secured.a.bootstrap,
        topic,
        [{"value": f"{i}".encode(), "partition": i % PARTITIONS} for i in range(40)],
    )
    commit_at(secured.a.bootstrap, group, {(topic, p): 7 for p in range(PARTITIONS)})

    text = config_text(secured, how, topic)
    config = load_config(text)
    extra = connection_extra if how == "airflow-connection" else None
    caplog.set_level(logging.DEBUG)
    capfd.readouterr()

    summary = replicate(config, extra)
    assert summary["totals"]["records"] == 40 and not summary["failed"], summary
    migrated = plan_run(config, "A", "B", run_id=unique("migrate"), mode="migrate", connection_extra=extra)
    assert migrated["plan_offset"] >= 0
    assert emit_checkpoints(config, "A", "B", connection_extra=extra)["emitted"] >= 1
    sync_group_offsets(config, "A", "B", connection_extra=extra)
    emit_heartbeats([config.resolved_flow("A", "B")[0]], connection_extra=extra)
    flow = config.flow("A", "B")
    run_refresh_topics(flow, connection_extra=extra)
    run_sync_topic_configs(flow, connection_extra=extra)
    run_sync_topic_acls(flow, connection_extra=extra)
    moved = failover(config, "A", "B", group, dry_run=True, connection_extra=extra)
    assert [r.target_offset for r in moved.rows] == [7] * PARTITIONS
    with status_client(config, connection_extra=extra) as status_app:
        status, metrics = status_app.get("/status"), status_app.get("/metrics")
    assert status.status_code == 200 and metrics.status_code == 200
    assert topic in status.text and "mirrorflow_" in metrics.text

    # The copy arrived, every record.
    copied = read_topic(secured.b.bootstrap, f"A.{topic}", PARTITIONS)
    assert sum(len(records) for records in copied.values()) == 40

    printed = capfd.readouterr()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    records = "\n".join(
        body
        for _, _, _, _, body in run_reading.iter_run_records(FlowClients.resolve(flow, extra).target_consumer)
    )
    # The search covered librdkafka's security debug lines (SASL handshakes, TLS), not only ours.
    assert ("SCRAM-SHA-512" if how != "mtls" else "SSL") in logged
    for where, content in {
        "stdout": printed.out,
        "stderr": printed.err,
        "logs": logged,
        "run records": records,
        "status page": status.text,
        "metrics": metrics.text,
    }.items():
        assert PASSWORD not in content, f"the SCRAM password is in the {where}"
