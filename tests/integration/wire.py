"""A few Kafka protocol requests written by hand, to put a real broker in states no well-behaved
client leaves it in: a transaction open in a partition that its coordinator knows nothing of (a
"hanging" transaction, as a broker that dropped its abort markers leaves one).

librdkafka only writes a transactional batch into a partition after AddPartitionsToTxn, so the
coordinator always knows; Kafka before transactions v2 accepts such a batch from any producer id
when partition verification is off (transaction.partition.verification.enable=false, as on
brokers before 3.6). A test sends InitProducerId for a transactional.id to learn the id and
epoch its writer gets, then a Produce request with a transactional batch of that id: the
partition then holds an open transaction of that producer id that no coordinator will end.

And ListTransactions, which confluent-kafka's AdminClient lacks: the suite ends the transactions
earlier tests left open before it deletes their topics (tests/conftest.py).

Single-node clusters only (the node is every coordinator and every leader).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Sequence

Headers = Sequence[tuple[str, bytes | None]]

_CRC32C_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE.append(_c)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)  # zigzag
    out = bytearray()
    while True:
        if value & ~0x7F:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        else:
            out.append(value)
            return bytes(out)


def _bytes_field(data: bytes | None) -> bytes:
    return _varint(-1) if data is None else _varint(len(data)) + data


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def record_batch(
    producer_id: int,
    epoch: int,
    base_sequence: int,
    records: Sequence[tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Headers]],
    timestamp_ms: int,
    *,
    transactional: bool = True,
) -> bytes:
    """A v2 record batch of (key, value) or (key, value, headers) records."""
    body = bytearray()
    for delta, (key, value, *rest) in enumerate(records):
        headers: Headers = rest[0] if rest else []
        record = b"\x00" + _varint(0) + _varint(delta) + _bytes_field(key) + _bytes_field(value)
        record += _varint(len(headers))
        for name, header in headers:
            record += _bytes_field(name.encode()) + _bytes_field(header)
        body += _varint(len(record)) + record
    attributes = 0x10 if transactional else 0
    after_crc = struct.pack(
        ">hiqqqhii",
        attributes,
        len(records) - 1,
        timestamp_ms,
        timestamp_ms,
        producer_id,
        epoch,
        base_sequence,
        len(records),
    ) + bytes(body)
    # baseOffset, batchLength (from partitionLeaderEpoch on), partitionLeaderEpoch, magic, crc
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiib", 0, length, -1, 2) + struct.pack(">I", crc32c(after_crc)) + after_crc


class Wire:
    """One connection to a broker, one request at a time."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation = 0

    def request(self, api_key: int, version: int, body: bytes, *, flexible: bool = False) -> bytes:
        """The response after its correlation id (a flexible response's header tags included)."""
        self.correlation += 1
        header = struct.pack(">hhi", api_key, version, self.correlation) + _string("mirrorflow-test")
        if flexible:
            header += b"\x00"  # request header v2: no tagged fields
        message = header + body
        self.sock.sendall(struct.pack(">i", len(message)) + message)
        size = struct.unpack(">i", self._read(4))[0]
        response = self._read(size)
        assert struct.unpack(">i", response[:4])[0] == self.correlation
        return response[4:]

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


COORDINATOR_NOT_READY = (14, 15, 16)  # load in progress, not available, not coordinator
PARTITION_NOT_READY = (3, 5, 6)  # unknown topic or partition, leader not available, not leader


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _read_compact_string(data: bytes, at: int) -> tuple[str, int]:
    length, at = _read_uvarint(data, at)
    return data[at : at + length - 1].decode(), at + length - 1


def _skip_tags(data: bytes, at: int) -> int:
    count, at = _read_uvarint(data, at)
    for _ in range(count):
        _, at = _read_uvarint(data, at)
        size, at = _read_uvarint(data, at)
        at += size
    return at


