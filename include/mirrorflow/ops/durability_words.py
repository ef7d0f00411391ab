"""How a durability shortfall is told: why acknowledged writes to a topic could be lost (or stop)
with its settings, the fix for a topic that exists or is still to be created, and the one note for
the topics whose settings the principal may not read."""

from __future__ import annotations

from dataclasses import dataclass

from mirrorflow.config import FlowConfig, Problem
from mirrorflow.config.problems import note, warning

MIN_REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2
REMOTE = "remote topic"
NAMES_SHOWN = 10  # remote topics named in one problem; the rest are counted


@dataclass(frozen=True)
class WrittenTopic:
    """A topic a flow writes on its target, and the MM2 key that sets its replication factor
    when mirrorflow creates it (-1: the broker's default.replication.factor)."""

    name: str
    what: str
    factor_key: str
    factor: int


@dataclass(frozen=True)
class Replication:
    """A topic's effective settings (or a missing topic's, as it would be created)."""

    factor: int
    min_insync: int
    unclean: bool


def shortfalls(settings: Replication, *, brokers: int | None = None) -> list[str]:
    """Why acknowledged writes to a topic with these settings could be lost (or stop), in words.
    `brokers`: the cluster's broker count, for a topic still to be created."""
    rf, isr = settings.factor, settings.min_insync
    reasons = []
    if brokers is not None and rf > brokers:
        reasons.append(
            f"replication factor {rf} needs {rf} brokers and there are {brokers}: creating it fails"
        )
    if rf < MIN_REPLICATION_FACTOR:
        reasons.append(f"replication factor {rf} (fewer than {MIN_REPLICATION_FACTOR} copies)")
    if isr < MIN_INSYNC_REPLICAS:
        reasons.append(
            f"min.insync.replicas {isr}: acks=all is then satisfied by the leader alone, and a leader "
            "failover can lose acknowledged records"
        )
    if isr > rf:
        reasons.append(f"min.insync.replicas {isr} > replication factor {rf}: every write is refused")
    elif rf > 1 and isr == rf:
        reasons.append(
            f"min.insync.replicas {isr} = replication factor {rf}: writes stop while one of its brokers is down"
        )
    if settings.unclean:
        reasons.append(
            "unclean.leader.election.enable=true: an out-of-sync replica can become leader and drop "
            "acknowledged records"
        )
    return reasons


def fix(topic: WrittenTopic, names: list[str], settings: Replication, *, exists: bool, brokers: int) -> str:
    rf, isr = settings.factor, settings.min_insync
    parts = []
    if brokers < MIN_REPLICATION_FACTOR and (rf < MIN_REPLICATION_FACTOR or rf > brokers):
        parts.append(f"give the cluster at least {MIN_REPLICATION_FACTOR} brokers (it has {brokers})")
    if rf < MIN_REPLICATION_FACTOR:
        if exists:
            parts.append(
                f"raise the replication factor to {MIN_REPLICATION_FACTOR} with kafka-reassign-partitions.sh"
            )
        else:
            parts.append(f"set {topic.factor_key} = {MIN_REPLICATION_FACTOR} before mirrorflow creates it")
    configs = []
    # With replication factor 2 and min.insync.replicas 2, raising the factor is the fix.
    if isr < MIN_INSYNC_REPLICAS or (isr >= rf and isr != MIN_INSYNC_REPLICAS):
        configs.append(f"min.insync.replicas={MIN_INSYNC_REPLICAS}")
    if settings.unclean:
        configs.append("unclean.leader.election.enable=false")
    if configs and exists:
        others = " (and the same for the others)" if len(names) > 1 else ""
        parts.append(
            f"kafka-configs.sh --alter --entity-type topics --entity-name {names[0]} "
            f"--add-config {','.join(configs)}{others}"
        )
    elif configs:
        parts.append(f"set {', '.join(configs)} on the target's brokers (or on the topic once it exists)")
    return "; ".join(parts)


def problem(
    flow: FlowConfig, topic: WrittenTopic, names: list[str], settings: Replication, exists: bool, brokers: int
) -> Problem:
    if len(names) == 1:
        key, subject = f"{flow.target}:{names[0]}", f"{topic.what} {names[0]}"
    else:
        shown = ", ".join(names[:NAMES_SHOWN]) + (
            f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
        )
        key, subject = f"{flow.target}: {len(names)} remote topics of {flow.name}", f"remote topics {shown}"
    state = "" if exists else " (not created yet; as mirrorflow would create it)"
    return warning(
        key,
        f"{subject} on {flow.target}{state}: {'; '.join(shortfalls(settings, brokers=None if exists else brokers))}",
        fix(topic, names, settings, exists=exists, brokers=brokers),
    )


def unchecked_note(flow: FlowConfig, names: list[str], *, broker_defaults: bool) -> Problem:
    """One note for every topic whose settings the principal may not read: no job needs
    DescribeConfigs on them, so the least-privilege table does not grant it, and a principal
    holding exactly that table is doing nothing wrong."""
    shown = ", ".join(names[:NAMES_SHOWN]) + (
        f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
    )
    grant = "DescribeConfigs on those topics" + (
        " and on the cluster (for the broker defaults new topics get)" if broker_defaults else ""
    )
    return note(
        f"{flow.target}: durability not checked",
        f"the replication settings of {len(names)} topic(s) {flow.name} writes on {flow.target} were not "
        f"checked ({shown}): the principal may not DescribeConfigs them, which no job needs, so the "
        "least-privilege table does not grant it",
        f"to have validate --connect check their replication factor, min.insync.replicas and unclean "
        f"leader election, grant {grant} (kafka-acls.sh --add --operation DescribeConfigs ...), or check "
        "them with kafka-configs.sh --describe",
    )
