"""server.properties for one KRaft node, and the client settings that reach each listener.

Every node is broker and controller at once. The PLAINTEXT listener is always there: it
carries inter-broker traffic, readiness checks and, on a secured cluster, the test's own setup
(its principal, User:ANONYMOUS, is a super user so that the brokers and the controller can talk
to each other under an authorizer). Secured listeners are added beside it on their own ports:

  SASL_PLAINTEXT  SCRAM-SHA-512 users created at format time
  SASL_SSL        the same users over TLS
  SSL             TLS without client certificates (not with an authorizer: see Security)
  MTLS            TLS with client certificates required; the principal is the certificate's CN
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from localkafka.tls import TlsFiles

SECURED_LISTENERS = {
    "SASL_PLAINTEXT": "SASL_PLAINTEXT",
    "SASL_SSL": "SASL_SSL",
    "SSL": "SSL",
    "MTLS": "SSL",
}
SCRAM_MECHANISM = "SCRAM-SHA-512"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Characters the storage tool's --add-scram syntax cannot carry unquoted.
_SCRAM_UNSAFE = set(',[]"= ')


# Broker settings for short-lived clusters (tests, the demo, benchmarks), all ordinary Kafka configs:
# - the first group rebalance waits group.initial.rebalance.delay.ms (3 s); Kafka's own test and
#   docker setups use 0;
# - fewer partitions for __consumer_offsets and __transaction_state make their creation (at the
#   first group / first transactional producer) and a restart's log recovery quick;
# - the log cleaner looks for dirty logs every second instead of every 15 s, so compaction on
#   demand (localkafka.compaction) takes a second or two (every 100 ms, it was a fifth of an idle
#   broker's CPU, and the suite keeps a dozen brokers idle between tests);
# - retention is enforced every 500 ms instead of 5 minutes, starting at once instead of 30 s
#   after start-up (log.initial.task.delay.ms), but by time only where a topic sets retention.ms
#   (log.retention.ms=-1): fixtures often carry old timestamps, which Kafka's 7-day default would
#   delete within the second;
# - timed-out transactions are aborted within a second of their timeout.
QUICK_CLUSTER: dict[str, object] = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 5,
    "transaction.state.log.num.partitions": 5,
    "log.cleaner.backoff.ms": 1000,
    "log.retention.check.interval.ms": 500,
    "log.initial.task.delay.ms": 0,
    "log.retention.ms": -1,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
}


class SettingsError(ValueError):
    """A cluster was asked for something that cannot work; the message says what to change."""


@dataclasses.dataclass(frozen=True)
class Security:
    """Secured listeners of a local cluster (empty: PLAINTEXT only)."""

    listeners: tuple[str, ...] = ()
    scram_users: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tls: TlsFiles | None = None
    authorizer: bool = False
    super_users: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [name for name in self.listeners if name not in SECURED_LISTENERS]
        if unknown:
            raise SettingsError(
                f"unknown listener {unknown[0]!r}; choose from {', '.join(SECURED_LISTENERS)}"
            )
        if self.tls is None and any("SSL" in SECURED_LISTENERS[name] for name in self.listeners):
            raise SettingsError("TLS listeners need tls=make_tls(directory) (a CA and a broker key store)")
        if self.authorizer and "SSL" in self.listeners:
            raise SettingsError(
                "with an authorizer, TLS clients need certificates: use the MTLS listener (on SSL a client "
                "without one is User:ANONYMOUS, the super user the brokers talk to each other as)"
            )
        if any(name.startswith("SASL") for name in self.listeners) and not self.scram_users:
            raise SettingsError("SASL listeners need scram_users={'name': 'password'}")
        for user, password in self.scram_users.items():
            if _SCRAM_UNSAFE & set(user + password):
                raise SettingsError(
                    f"SCRAM user {user!r}: names and passwords must not contain {''.join(sorted(_SCRAM_UNSAFE))!r}"
                )

    def format_arguments(self) -> list[str]:
        """Storage-tool arguments that create the SCRAM users with the cluster's first metadata."""
        args: list[str] = []
        for user, password in self.scram_users.items():
            args += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]
        return args


# A PLAINTEXT listener whose advertised port is a latency proxy's (localkafka.latency).
SLOW_LISTENER = "SLOW"


@dataclasses.dataclass(frozen=True)
class NodeAddress:
    node_id: int
    controller_port: int
    ports: Mapping[str, int]  # listener name -> port, PLAINTEXT first
    advertised: Mapping[str, int] = dataclasses.field(default_factory=dict)  # where it differs


