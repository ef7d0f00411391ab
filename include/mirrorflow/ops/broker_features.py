"""What a cluster's brokers support, read with one ApiVersions request on a connection of our own.

librdkafka negotiates API versions with every broker but does not tell its caller what it found,
and the Admin API has no call for a cluster's feature levels. ApiVersions (key 18) is the one
request every broker answers before authentication (KIP-35, KIP-43), so a plain TCP connection
(TLS where the listener wants it) is enough on every listener mirrorflow supports: the same
bootstrap address, CA and client certificate as the flow's own clients, no credentials sent.

Version 3 of the response carries the broker's highest version of each API and, in tagged fields,
the cluster's finalized feature levels (KIP-584): `metadata.version` names the release whose
features the cluster runs ("3.9-IV0"), `transaction.version` and `group.version` the transaction
and group protocols. A broker too old for version 3 answers UNSUPPORTED_VERSION in the version-0
layout with its API ranges, which is still enough to say what it lacks.

The round trip of the request is timed too: a cluster far away (a WAN link) is worth a tuned copy.
"""

from __future__ import annotations

import dataclasses
import socket
import ssl
import struct
import time
from collections.abc import Mapping
from typing import Any

API_VERSIONS = 18
UNSUPPORTED_VERSION = 35
ROUND_TRIPS = 3
_CLIENT_ID = b"mirrorflow-features"


class ProbeError(RuntimeError):
    """The brokers could not be asked, or answered something that is not ApiVersions."""


@dataclasses.dataclass(frozen=True)
class BrokerFeatures:
    """One broker's answer: highest version per API key, finalized feature levels, round trip."""

    address: str
    api_max: Mapping[int, int]
    finalized: Mapping[str, int]
    round_trip_ms: float


def probe(config: Mapping[str, Any], timeout_s: float) -> BrokerFeatures:
    """Ask the first bootstrap server of `config` (librdkafka settings) that accepts a connection."""
    servers = [s.strip() for s in str(config.get("bootstrap.servers", "")).split(",") if s.strip()]
    if not servers:
        raise ProbeError("no bootstrap.servers")
    failures = []
    for server in servers:
        host, _, port = server.rpartition(":")
        host = host.strip("[]")
        try:
            return _ask(host, int(port), config, timeout_s)
        except (OSError, ValueError, ProbeError) as exc:
            failures.append(f"{server}: {exc}")
    raise ProbeError("; ".join(failures))


def _tls_context(config: Mapping[str, Any]) -> ssl.SSLContext | None:
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in ("SSL", "SASL_SSL"):
        return None
    if config.get("ssl.keystore.location") or config.get("ssl.certificate.pem"):
        raise ProbeError("TLS client keys given as a keystore or inline PEM are not read by the probe")
    context = ssl.create_default_context(
        cafile=config.get("ssl.ca.location") or None, cadata=config.get("ssl.ca.pem") or None
    )
    if str(config.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
        context.check_hostname = False
    if config.get("ssl.certificate.location"):
        context.load_cert_chain(
            config["ssl.certificate.location"],
            config.get("ssl.key.location") or None,
            config.get("ssl.key.password") or None,
        )
    return context


def _ask(host: str, port: int, config: Mapping[str, Any], timeout_s: float) -> BrokerFeatures:
    context = _tls_context(config)
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        sock: socket.socket = context.wrap_socket(raw, server_hostname=host) if context else raw
        answers = []
        for correlation in range(ROUND_TRIPS):
            started = time.perf_counter()
            sock.sendall(_request(correlation))
            body = _response(sock, correlation)
            answers.append(((time.perf_counter() - started) * 1000, body))
        api_max, finalized = parse_api_versions(answers[-1][1])
        return BrokerFeatures(f"{host}:{port}", api_max, finalized, min(ms for ms, _ in answers))


def _request(correlation: int) -> bytes:
    """ApiVersions v3: request header v2 (client id, no tags) and the client software fields."""
    header = struct.pack(">hhih", API_VERSIONS, 3, correlation, len(_CLIENT_ID)) + _CLIENT_ID + b"\x00"
    body = compact(b"mirrorflow") + compact(b"1") + b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def compact(text: bytes) -> bytes:
    return uvarint(len(text) + 1) + text


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ProbeError("the broker closed the connection (is this a TLS or SASL listener?)")
        data += chunk
    return bytes(data)


def _response(sock: socket.socket, correlation: int) -> bytes:
    (size,) = struct.unpack(">i", _read_exactly(sock, 4))
    if not 4 <= size <= 1 << 20:
        raise ProbeError(f"not a Kafka answer (a frame of {size} bytes; is this a TLS listener?)")
    frame = _read_exactly(sock, size)
    if struct.unpack(">i", frame[:4])[0] != correlation:
        raise ProbeError("the answer belongs to another request")
    return frame[4:]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise ProbeError("the ApiVersions answer is cut short")
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return value

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.take(">B")
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def compact_string(self) -> str:
        size = self.uvarint() - 1
        text = self.data[self.at : self.at + max(size, 0)].decode("utf-8", "replace")
        self.at += max(size, 0)
        return text

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.at += self.uvarint()


def parse_api_versions(body: bytes) -> tuple[dict[int, int], dict[str, int]]:
    """(highest version per API key, finalized feature max levels) of an ApiVersions v3 answer,
    or of the v0-layout UNSUPPORTED_VERSION answer of a broker older than Kafka 2.4."""
    reader = _Reader(body)
    error_code = reader.take(">h")
    if error_code == UNSUPPORTED_VERSION:
        count = reader.take(">i")
        api_max = {}
        for _ in range(max(count, 0)):
            key, _low, high = reader.take(">h"), reader.take(">h"), reader.take(">h")
            api_max[key] = high
        return api_max, {}
    if error_code:
        raise ProbeError(f"ApiVersions failed with error code {error_code}")
    api_max = {}
    for _ in range(reader.uvarint() - 1):
        key, _low, high = reader.take(">h"), reader.take(">h"), reader.take(">h")
        reader.skip_tags()
        api_max[key] = high
    reader.take(">i")  # throttle time
    finalized: dict[str, int] = {}
    for _ in range(reader.uvarint()):
        tag, size = reader.uvarint(), reader.uvarint()
        end = reader.at + size
        if tag == 2:  # FinalizedFeatures: name, max level, min level
            for _ in range(reader.uvarint() - 1):
                name = reader.compact_string()
                finalized[name] = reader.take(">h")
                reader.take(">h")
                reader.skip_tags()
        reader.at = end
    return api_max, finalized
