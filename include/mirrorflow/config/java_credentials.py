"""Java client credentials → librdkafka: JKS and PKCS12 key and trust stores read into PEM in
memory (config/keystores.py reads them), and JAAS login modules (`sasl.jaas.config`) rewritten as
librdkafka's SASL keys (PLAIN and SCRAM as username and password, Kerberos as keytab and
principal, OAuth client credentials as `sasl.oauthbearer.method=oidc`). Part of the translation of
a Java client config (config/librdkafka.py); each problem names the user's key and the fix."""

from __future__ import annotations

import re
from collections.abc import Mapping

from mirrorflow.config import keystores
from mirrorflow.config.problems import Problem, error, warning
from mirrorflow.config.providers import Setting

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


class Translation:
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


def truststore(t: Translation) -> None:
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


def keystore(t: Translation) -> None:
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


def _store_type(t: Translation, type_key: str, location: str) -> str | None:
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
    t: Translation,
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


def jaas(t: Translation) -> None:
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


def _user_password(t: Translation, key: str, options: Mapping[str, str], fix: str) -> None:
    if "username" not in options or "password" not in options:
        t.problems.append(error(t.origin(key), "the JAAS configuration lacks username or password", fix))
        return
    t.out["sasl.username"] = options["username"]
    t.out["sasl.password"] = options["password"]


def _oauthbearer(t: Translation, key: str, options: Mapping[str, str]) -> None:
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