def server_properties(
    node: NodeAddress,
    voters: list[NodeAddress],
    *,
    host: str,
    data_dir: str,
    security: Security,
    overrides: Mapping[str, object],
) -> dict[str, str]:
    size = len(voters)
    listeners = {"PLAINTEXT": node.ports["PLAINTEXT"]}
    listeners.update({name: node.ports[name] for name in security.listeners})
    plain = ["PLAINTEXT"]
    if SLOW_LISTENER in node.ports:
        listeners[SLOW_LISTENER] = node.ports[SLOW_LISTENER]
        plain.append(SLOW_LISTENER)
    props: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": node.node_id,
        "controller.quorum.voters": ",".join(f"{v.node_id}@{host}:{v.controller_port}" for v in voters),
        "controller.listener.names": "CONTROLLER",
        "listeners": ",".join(
            [f"{name}://{host}:{port}" for name, port in listeners.items()]
            + [f"CONTROLLER://{host}:{node.controller_port}"]
        ),
        "advertised.listeners": ",".join(
            f"{name}://{host}:{node.advertised.get(name, port)}" for name, port in listeners.items()
        ),
        "listener.security.protocol.map": ",".join(
            [f"{name}:PLAINTEXT" for name in plain]
            + ["CONTROLLER:PLAINTEXT"]
            + [f"{name}:{SECURED_LISTENERS[name]}" for name in security.listeners]
        ),
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": data_dir,
        # Internal topics can only be as replicated as the cluster is large.
        "offsets.topic.replication.factor": min(3, size),
        "transaction.state.log.replication.factor": min(3, size),
        "transaction.state.log.min.isr": min(2, size),
        "share.coordinator.state.topic.replication.factor": min(3, size),
        "share.coordinator.state.topic.min.isr": min(2, size),
        "default.replication.factor": 1,
        # Two cores: fewer threads than Kafka's server-sized defaults.
        "num.network.threads": 2,
        "num.io.threads": 4,
        "num.recovery.threads.per.data.dir": 1,
        "background.threads": 4,
    }
    for name in security.listeners:
        prefix = f"listener.name.{name.lower()}"
        if name.startswith("SASL"):
            props[f"{prefix}.sasl.enabled.mechanisms"] = SCRAM_MECHANISM
            props[f"{prefix}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
        if name == "MTLS":
            props[f"{prefix}.ssl.client.auth"] = "required"
    if security.tls is not None:
        props.update(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.key": security.tls.broker_key.read_text(),
                "ssl.keystore.certificate.chain": security.tls.broker_chain.read_text(),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.certificates": security.tls.ca.read_text(),
                # A client certificate's principal is its CN (User:alice), as most deployments map it.
                "ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT",
            }
        )
    if security.authorizer:
        props["authorizer.class.name"] = AUTHORIZER
        props["super.users"] = ";".join(dict.fromkeys(["User:ANONYMOUS", *security.super_users]))
    props.update(overrides)
    return {key: str(value) for key, value in props.items()}


def render_properties(props: Mapping[str, str]) -> str:
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n")

    return "".join(f"{escape(k)}={escape(v)}\n" for k, v in props.items())


def client_settings(
    bootstrap: str, listener: str, security: Security, *, user: str | None = None
) -> dict[str, str]:
    """librdkafka settings that reach `listener` as `user` (a SCRAM user, or an MTLS client name)."""
    protocol = "PLAINTEXT" if listener in ("PLAINTEXT", SLOW_LISTENER) else SECURED_LISTENERS[listener]
    settings = {"bootstrap.servers": bootstrap, "security.protocol": protocol}
    if protocol.startswith("SASL"):
        name = user or next(iter(security.scram_users))
        if name not in security.scram_users:
            raise SettingsError(
                f"{name!r} is not a SCRAM user of this cluster ({', '.join(security.scram_users)})"
            )
        settings.update(
            {
                "sasl.mechanism": SCRAM_MECHANISM,
                "sasl.username": name,
                "sasl.password": security.scram_users[name],
            }
        )
    if "SSL" in protocol:
        assert security.tls is not None
        settings["ssl.ca.location"] = str(security.tls.ca)
        if listener == "MTLS" or (listener == "SSL" and user is not None):
            cert = security.tls.client(user or next(iter(security.tls.clients)))
            settings["ssl.certificate.location"] = str(cert.certificate)
            settings["ssl.key.location"] = str(cert.key)
    return settings
