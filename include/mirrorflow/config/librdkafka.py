"""Java client settings → librdkafka properties.

MM2 files carry Java client settings; mirrorflow's clients are librdkafka (confluent-kafka).
Most keys mean the same in both and pass through unchanged, as do librdkafka-only keys a user
adds. The tables below cover the rest: keys renamed, values converted, credentials rewritten
(JAAS login modules, key and trust stores: config/java_credentials.py) and Java-only keys dropped
with a warning. Verified against librdkafka 2.16 (tests build real clients from the translated
settings).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from mirrorflow.config.java_credentials import Translation, jaas, keystore, truststore
from mirrorflow.config.problems import Problem, error, warning
from mirrorflow.config.providers import Setting
from mirrorflow.config.values import parse_list

RENAMED = {
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "max.request.size": "message.max.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.keystore.key": "ssl.key.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
}

# Converted rather than copied; `translate` implements each row.
CONVERTED = {
    "bootstrap.servers": ("bootstrap.servers", "list normalised to host:port,host:port"),
    "buffer.memory": ("queue.buffering.max.kbytes", "bytes converted to KiB"),
    "auto.offset.reset": ("auto.offset.reset", "`none` becomes `error`"),
    "ssl.endpoint.identification.algorithm": (
        "ssl.endpoint.identification.algorithm",
        "empty (Java's way to disable) becomes `none`",
    ),
    "partition.assignment.strategy": (
        "partition.assignment.strategy",
        "Range/RoundRobin/CooperativeSticky assignor classes become range/roundrobin/cooperative-sticky",
    ),
    "compression.gzip.level": ("compression.level", "when compression.type is gzip"),
    "compression.lz4.level": ("compression.level", "when compression.type is lz4"),
    "compression.zstd.level": ("compression.level", "when compression.type is zstd"),
    "ssl.cipher.suites": (
        "ssl.cipher.suites",
        "Java (IANA) suite names are dropped: librdkafka wants OpenSSL names",
    ),
    "sasl.jaas.config": (
        "sasl.username, sasl.password, sasl.kerberos.*, sasl.oauthbearer.*",
        "PLAIN/SCRAM username+password; Kerberos keyTab+principal; OAuth clientId/clientSecret/scope (OIDC)",
    ),
    "ssl.truststore.location": (
        "ssl.ca.pem or ssl.ca.location",
        "JKS and PKCS12 read with ssl.truststore.password, their certificates handed over in memory; PEM kept as a file",
    ),
    "ssl.keystore.location": (
        "ssl.certificate.pem + ssl.key.pem, or ssl.certificate.location + ssl.key.location",
        "JKS and PKCS12 read with ssl.keystore.password (ssl.key.password for the key), the key and its chain "
        "handed over in memory; PEM split into certificate and key",
    ),
}

_SERDE = "mirrorflow copies raw bytes; (de)serializers and converters do not apply"
_PLUGIN = "Java plug-in class or metrics setting; librdkafka has no equivalent"
_PARTITION = "mirrorflow writes every record to its source partition number; no partitioner runs"
_LOGIN = "Java login internals; librdkafka manages SASL login itself"
_BROKER_SIDE = "OAuth token validation setting (broker side); clients do not use it"
JAVA_ONLY = {
    "key.serializer": _SERDE,
    "value.serializer": _SERDE,
    "key.deserializer": _SERDE,
    "value.deserializer": _SERDE,
    "key.converter": _SERDE,
    "value.converter": _SERDE,
    "header.converter": _SERDE,
    "default.list.key.serde.inner": _SERDE,
    "default.list.key.serde.type": _SERDE,
    "default.list.value.serde.inner": _SERDE,
    "default.list.value.serde.type": _SERDE,
    "partitioner.class": _PARTITION,
    "partitioner.ignore.keys": _PARTITION,
    "partitioner.adaptive.partitioning.enable": _PARTITION,
    "partitioner.availability.timeout.ms": _PARTITION,
    "interceptor.classes": _PLUGIN,
    "metric.reporters": _PLUGIN,
    "metrics.num.samples": _PLUGIN,
    "metrics.recording.level": _PLUGIN,
    "metrics.sample.window.ms": _PLUGIN,
    "auto.include.jmx.reporter": _PLUGIN,
    "security.providers": _PLUGIN,
    "ssl.engine.factory.class": _PLUGIN,
    "sasl.client.callback.handler.class": _PLUGIN,
    "sasl.login.callback.handler.class": _PLUGIN,
    "sasl.login.class": _PLUGIN,
    "max.block.ms": "Java producer blocking bound; librdkafka's produce() never blocks",
    "default.api.timeout.ms": "Java consumer API timeout; pass timeouts per call instead",
    "metadata.max.idle.ms": "Java producer metadata eviction; librdkafka has no equivalent",
    "exclude.internal.topics": "Java consumer setting; librdkafka never subscribes internal topics by regex",
    "rebalance.timeout.ms": "Java consumer setting; librdkafka has no equivalent",
    "socket.connection.setup.timeout.max.ms": "Java backoff cap; librdkafka has no equivalent",
    "bootstrap.controllers": "KRaft controller bootstrap; clients use bootstrap.servers",
    "internal.leave.group.on.close": "Java-only setting",
    "internal.throw.on.fetch.stable.offset.unsupported": "Java-only setting",
    "ssl.protocol": "JSSE protocol name; librdkafka negotiates TLS with OpenSSL",
    "ssl.provider": "JSSE provider; librdkafka uses OpenSSL",
    "ssl.enabled.protocols": "JSSE setting; librdkafka negotiates TLS with OpenSSL",
    "ssl.keymanager.algorithm": "JSSE setting; librdkafka uses OpenSSL",
    "ssl.trustmanager.algorithm": "JSSE setting; librdkafka uses OpenSSL",
    "ssl.secure.random.implementation": "JSSE setting; librdkafka uses OpenSSL",
    "sasl.kerberos.kinit.cmd": "Java's kinit path; librdkafka's sasl.kerberos.kinit.cmd is a whole command template",
    "sasl.kerberos.ticket.renew.window.factor": _LOGIN,
    "sasl.kerberos.ticket.renew.jitter": _LOGIN,
    "sasl.oauthbearer.scope.claim.name": _BROKER_SIDE,
    "sasl.oauthbearer.jwks.endpoint.url": _BROKER_SIDE,
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": _BROKER_SIDE,
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": _BROKER_SIDE,
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": _BROKER_SIDE,
    "sasl.oauthbearer.clock.skew.seconds": _BROKER_SIDE,
    "sasl.oauthbearer.expected.audience": _BROKER_SIDE,
    "sasl.oauthbearer.expected.issuer": _BROKER_SIDE,
    "sasl.oauthbearer.header.urlencode": "Java OAuth client detail; librdkafka has no equivalent",
}
JAVA_ONLY_PREFIXES = {
    "metrics.context.": _PLUGIN,
    "sasl.login.": _LOGIN,
    "key.converter.": _SERDE,
    "value.converter.": _SERDE,
    "header.converter.": _SERDE,
}
# Consumed together with ssl.truststore.location / ssl.keystore.location / sasl.jaas.config.
_COMPANIONS = frozenset(
    {"ssl.truststore.type", "ssl.truststore.password", "ssl.keystore.type", "ssl.keystore.password"}
)

_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    "range": "range",
    "roundrobin": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
}


def translate(settings: Mapping[str, Setting]) -> tuple[dict[str, str], list[Problem]]:
    """librdkafka properties for a Java client config, plus warnings/errors naming the user's keys."""
    t = Translation(settings)
    truststore(t)
    keystore(t)
    jaas(t)
    for key in settings:
        if key in t.consumed or key in _COMPANIONS:
            continue
        _translate_key(t, key)
    return t.out, t.problems


