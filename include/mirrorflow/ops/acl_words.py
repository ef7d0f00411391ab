"""How a grant of the least-privilege table (ops/acls.py) is said to Kafka and to people: the
AclBinding that creates it, the principal a client authenticates as, the kafka-acls.sh command
an admin runs, and the table on docs/configuration/acls.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType

from mirrorflow.config import FlowConfig
from mirrorflow.ops.acls import CLUSTER, GROUP, JOBS, PREFIXED, TOPIC, TXN, Resolved, job_grants


def acl_binding(resolved: Resolved, principal: str) -> AclBinding:
    grant = resolved.grant
    return AclBinding(
        grant.resource,
        resolved.name,
        grant.pattern,
        principal,
        "*",
        grant.operation,
        AclPermissionType.ALLOW,
    )


def principal_of(client_config: Mapping[str, Any]) -> str | None:
    """The principal a SASL/PLAIN or SCRAM client authenticates as (Kafka's default mapping);
    None for other mechanisms and TLS, whose principal the broker derives itself."""
    username = client_config.get("sasl.username")
    protocol = str(client_config.get("security.protocol", "")).upper()
    mechanism = str(client_config.get("sasl.mechanism", "")).upper()
    if username and protocol.startswith("SASL") and (mechanism == "PLAIN" or mechanism.startswith("SCRAM")):
        return f"User:{username}"
    return None


_OPTION = {TOPIC: "--topic", GROUP: "--group", TXN: "--transactional-id", CLUSTER: "--cluster"}


def kafka_acls_command(resolved: Resolved, principal: str | None, bootstrap: str) -> str:
    """The kafka-acls.sh command that grants `resolved` (run by an admin of that cluster)."""
    grant = resolved.grant
    words = [
        "kafka-acls.sh",
        f"--bootstrap-server {bootstrap}",
        "--command-config <admin.properties>",
        "--add",
        f"--allow-principal {principal or '<principal>'}",
        f"--operation {_operation_word(grant.operation)}",
        _OPTION[grant.resource]
        if grant.resource == CLUSTER
        else f"{_OPTION[grant.resource]} '{resolved.name}'",
    ]
    if grant.pattern == PREFIXED:
        words.append("--resource-pattern-type prefixed")
    return " ".join(words)


def _operation_word(operation: AclOperation) -> str:
    return "".join(part.capitalize() for part in operation.name.split("_"))


def markdown_table(flow: FlowConfig) -> str:
    """The least-privilege table (docs/configuration/acls.md): every job's ACLs on each side of `flow`."""
    rows = ["| Job | Cluster | Resource | Pattern | Operation | Why |", "|---|---|---|---|---|---|"]
    for job in JOBS:
        for grant in job_grants(flow, job):
            cluster = flow.source if grant.side == "source" else flow.target
            name = "" if grant.resource == CLUSTER else f" `{grant.name}`"
            kind = "CLUSTER" if grant.resource == CLUSTER else grant.resource.name
            rows.append(
                f"| {job} | {grant.side} ({cluster}) | {kind}{name} | {grant.pattern.name} | "
                f"{grant.operation.name} | {grant.why} |"
            )
    return "\n".join(rows)
