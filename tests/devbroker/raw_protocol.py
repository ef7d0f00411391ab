"""A minimal Kafka protocol client on kio and a plain socket, for requests real clients will not
send on purpose (duplicate or out-of-order sequences, stale epochs, malformed frames)."""

from __future__ import annotations

import io
import itertools
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from devbroker import batches
from devbroker.wire import build


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def encode(self, api_key: int, version: int, body: dict[str, Any], correlation_id: int) -> bytes:
        schema = load_request_schema(api_key, version)
        header_type = schema.__header_schema__
        header = header_type(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id="raw",
        )
        out = io.BytesIO()
        entity_writer(header_type)(out, header)
        entity_writer(schema)(out, build(schema, body))
        data = out.getvalue()
        return struct.pack(">i", len(data)) + data

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        correlation_id = next(self._ids)
        self.sock.sendall(self.encode(api_key, version, body, correlation_id))
        return correlation_id

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return self._read_exactly(size)

    def receive(self, api_key: int, version: int, correlation_id: int) -> Any:
        frame = self.read_frame()
        schema = load_response_schema(api_key, version)
        (got,) = struct.unpack_from(">i", frame, 0)
        assert got == correlation_id, f"response for correlation id {got}, expected {correlation_id}"
        offset = 4
        if schema.__header_schema__.__flexible__ and api_key != 18:
            offset += 1  # empty tagged fields
        body, _ = entity_reader(schema)(frame, offset)
        return body

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        return self.receive(api_key, version, self.send(api_key, version, body))

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True once the broker has closed this connection."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionError:
            return True
        except TimeoutError:
            return False

    def _read_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)


def record_batch(
    values: list[bytes | None],
    *,
    keys: list[bytes | None] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    timestamp: int = 1_700_000_000_000,
    codec: int = batches.NONE,
) -> bytes:
    keys = keys or [None] * len(values)
    records = [
        batches.Record(offset_delta=i, timestamp_delta=i, key=k, value=v, headers=[])
        for i, (k, v) in enumerate(zip(keys, values, strict=True))
    ]
    attributes = codec | (batches.TRANSACTIONAL_BIT if transactional else 0)
    return batches.build_batch(
        base_offset=0,
        records=records,
        attributes=attributes,
        base_timestamp=timestamp,
        max_timestamp=timestamp + len(values) - 1,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def produce(
    client: RawClient,
    topic: str,
    partition: int,
    batch: bytes,
    *,
    acks: int = -1,
    transactional_id: str | None = None,
) -> Any:
    """One Produce v9 request for one partition; returns that partition's response."""
    response = client.request(
        0,
        9,
        {
            "transactional_id": transactional_id,
            "acks": acks,
            "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
        },
    )
    return response.responses[0].partition_responses[0]


def fetch(
    client: RawClient,
    topic: str,
    offset: int = 0,
    *,
    max_bytes: int = 1 << 20,
    partition_max: int = 1 << 20,
    isolation: int = 0,
    partitions: tuple[int, ...] = (0,),
) -> Any:
    """One sessionless Fetch v12 for `partitions` of one topic, answered at once (max_wait 0)."""
    return client.request(
        1,
        12,
        {
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": max_bytes,
            "isolation_level": isolation,
            "session_id": 0,
            "session_epoch": -1,
            "forgotten_topics_data": [],
            "rack_id": "",
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": p, "fetch_offset": offset, "partition_max_bytes": partition_max}
                        for p in partitions
                    ],
                }
            ],
        },
    )


def create_topic(
    client: RawClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> Any:
    response = client.request(
        19,
        7,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            "timeout": 10000,
            "validate_only": False,
        },
    )
    return response.topics[0]


def init_producer_id(
    client: RawClient, transactional_id: str | None = None, timeout_ms: int = 60000
) -> tuple[int, int]:
    response = client.request(
        22,
        4,
        {
            "transactional_id": transactional_id,
            "transaction_timeout": timeout_ms,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    )
    assert response.error_code == 0, response
    return response.producer_id, response.producer_epoch


def describe_transaction(client: RawClient, transactional_id: str) -> dict[str, Any]:
    """DescribeTransactions v0 for one id, decoded by hand: kio refuses the -1 start time that
    Kafka reports for transactions that are not running."""
    client.send(65, 0, {"transactional_ids": [transactional_id]})
    frame = client.read_frame()
    pos = 4 + 1 + 4 + 1  # correlation id, header tags, throttle time, array length (one entry)
    (error_code,) = struct.unpack_from(">h", frame, pos)
    pos += 2
    fields = []
    for _ in range(2):  # transactional id, state: compact strings of < 127 bytes
        length = frame[pos] - 1
        fields.append(frame[pos + 1 : pos + 1 + length].decode())
        pos += 1 + length
    timeout_ms, start_ms, producer_id, epoch = struct.unpack_from(">iqqh", frame, pos)
    return {
        "error_code": error_code,
        "transactional_id": fields[0],
        "state": fields[1],
        "timeout_ms": timeout_ms,
        "start_ms": start_ms,
        "producer_id": producer_id,
        "producer_epoch": epoch,
    }