def _translate_key(t: Translation, key: str) -> None:
    value = t.value(key) or ""
    if key in RENAMED:
        t.out[RENAMED[key]] = value
    elif key == "bootstrap.servers":
        t.out[key] = ",".join(parse_list(value))
    elif key == "buffer.memory":
        _buffer_memory(t, key, value)
    elif key == "auto.offset.reset":
        t.out[key] = "error" if value.lower() == "none" else value
    elif key == "ssl.endpoint.identification.algorithm":
        t.out[key] = value.lower() or "none"
    elif key == "partition.assignment.strategy":
        _assignors(t, key, value)
    elif key in ("compression.gzip.level", "compression.lz4.level", "compression.zstd.level"):
        codec = key.split(".")[1]
        if (t.value("compression.type") or "none").lower() == codec:
            t.out["compression.level"] = value
    elif key == "ssl.cipher.suites":
        if re.match(r"(TLS|SSL)_", value):
            t.problems.append(
                warning(
                    t.origin(key),
                    "Java (IANA) cipher suite names are not understood by librdkafka; dropped",
                    f"set {t.sibling(key, 'ssl.cipher.suites')} with OpenSSL names (e.g. ECDHE-RSA-AES256-GCM-SHA384) or remove it",
                )
            )
        else:
            t.out[key] = value
    elif key in JAVA_ONLY or any(key.startswith(prefix) for prefix in JAVA_ONLY_PREFIXES):
        reason = JAVA_ONLY.get(key) or next(r for p, r in JAVA_ONLY_PREFIXES.items() if key.startswith(p))
        t.problems.append(warning(t.origin(key), f"Java-only client setting, dropped: {reason}", "remove it"))
    else:
        t.out[key] = value


def _buffer_memory(t: Translation, key: str, value: str) -> None:
    try:
        t.out["queue.buffering.max.kbytes"] = str(max(1, math.ceil(int(value) / 1024)))
    except ValueError:
        t.problems.append(error(t.origin(key), f"{value!r} is not a number of bytes", "write e.g. 33554432"))


def _assignors(t: Translation, key: str, value: str) -> None:
    names = []
    for item in parse_list(value):
        if item in _ASSIGNORS:
            names.append(_ASSIGNORS[item])
        else:
            t.problems.append(
                warning(
                    t.origin(key),
                    f"assignor {item} has no librdkafka equivalent; dropped",
                    "use range, roundrobin or cooperative-sticky (or their Java classes)",
                )
            )
    if names:
        t.out[key] = ",".join(dict.fromkeys(names))


def mapping_markdown() -> str:
    """How Java client keys become librdkafka properties: the table of docs/configuration/clients.md."""
    rows = ["| Java client key | librdkafka | how |", "|---|---|---|"]
    for java, target in sorted(RENAMED.items()):
        rows.append(f"| `{java}` | `{target}` | renamed |")
    for java, (target, how) in sorted(CONVERTED.items()):
        rows.append(f"| `{java}` | {target} | {how} |")
    for java, reason in sorted(JAVA_ONLY.items()):
        rows.append(f"| `{java}` | (dropped, warning) | {reason} |")
    for prefix, reason in sorted(JAVA_ONLY_PREFIXES.items()):
        rows.append(f"| `{prefix}*` | (dropped, warning) | {reason} |")
    rows.append("| any other key | same key | passed through unchanged (librdkafka-only keys work too) |")
    return "\n".join(rows) + "\n"