def list_transactions(bootstrap: str, states: Sequence[str]) -> dict[str, str]:
    """Transactional id -> state of every transaction the node coordinates in one of `states`
    ("Ongoing", "PrepareCommit", "PrepareAbort", ...): ListTransactions v0, a flexible request."""
    body = _uvarint(len(states) + 1)
    for state in states:
        body += _uvarint(len(state) + 1) + state.encode()
    body += _uvarint(1) + b"\x00"  # no producer id filter; no tagged fields
    wire = Wire(bootstrap)
    try:
        response = wire.request(66, 0, body, flexible=True)
    finally:
        wire.close()
    at = _skip_tags(response, 0)  # the response header's tagged fields
    _, error = struct.unpack(">ih", response[at : at + 6])
    if error:
        raise RuntimeError(f"ListTransactions failed with error code {error}")
    at += 6
    unknown, at = _read_uvarint(response, at)
    for _ in range(max(0, unknown - 1)):
        _, at = _read_compact_string(response, at)
    count, at = _read_uvarint(response, at)
    found = {}
    for _ in range(max(0, count - 1)):
        transactional_id, at = _read_compact_string(response, at)
        at += 8  # producer id
        state, at = _read_compact_string(response, at)
        at = _skip_tags(response, at)
        found[transactional_id] = state
    return found


def init_producer_id(bootstrap: str, transactional_id: str, timeout_ms: int = 60000) -> tuple[int, int]:
    """(producer id, epoch) the coordinator gives `transactional_id` now (InitProducerId v1).
    FindCoordinator (v1) first: on a new cluster it creates the transaction state topic."""
    wire = Wire(bootstrap)
    try:
        deadline = time.monotonic() + 30
        while True:
            wire.request(10, 1, _string(transactional_id) + b"\x01")
            response = wire.request(22, 1, _string(transactional_id) + struct.pack(">i", timeout_ms))
            _, error, producer_id, epoch = struct.unpack(">ihqh", response[:16])
            if error not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        wire.close()
    if error:
        raise RuntimeError(f"InitProducerId for {transactional_id} failed with error code {error}")
    return producer_id, epoch


def produce_batch(
    bootstrap: str, topic: str, partition: int, batch: bytes, transactional_id: str | None
) -> int:
    """Append one record batch (Produce v3, acks=all); returns its base offset."""
    body = (
        _string(transactional_id)
        + struct.pack(">hi", -1, 30000)
        + struct.pack(">i", 1)
        + _string(topic)
        + struct.pack(">i", 1)
        + struct.pack(">ii", partition, len(batch))
        + batch
    )
    deadline = time.monotonic() + 30
    while True:
        wire = Wire(bootstrap)
        try:
            response = wire.request(0, 3, body)
        finally:
            wire.close()
        # [topic [partition error base_offset log_append_time]] throttle
        (topics,) = struct.unpack(">i", response[:4])
        assert topics == 1
        (name_length,) = struct.unpack(">h", response[4:6])
        offset = 6 + name_length
        (partitions,) = struct.unpack(">i", response[offset : offset + 4])
        assert partitions == 1
        _, error, base_offset, _ = struct.unpack(">ihqq", response[offset + 4 : offset + 26])
        # A partition just created (its name deleted a moment before, on an emptied cluster) may
        # not be served yet: nothing was appended, and Kafka says to ask again.
        if error not in PARTITION_NOT_READY or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if error:
        raise RuntimeError(f"Produce to {topic}-{partition} failed with error code {error}")
    return base_offset


def forge_hanging_transaction(
    bootstrap: str,
    transactional_id: str,
    topic: str,
    partition: int,
    records: Sequence[tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Headers]],
    timestamp_ms: int,
) -> int:
    """Leave a transaction of `transactional_id`'s producer id open in `topic`-`partition`, one
    its coordinator does not know of; returns the offset it starts at. The broker must run with
    transaction.partition.verification.enable=false."""
    producer_id, epoch = init_producer_id(bootstrap, transactional_id)
    return produce_batch(
        bootstrap,
        topic,
        partition,
        record_batch(producer_id, epoch, 0, records, timestamp_ms),
        transactional_id,
    )
