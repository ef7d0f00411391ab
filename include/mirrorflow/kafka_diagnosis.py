"""Why a cluster does not answer: a metadata probe with a deadline, and what its connection
errors say (a host that does not resolve, a security protocol mismatch, failed authentication).

Split from kafka.py, which keeps the diagnoses' names (DIAGNOSES) that ClusterUnreachable reads.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from mirrorflow.kafka import admin_client

# How long an unanswered metadata probe waits, after giving up, for a connection error saying why.
REASON_GRACE_S = 3.0

# What a probe's connection errors mean, when they say more than "did not answer": (pattern of
# librdkafka's log or error text, diagnosis). A diagnosis that is certain ends the wait at once.
_RESOLVE_FAILED = re.compile(r"Failed to resolve '(?P<address>[^']*)': (?P<why>[^(]*)")
_SASL_TO_PLAIN = "Request not valid in current SASL state"
_CLOSED_AFTER_CONNECT = re.compile(r"Disconnected: connection closed by peer.*in state (UP|APIVERSION_QUERY)")


class _Collect(logging.Handler):
    """Keeps a probe's librdkafka lines (its answer) instead of printing them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        self.texts.append(str(args[-1]) if args else record.getMessage())


def _hosts(config: Mapping[str, Any]) -> set[str]:
    return {h.strip() for h in str(config.get("bootstrap.servers", "")).split(",") if h.strip()}


def diagnose(config: Mapping[str, Any], texts: list[str]) -> str | None:
    """A certain reason among a probe's connection errors, worded with what to change, or None.

    A host name that does not resolve (every bootstrap address), a SASL client at a listener
    that expects no SASL (the broker answers the SASL handshake "not valid in current SASL
    state"), a client without SASL at a SASL listener (the broker closes every connection right
    after the first request), TLS on one side only, and credentials the broker refused are
    certain: waiting longer changes nothing."""
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    unresolved = {
        m.group("address"): m.group("why").strip() for t in texts if (m := _RESOLVE_FAILED.search(t))
    }
    hosts = _hosts(config)
    if unresolved and hosts <= set(unresolved):
        names = ", ".join(sorted({address.rsplit(":", 1)[0] for address in unresolved}))
        why = next(iter(unresolved.values()))
        return f"cannot resolve host {names} (DNS: {why}); check the host name and this machine's DNS"
    said = _diagnosis(protocol, config, texts)
    if said is None:
        return None
    diagnosis, evidence = said
    return f"{diagnosis} (last connection error: {evidence.split(' (after ')[0]})"


def _diagnosis(protocol: str, config: Mapping[str, Any], texts: list[str]) -> tuple[str, str] | None:
    def first(needle: str) -> str | None:
        return next((t for t in texts if needle in t), None)

    if protocol.startswith("SASL") and (evidence := first(_SASL_TO_PLAIN)):
        plain = "SSL" if protocol == "SASL_SSL" else "PLAINTEXT"
        return (
            f"likely a security protocol mismatch: the client uses security.protocol={protocol}, but the "
            f"listener at {config.get('bootstrap.servers')} does not expect SASL (it refused the SASL handshake); "
            f"use the cluster's SASL listener port, or security.protocol={plain} if this listener is the one to use",
            evidence,
        )
    if evidence := first("connecting to a PLAINTEXT broker listener?"):
        return (
            f"likely a security protocol mismatch: the client speaks TLS (security.protocol={protocol}) to a "
            f"listener without TLS at {config.get('bootstrap.servers')}; use the cluster's TLS listener port, "
            f"or security.protocol={'SASL_PLAINTEXT' if protocol.startswith('SASL') else 'PLAINTEXT'}",
            evidence,
        )
    if evidence := first("connecting to a SSL listener?"):
        return (
            f"likely a security protocol mismatch: the listener at {config.get('bootstrap.servers')} expects TLS "
            f"and the client does not speak it (security.protocol={protocol}); set security.protocol="
            f"{'SASL_SSL' if protocol.startswith('SASL') else 'SSL'} (with the CA that signed the broker's "
            "certificate), or use the cluster's PLAINTEXT listener port",
            evidence,
        )
    if evidence := first("SASL authentication error"):
        return (
            "authentication failed (SASL): check sasl.mechanism and the credentials (sasl.jaas.config, or "
            "sasl.username and sasl.password)",
            evidence,
        )
    closed = [t for t in texts if _CLOSED_AFTER_CONNECT.search(t)]
    if not protocol.startswith("SASL") and len(closed) >= 3:
        sasl = "SASL_SSL" if protocol == "SSL" else "SASL_PLAINTEXT"
        return (
            f"likely a security protocol mismatch: the broker closes every connection right after the first "
            f"request, as a SASL listener does with a client that does not authenticate (security.protocol="
            f"{protocol}); set security.protocol={sasl} with sasl.mechanism and the credentials, or use the "
            "cluster's PLAINTEXT listener port",
            closed[-1],
        )
    return None


def no_answer(config: Mapping[str, Any], timeout_s: float) -> str | None:
    """Why the cluster of this client config does not answer a metadata request within
    `timeout_s`, or None when it answers.

    The metadata call only says "Broker transport failure"; the connection errors say why (a
    TLS handshake with a plaintext listener, SASL refused, a certificate not trusted), so the
    last of them is added. A certain reason (see `diagnose`: a host that does not resolve, a
    SASL/plaintext listener mismatch) is answered as soon as it shows, in its own words, instead
    of after the whole wait. The texts name brokers and mechanisms, never credentials."""
    reasons: list[str] = []

    def on_error(error: KafkaError) -> None:
        # "1/1 brokers are down" and the metadata timeout say that it failed, not why.
        if error.code() != KafkaError._ALL_BROKERS_DOWN and "Failed to get metadata" not in error.str():
            reasons.append(error.str())

    # The probe's failed connections are its answer, said once by the caller, not a stream of
    # librdkafka lines (one per reconnect backoff): they are collected here, never printed.
    lines = _Collect()
    quiet = logging.Logger("mirrorflow.probe")
    quiet.addHandler(lines)
    probe = {
        **config,
        # Longer than the wait and its grace: librdkafka gives up a connection's setup silently,
        # so a handshake that fails late would otherwise never say why.
        "socket.connection.setup.timeout.ms": max(1000, int((timeout_s + REASON_GRACE_S) * 1000) + 1000),
        "logger": quiet,
        "error_cb": on_error,
    }
    admin = admin_client(probe)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.list_topics(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
            return None
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            why = f"{error.name()}: {error.str()}" if isinstance(error, KafkaError) else str(exc)
        admin.poll(0.1)
        certain = diagnose(config, reasons + lines.texts)
        if certain is not None:
            return certain
        if time.monotonic() >= deadline:
            break
    # A connection's failure can reach the callback after the metadata call gave up (a TLS
    # handshake the broker ends only once it has read a bogus request size, on a loaded
    # machine): wait a little for a reason before answering without one.
    grace = time.monotonic() + REASON_GRACE_S
    while not reasons and time.monotonic() < grace:
        admin.poll(0.1)
    certain = diagnose(config, reasons + lines.texts)
    if certain is not None:
        return certain
    return why if not reasons else f"{why}; last connection error: {reasons[-1]}"
