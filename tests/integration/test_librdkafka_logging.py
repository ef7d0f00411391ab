"""librdkafka's own log lines as a run's task sees them.

Airflow's task supervisor logs whatever a task writes to stderr at ERROR, so a librdkafka line
printed there raw (its default logger) shows as an error however harmless it is (issue 10:
`%6|...|BGQUEUE|... Purging 1 unserved events` in every failover run). A cluster that is down
makes librdkafka log a failed connection on every reconnect backoff (about 1,160 ERROR lines in
one plan attempt). Both are checked on real clusters: lines go through Python logging at their
syslog level, never to stderr, and a cluster that is down costs one error, not a flood.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time

import pytest

from localkafka import LocalKafka
from mirrorflow.config import load_config
from mirrorflow.control.checkpoints import emit_checkpoints
from mirrorflow.control.group_sync import sync_group_offsets
from mirrorflow.control.topic_sync import run_sync_topic_configs
from mirrorflow.kafka import ClusterUnreachable
from mirrorflow.kafka_diagnosis import no_answer
from mirrorflow.replicate.service import plan_run

from ..conftest import Cluster
from .kafkatools import create_topics, produce
from .mirror_setup import mm2_text

LOGGER = "mirrorflow.librdkafka"
# librdkafka's default logger writes `%<syslog level>|<seconds>.<ms>|<facility>|...`.
RAW_LINE = re.compile(r"^%\d\|\d+\.\d+\|.*$", re.MULTILINE)
WAIT_MS = 2000


def raw_lines(text: str) -> list[str]:
    """librdkafka lines written the default way by clients of the flow. Every client mirrorflow
    makes is named after its flow (`A->B|role`); a client of an earlier test on this worker keeps
    librdkafka's default name (`rdkafka#producer-N`) and may still be calling a cluster that
    test stopped, on the same file descriptors."""
    return [line for line in RAW_LINE.findall(text) if "|rdkafka#" not in line]


def _librdkafka_lines(err: str, caplog: pytest.LogCaptureFixture) -> list[str]:
    raw = raw_lines(err)
    logged = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    return raw + logged


@pytest.mark.parametrize("down", ["source", "target"])
def test_a_cluster_that_is_down_fails_the_plan_within_its_wait_with_one_error(
    shared_clusters, local_kafka, tmp_path, caplog, capfd, unique, down
) -> None:
    a, b, _ = shared_clusters
    stopped: LocalKafka = local_kafka()
    stopped.stop()
    clusters = {
        "source": [Cluster("A", stopped.bootstrap), b],
        "target": [a, Cluster("B", stopped.bootstrap)],
    }
    alias = "A" if down == "source" else "B"
    topic = unique("orders")
    create_topics(a.bootstrap, (topic, 1))
    config = mm2_text(
        clusters[down],
        ["A->B"],
        f"A->B.topics = {topic}\nmirrorflow.cluster.unreachable.timeout.ms = {WAIT_MS}\n"
        f"{alias}.airflow.connection.id = kafka_{alias}\n",
    )
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    capfd.readouterr()  # the test's own setup clients log the default way

    started = time.monotonic()
    with pytest.raises(ClusterUnreachable) as raised:
        plan_run(config, "A", "B", run_id=unique("run"), connection_extra=lambda _conn_id: {})
    took = time.monotonic() - started

    # The wait is the configured one, not librdkafka's 60 s metadata timeout.
    assert took < WAIT_MS / 1000 + 10, f"the plan took {took:.0f}s to give up"
    message = str(raised.value)
    assert f"cluster {alias} ({down} of A->B) at {stopped.bootstrap} did not answer within 2s" in message
    assert (
        f"check {alias}.bootstrap.servers (or bootstrap.servers in Airflow connection 'kafka_{alias}') "
        "and that the cluster is up" in message
    )
    assert "mirrorflow.cluster.unreachable.timeout.ms sets the wait" in message
    assert raised.value.alias == alias
    out, err = capfd.readouterr()
    lines = _librdkafka_lines(out + err, caplog)
    assert len(lines) <= 3, lines[:10]


def test_librdkafka_lines_go_to_python_logging_at_their_own_level_never_to_stderr(
    shared_clusters, tmp_path, caplog, capfd, unique
) -> None:
    """librdkafka's debug lines, turned on the way a user would (`debug` in a cluster's Airflow
    connection), are level 7: they must reach the log as DEBUG records, and nothing of librdkafka
    may reach stderr, where Airflow would show it as ERROR."""
    a, b, _ = shared_clusters
    topic = unique("logged")
    create_topics(a.bootstrap, (topic, 1))
    produce(a.bootstrap, topic, [{"key": b"k", "value": b"v", "partition": 0}])
    config = mm2_text(
        [a, b],
        ["A->B"],
        f"A->B.topics = {topic}\nA.airflow.connection.id = debugging\nB.airflow.connection.id = debugging\n",
    )
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    capfd.readouterr()  # the test's own setup clients log the default way

    plan_run(
        config,
        "A",
        "B",
        run_id=unique("run"),
        connection_extra=lambda _conn_id: {"debug": "broker,protocol"},
    )

    out, err = capfd.readouterr()
    assert not raw_lines(out + err), raw_lines(out + err)[:5]
    records = [r for r in caplog.records if r.name == LOGGER]
    assert any(r.levelno == logging.DEBUG for r in records), "no librdkafka debug line reached Python logging"
    # A run that succeeds has no librdkafka line at ERROR (a fresh cluster's "coordinator load in
    # progress" is a WARNING, as librdkafka grades it).
    assert not [r.getMessage() for r in records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("job", ["checkpoints", "group sync", "topic configs"])
def test_the_offset_and_topic_jobs_fail_within_the_wait_with_one_error(
    local_kafka, shared_clusters, job
) -> None:
    """The scheduled jobs beside the copy start with the same check as a run: before it, the
    checkpoint job against a stopped target failed after 60 s with a bare TimeoutError."""
    a = shared_clusters[0]
    stopped: LocalKafka = local_kafka()
    stopped.stop()
    config = mm2_text(
        [a, Cluster("B", stopped.bootstrap)],
        ["A->B"],
        f"mirrorflow.cluster.unreachable.timeout.ms = {WAIT_MS}\nsync.group.offsets.enabled = true\n",
    )
    run = {
        "checkpoints": lambda: emit_checkpoints(config, "A", "B"),
        "group sync": lambda: sync_group_offsets(config, "A", "B"),
        "topic configs": lambda: run_sync_topic_configs(load_config(config).flow("A", "B")),
    }[job]

    started = time.monotonic()
    with pytest.raises(
        ClusterUnreachable, match=rf"cluster B \(target of A->B\) at {stopped.bootstrap} did not answer"
    ):
        run()
    assert time.monotonic() - started < WAIT_MS / 1000 + 10


def test_the_error_says_why_a_connection_failed_not_only_that_it_did(shared_clusters, unique) -> None:
    """A client speaking TLS to a plaintext listener: the metadata call alone says only "Broker
    transport failure"; the error adds the connection's own reason."""
    a, b, _ = shared_clusters
    config = mm2_text(
        [a, b],
        ["A->B"],
        f"mirrorflow.cluster.unreachable.timeout.ms = {WAIT_MS}\nB.security.protocol = SSL\n",
    )
    with pytest.raises(ClusterUnreachable) as raised:
        plan_run(config, "A", "B", run_id=unique("run"))
    message = str(raised.value)
    assert "cluster B (target of A->B)" in message
    assert "last connection error" in message and "SSL handshake failed" in message


def test_a_connection_that_fails_after_the_wait_still_says_why() -> None:
    """CI failure of the test above on a loaded machine: the plaintext listener ended the TLS
    handshake only after the probe's wait, so the error had no reason. An endpoint that ends each
    connection 1 s after the wait replays that moment on every run."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)
            threading.Timer(WAIT_MS / 1000 + 1.0, conn.close).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        why = no_answer(
            {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL"}, WAIT_MS / 1000
        )
    finally:
        listener.close()
        for conn in held:
            conn.close()
    assert why is not None and "last connection error" in why and "SSL handshake failed" in why, why
