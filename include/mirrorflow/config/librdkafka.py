"""Java client settings → librdkafka properties.

MM2 files carry Java client settings; mirrorflow's clients are librdkafka (confluent-kafka).
Most keys mean the same in both and pass through unchanged, as do librdkafka-only keys a user
adds. The tables below cover the rest: keys renamed, values converted, credentials rewritten
(JAAS login modules, key and trust stores) and Java-only keys dropped with a warning. Verified
against librdkafka 2.16 (tests build real clients from the translated settings).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from mirrorflow.config import keystores
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
_OIDC_HANDLERS = frozenset(
    {
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
    }
)
_JAAS = re.compile(
    r"^\s*(?P<module>[A-Za-z_$][\w.$]*)\s+(?P<flag>required|requisite|sufficient|optional)(?P<options>.*?);?\s*$",
    re.DOTALL | re.IGNORECASE,
)
_JAAS_OPTION = re.compile(r'\s*(?P<name>[\w.$-]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s;"]+))')


class _Translation:
    """Accumulates one client config's librdkafka properties and the problems found."""

    def __init__(self, settings: Mapping[str, Setting]) -> None:
        self.settings = settings
        self.out: dict[str, str] = {}
        self.problems: list[Problem] = []
        self.consumed: set[str] = set()

    def value(self, key: str) -> str | None:
        setting = self.settings.get(key)
        return None if setting is None else setting.value.strip()

    def origin(self, key: str) -> str:
        return self.settings[key].origin

    def sibling(self, key: str, librdkafka_key: str) -> str:
        """The key to suggest next to where `key` was written, e.g. backup.ssl.ca.location."""
        origin = self.origin(key)
        return origin[: len(origin) - len(key)] + librdkafka_key if origin.endswith(key) else librdkafka_key


def translate(settings: Mapping[str, Setting]) -> tuple[dict[str, str], list[Problem]]:
    """librdkafka properties for a Java client config, plus warnings/errors naming the user's keys."""
    t = _Translation(settings)
    _truststore(t)
    _keystore(t)
    _jaas(t)
    for key in settings:
        if key in t.consumed or key in _COMPANIONS:
            continue
        _translate_key(t, key)
    return t.out, t.problems


def _translate_key(t: _Translation, key: str) -> None:
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


def _buffer_memory(t: _Translation, key: str, value: str) -> None:
    try:
        t.out["queue.buffering.max.kbytes"] = str(max(1, math.ceil(int(value) / 1024)))
    except ValueError:
        t.problems.append(error(t.origin(key), f"{value!r} is not a number of bytes", "write e.g. 33554432"))


def _assignors(t: _Translation, key: str, value: str) -> None:
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


def _truststore(t: _Translation) -> None:
    key = "ssl.truststore.location"
    location = t.value(key)
    if location is None:
        return
    t.consumed.add(key)
    if "ssl.ca.location" in t.settings:
        return
    store_type = _store_type(t, "ssl.truststore.type", location)
    if store_type == "PEM":
        t.out["ssl.ca.location"] = location
        return
    if store_type is None:
        return
    try:
        store = keystores.read_store(
            location, password=t.value("ssl.truststore.password"), decrypt_keys=False
        )
    except keystores.StoreError as exc:
        t.problems.append(_store_problem(t, key, "ssl.truststore.password", None, exc))
        return
    pem = store.trust_pem()
    if not pem:
        t.problems.append(
            error(
                t.origin(key),
                f"the trust store {location} holds no certificates",
                f"import the CA (keytool -importcert -keystore {location} -alias ca -file ca.pem)",
            )
        )
        return
    t.out["ssl.ca.pem"] = pem


