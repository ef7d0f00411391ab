"""The process and the connection layer: CLI, framing, ordering, bad input, many clients."""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from dbhelpers import create_topic, running_broker
from raw_protocol import RawClient, produce, record_batch
from raw_protocol import create_topic as raw_create_topic

from devbroker.launcher import READY, DevBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[DevBroker]:
    with running_broker(**{"socket.request.max.bytes": 1_000_000}) as b:
        yield b


def metadata_ok(bootstrap: str) -> bool:
    with RawClient(bootstrap) as client:
        response = client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
        return response.brokers[0].port == int(bootstrap.rsplit(":", 1)[1])


def test_cli_prints_one_ready_line_and_exits_cleanly_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "devbroker", "--port", "0", "--cluster-id", "cli-test"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        match = READY.match(line)
        assert match is not None, line
        assert match["cluster_id"] == "cli-test"
        assert metadata_ok(f"{match['host']}:{match['port']}")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert proc.stdout.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigint_is_a_clean_shutdown_too() -> None:
    broker = DevBroker().start()
    assert broker.process is not None
    broker.process.send_signal(signal.SIGINT)
    assert broker.process.wait(15) == 0


def test_unknown_override_is_a_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "devbroker", "--override", "no.such.config=1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "no.such.config" in result.stderr
    assert result.stdout == ""


def test_invalid_override_value_names_the_key() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "devbroker", "--override", "num.partitions=zero"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "num.partitions" in result.stderr