def _keystore(t: _Translation) -> None:
    key = "ssl.keystore.location"
    location = t.value(key)
    if location is None:
        return
    t.consumed.add(key)
    if "ssl.certificate.location" in t.settings:
        return
    store_type = _store_type(t, "ssl.keystore.type", location)
    if store_type == "PEM":
        t.out["ssl.certificate.location"] = location
        t.out["ssl.key.location"] = location
        return
    t.consumed.add("ssl.key.password")
    if store_type is None:
        return
    password = t.value("ssl.keystore.password")
    if password is None:
        t.problems.append(
            error(
                t.sibling(key, "ssl.keystore.password"),
                f"the {store_type} key store {location} needs its password (Kafka's clients refuse it "
                "without one too)",
                f"set {t.sibling(key, 'ssl.keystore.password')}",
            )
        )
        return
    try:
        store = keystores.read_store(
            location, password=password, key_password=t.value("ssl.key.password"), decrypt_keys=True
        )
    except keystores.StoreError as exc:
        t.problems.append(_store_problem(t, key, "ssl.keystore.password", "ssl.key.password", exc))
        return
    if not store.keys:
        t.problems.append(
            error(
                t.origin(key),
                f"the key store {location} holds no private key, so there is no client certificate to present",
                "import the client's key and certificate chain into it (keytool -importkeystore from a "
                "PKCS12 file made with openssl pkcs12 -export), or point the key to the right store",
            )
        )
        return
    entry = store.keys[0]
    if len(store.keys) > 1:
        t.problems.append(
            warning(
                t.origin(key),
                f"the key store {location} holds {len(store.keys)} private keys; librdkafka presents one, "
                f"so mirrorflow uses the first, {entry.alias!r}",
                f"keep only the client's key in the store (keytool -delete -alias <other> -keystore {location})",
            )
        )
    t.out["ssl.certificate.pem"] = entry.chain_pem()
    t.out["ssl.key.pem"] = entry.key_pem()


def _store_type(t: _Translation, type_key: str, location: str) -> str | None:
    """PEM, JKS or PKCS12 (Java's default JKS; a .p12/.pfx file means PKCS12), None after an
    error for a type mirrorflow cannot read."""
    declared = t.value(type_key)
    if declared is None:
        return "PKCS12" if location.lower().endswith((".p12", ".pfx")) else "JKS"
    store_type = declared.upper()
    if store_type == "PEM" or store_type in keystores.STORE_TYPES:
        return store_type
    t.problems.append(
        error(
            t.origin(type_key),
            f"mirrorflow reads JKS, PKCS12 and PEM stores, not {declared}",
            f"convert the store (keytool -importkeystore -srckeystore {location} -srcstoretype {declared} "
            f"-destkeystore store.p12 -deststoretype PKCS12), point the location to it and set {t.origin(type_key)}=PKCS12",
        )
    )
    return None


def _store_problem(
    t: _Translation,
    location_key: str,
    password_key: str,
    key_password_key: str | None,
    exc: keystores.StoreError,
) -> Problem:
    """The error for a store that cannot be read, on the key the user has to change."""

    def named(key: str) -> str:
        return t.origin(key) if key in t.settings else t.sibling(location_key, key)

    location = t.origin(location_key)
    if exc.kind == "password":
        return error(
            named(password_key),
            exc.message,
            f"set {named(password_key)} to the password the store was written with, or point {location} "
            "to the store that password belongs to",
        )
    if exc.kind == "no-password":
        return error(named(password_key), exc.message, f"set {named(password_key)} to the store's password")
    if exc.kind == "key-password" and key_password_key is not None:
        used = key_password_key if key_password_key in t.settings else password_key
        return error(
            named(used),
            exc.message,
            f"set {named(key_password_key)} to the private key's password (keytool's -keypass; without it "
            f"Kafka and mirrorflow try {named(password_key)})",
        )
    if exc.kind == "pem":
        type_key = location_key.replace(".location", ".type")
        return error(location, exc.message, f"set {named(type_key)}=PEM")
    if exc.kind == "unreadable":
        return error(
            location, exc.message, "check the path, and that the user running mirrorflow may read it"
        )
    return error(
        location,
        exc.message,
        "point it to a JKS or PKCS12 store, or convert the store with keytool -importkeystore "
        "-deststoretype PKCS12",
    )


def parse_jaas(text: str) -> tuple[str, dict[str, str]] | None:
    """(login module class, options) of a one-module JAAS entry, or None if it does not parse."""
    match = _JAAS.match(text)
    if not match:
        return None
    options: dict[str, str] = {}
    rest = match.group("options")
    position = 0
    for option in _JAAS_OPTION.finditer(rest):
        if option.start() != position:
            return None
        quoted = option.group("quoted")
        value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else option.group("bare")
        options[option.group("name")] = value
        position = option.end()
    if rest[position:].strip():
        return None
    return match.group("module"), options


def _jaas(t: _Translation) -> None:
    key = "sasl.jaas.config"
    text = t.value(key)
    if text is None:
        return
    t.consumed.add(key)
    parsed = parse_jaas(text)
    fix = "set sasl.username and sasl.password (PLAIN/SCRAM) or the librdkafka sasl.* keys for your mechanism"
    if parsed is None:
        t.problems.append(error(t.origin(key), "cannot parse the JAAS configuration", fix))
        return
    module, options = parsed
    simple = module.rsplit(".", 1)[-1]
    if simple in ("PlainLoginModule", "ScramLoginModule"):
        _user_password(t, key, options, fix)
    elif simple == "OAuthBearerLoginModule":
        _oauthbearer(t, key, options)
    elif simple == "Krb5LoginModule":
        if "keyTab" in options:
            t.out["sasl.kerberos.keytab"] = options["keyTab"]
        if "principal" in options:
            t.out["sasl.kerberos.principal"] = options["principal"]
    else:
        t.problems.append(
            error(
                t.origin(key),
                f"login module {module} has no librdkafka equivalent",
                "use SASL PLAIN, SCRAM-SHA-256/512, GSSAPI or OAUTHBEARER, or " + fix,
            )
        )


def _user_password(t: _Translation, key: str, options: Mapping[str, str], fix: str) -> None:
    if "username" not in options or "password" not in options:
        t.problems.append(error(t.origin(key), "the JAAS configuration lacks username or password", fix))
        return
    t.out["sasl.username"] = options["username"]
    t.out["sasl.password"] = options["password"]


def _oauthbearer(t: _Translation, key: str, options: Mapping[str, str]) -> None:
    handler = t.value("sasl.login.callback.handler.class")
    if handler in _OIDC_HANDLERS:
        t.consumed.add("sasl.login.callback.handler.class")
    if "clientId" in options and "clientSecret" in options:
        t.out["sasl.oauthbearer.method"] = "oidc"
        t.out["sasl.oauthbearer.client.id"] = options["clientId"]
        t.out["sasl.oauthbearer.client.secret"] = options["clientSecret"]
        if "scope" in options:
            t.out["sasl.oauthbearer.scope"] = options["scope"]
        extensions = [
            f"{k.removeprefix('extension_')}={v}" for k, v in options.items() if k.startswith("extension_")
        ]
        if extensions:
            t.out["sasl.oauthbearer.extensions"] = ",".join(extensions)
        if "sasl.oauthbearer.token.endpoint.url" not in t.settings:
            t.problems.append(
                error(
                    t.origin(key),
                    "OAuth client credentials need a token endpoint",
                    f"set {t.sibling(key, 'sasl.oauthbearer.token.endpoint.url')}",
                )
            )
    elif "unsecuredLoginStringClaim_sub" in options:
        t.out["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
        t.out["sasl.oauthbearer.config"] = f"principal={options['unsecuredLoginStringClaim_sub']}"
    else:
        t.problems.append(
            error(
                t.origin(key),
                "the OAuthBearerLoginModule entry has neither clientId/clientSecret nor unsecuredLoginStringClaim_sub",
                "give clientId and clientSecret (OIDC client credentials) or set librdkafka's sasl.oauthbearer.* keys",
            )
        )


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