def test_unusable_data_dir_and_busy_port_are_clear_errors(broker: DevBroker, tmp_path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "devbroker", "--data-dir", str(not_a_dir)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "--data-dir" in result.stderr and str(not_a_dir) in result.stderr
    busy = subprocess.run(
        [sys.executable, "-m", "devbroker", "--port", str(broker.port)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert busy.returncode == 1
    assert f"cannot listen on 127.0.0.1:{broker.port}" in busy.stderr
    assert busy.stdout == ""


def test_override_defaults_apply() -> None:
    with running_broker(**{"num.partitions": 3}) as b, RawClient(b.bootstrap) as client:
        created = raw_create_topic(client, "defaults", partitions=-1)
        assert created.error_code == 0
        assert created.num_partitions == 3


def test_api_versions_advertises_what_is_implemented(broker: DevBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        response = client.request(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert response.error_code == 0
    assert versions[0] == (3, 11)  # Produce: Java 4.x needs >= 3, topic ids start at 13
    assert versions[1] == (4, 12)  # Fetch: names until 12
    assert versions[3][1] >= 12  # Metadata with topic ids
    assert versions[18] == (0, 4)


def test_unsupported_api_versions_version_gets_v0_error(broker: DevBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        header = struct.pack(">hhih", 18, 99, 7, 3) + b"raw" + b"\x00"
        client.send_raw(struct.pack(">i", len(header)) + header)
        frame = client.read_frame()
    correlation_id, error_code, count = struct.unpack_from(">ihi", frame, 0)
    assert (correlation_id, error_code, count) == (7, 35, 1)
    assert struct.unpack_from(">hhh", frame, 10) == (18, 0, 4)


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(struct.pack(">i", 200_000_000), id="oversized"),
        pytest.param(struct.pack(">i", -5), id="negative-size"),
        pytest.param(struct.pack(">i", 10) + struct.pack(">hhi", 9999, 0, 1) + b"\0\0", id="unknown-api-key"),
        pytest.param(struct.pack(">i", 10) + struct.pack(">hhih", 3, 99, 1, -1), id="unsupported-version"),
        pytest.param(
            struct.pack(">i", 14) + struct.pack(">hhih", 3, 12, 1, 50) + b"ab\0\0", id="malformed-body"
        ),
        pytest.param(struct.pack(">i", 3) + b"abc", id="shorter-than-a-header"),
    ],
)
def test_bad_input_closes_only_that_connection(broker: DevBroker, payload: bytes) -> None:
    with RawClient(broker.bootstrap) as bystander, RawClient(broker.bootstrap) as offender:
        offender.send_raw(payload)
        assert offender.is_closed()
        response = bystander.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})
        assert response.cluster_id == broker.cluster_id
    assert metadata_ok(broker.bootstrap)


def test_truncated_request_then_disconnect_leaves_broker_serving(broker: DevBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        frame = client.encode(3, 12, {"topics": None, "allow_auto_topic_creation": False}, 1)
        client.send_raw(frame[: len(frame) // 2])
    assert metadata_ok(broker.bootstrap)


def test_oversized_limit_comes_from_socket_request_max_bytes(broker: DevBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, "big-requests")
        batch = record_batch([b"x" * 1_100_000])
        client.send(
            0,
            9,
            {
                "acks": 1,
                "timeout": 1000,
                "topic_data": [{"name": "big-requests", "partition_data": [{"index": 0, "records": batch}]}],
            },
        )
        assert client.is_closed()
    assert metadata_ok(broker.bootstrap)


def test_pipelined_requests_are_answered_in_order(broker: DevBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, "pipelined")
        ids = []
        for i in range(20):
            if i % 2:
                ids.append(
                    (
                        3,
                        12,
                        client.send(
                            3, 12, {"topics": [{"name": "pipelined"}], "allow_auto_topic_creation": False}
                        ),
                    )
                )
            else:
                batch = record_batch([b"v%d" % i])
                ids.append(
                    (
                        0,
                        9,
                        client.send(
                            0,
                            9,
                            {
                                "acks": 1,
                                "timeout": 1000,
                                "topic_data": [
                                    {"name": "pipelined", "partition_data": [{"index": 0, "records": batch}]}
                                ],
                            },
                        ),
                    )
                )
        offsets = []
        for api_key, version, correlation_id in ids:
            response = client.receive(api_key, version, correlation_id)
            if api_key == 0:
                offsets.append(response.responses[0].partition_responses[0].base_offset)
    assert offsets == list(range(10))


def test_acks_zero_gets_no_response(broker: DevBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        raw_create_topic(client, "acks-zero")
        client.send(
            0,
            9,
            {
                "acks": 0,
                "timeout": 1000,
                "topic_data": [
                    {
                        "name": "acks-zero",
                        "partition_data": [{"index": 0, "records": record_batch([b"fire-and-forget"])}],
                    }
                ],
            },
        )
        correlation_id = client.send(
            2,
            8,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": "acks-zero", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
            },
        )
        response = client.receive(2, 8, correlation_id)  # the next frame answers ListOffsets
    assert response.topics[0].partitions[0].offset == 1


def test_long_poll_fetch_delays_later_requests_on_that_connection(broker: DevBroker) -> None:
    with RawClient(broker.bootstrap) as client, RawClient(broker.bootstrap) as producer_side:
        raw_create_topic(client, "long-poll")
        fetch_id = client.send(
            1,
            12,
            {
                "max_wait": 30000,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": "long-poll",
                        "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
        metadata_id = client.send(3, 12, {"topics": None, "allow_auto_topic_creation": False})
        client.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            client.sock.recv(1, socket.MSG_PEEK)
        assert produce(producer_side, "long-poll", 0, record_batch([b"wake up"])).error_code == 0
        client.sock.settimeout(10)
        fetched = client.receive(1, 12, fetch_id)
        assert fetched.responses[0].partitions[0].high_watermark == 1
        assert client.receive(3, 12, metadata_id).cluster_id == broker.cluster_id


def test_many_concurrent_clients(broker: DevBroker) -> None:
    create_topic(broker.bootstrap, "concurrent", partitions=4)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1})
            for i in range(50):
                producer.produce("concurrent", value=f"{n}-{i}".encode(), partition=n % 4)
            assert producer.flush(30) == 0
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    total = sum(
        consumer.get_watermark_offsets(TopicPartition("concurrent", p), timeout=10)[1] for p in range(4)
    )
    consumer.close()
    assert total == 24 * 50
