"""`mirrorflow validate --connect`: what can only be known by asking the clusters, every problem
at once, each with its fix, before anything runs.

- every cluster an enabled flow uses answers within the wait (and if not, why: down, the wrong
  protocol, TLS or SASL refused), each asked once however many flows use it;
- each replication flow's topic filter matches at least one source topic, and its group filter
  (when checkpoints or group sync are on) at least one source group: a filter that matches
  nothing is almost always a typo, and MM2 would say nothing;
- no two flows into one target write the same remote topic from different source topics (with
  the identity policy, `orders` of A and of C would be mixed in B's `orders`);
- the ACLs each enabled job needs (see acls.py), in the words the job would fail with;
- the durability of every topic the flows write on their targets (see durability.py).

One metadata request per cluster and one ListConsumerGroups per source with checkpoints on.
"""

from __future__ import annotations

from collections.abc import Iterable

from mirrorflow.clients import FlowClients
from mirrorflow.config import ConfigError, FlowConfig, MirrorConfig, Problem
from mirrorflow.config.problems import error, unique, warning
from mirrorflow.control.groups import list_groups
from mirrorflow.kafka import ClusterUnreachable, KafkaCallError, admin_client
from mirrorflow.kafka_diagnosis import no_answer
from mirrorflow.ops.acl_check import MissingAcl, require_job_acls, source_names
from mirrorflow.ops.durability import check_config_durability
from mirrorflow.policy import should_replicate_group, should_replicate_topic

NAMES_SHOWN = 5


def preflight(config: MirrorConfig, *, timeout_s: float) -> list[Problem]:
    """Every problem the clusters of `config`'s enabled flows show; see the module docstring."""
    problems: list[Problem] = []
    flows = [
        f
        for f in config.flows
        if config.replication_enabled(f.source, f.target) or config.heartbeats_enabled(f.source, f.target)
    ]
    clients: dict[str, FlowClients] = {}
    for flow in flows:
        try:
            clients[flow.name] = FlowClients.resolve(flow)
        except ConfigError as exc:
            problems += exc.problems
    silent = _unreachable(flows, clients, timeout_s, problems)
    replicating = [
        f
        for f in flows
        if f.name in clients
        and config.replication_enabled(f.source, f.target)
        and not {f.source, f.target} & silent
    ]
    topics = _source_topics(replicating, clients, timeout_s)
    for flow in replicating:
        problems += _filter_problems(flow, clients[flow.name], topics.get(flow.source, []))
    problems += _remote_clashes(replicating, topics)
    for flow in flows:
        if flow.name in clients and not {flow.source, flow.target} & silent:
            problems += _acl_problems(config, flow, clients[flow.name])
    if not silent:
        problems += check_config_durability(config, timeout_s=timeout_s)
    return unique(problems)


def _unreachable(
    flows: Iterable[FlowConfig], clients: dict[str, FlowClients], timeout_s: float, problems: list[Problem]
) -> set[str]:
    asked: dict[str, str | None] = {}
    for flow in flows:
        resolved = clients.get(flow.name)
        if resolved is None:
            continue
        for side, alias in (("source", flow.source), ("target", flow.target)):
            if alias in asked:
                continue
            config = resolved.admin(side)
            asked[alias] = why = no_answer(config, timeout_s)
            if why is not None:
                # The words a run's plan step uses for the same cluster (clients.check_reachable).
                said = ClusterUnreachable.not_answering(
                    alias,
                    f"{side} of {flow.name}",
                    str(config.get("bootstrap.servers", "(no bootstrap.servers)")),
                    timeout_s,
                    why,
                    address_key=f"{alias}.bootstrap.servers",
                    wait_setting=None,
                )
                problems.append(
                    error(
                        f"{alias}.bootstrap.servers",
                        str(said),
                        f"check {alias}.bootstrap.servers, {alias}.security.protocol and its credentials, "
                        "and that the cluster is up and reachable from here",
                    )
                )
    return {alias for alias, why in asked.items() if why is not None}


def _source_topics(
    flows: Iterable[FlowConfig], clients: dict[str, FlowClients], timeout_s: float
) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for flow in flows:
        if flow.source not in out:
            metadata = admin_client({**clients[flow.name].source_admin, "log_level": 0}).list_topics(
                timeout=timeout_s
            )
            out[flow.source] = sorted(metadata.topics)
    return out


def _filter_problems(flow: FlowConfig, clients: FlowClients, topics: list[str]) -> list[Problem]:
    problems = []
    if not any(should_replicate_topic(flow, t) for t in topics):
        problems.append(
            warning(
                f"{flow.name}.topics",
                f"the topic filter of {flow.name} (topics = {', '.join(flow.topics)}"
                + (f"; topics.exclude = {', '.join(flow.topics_exclude)}" if flow.topics_exclude else "")
                + f") matches none of the {len(topics)} topics on {flow.source}, so the flow copies nothing",
                "check the regular expressions (each must match a whole topic name) against the topics "
                f"on {flow.source}",
            )
        )
    if flow.emit_checkpoints_enabled or flow.sync_group_offsets_enabled:
        try:
            groups = list_groups(admin_client({**clients.source_admin, "log_level": 0}))
        except KafkaCallError as exc:
            return [
                *problems,
                warning(
                    f"{flow.name}.groups",
                    f"the groups on {flow.source} could not be listed ({exc})",
                    f"allow DESCRIBE on the cluster's groups to {flow.source}'s client",
                ),
            ]
        if groups and not any(should_replicate_group(flow, g) for g in groups):
            problems.append(
                warning(
                    f"{flow.name}.groups",
                    f"the group filter of {flow.name} (groups = {', '.join(flow.groups)}) matches none of the "
                    f"{len(groups)} consumer groups on {flow.source}, so no offsets are checkpointed",
                    "check the regular expressions (each must match a whole group id)",
                )
            )
    return problems


def _enabled_jobs(config: MirrorConfig, flow: FlowConfig) -> list[tuple[str, tuple[str, ...]]]:
    """(job, sides it touches) of each job the config runs for `flow`."""
    jobs: list[tuple[str, tuple[str, ...]]] = []
    both = ("source", "target")
    if config.replication_enabled(flow.source, flow.target):
        jobs.append(("replicate", both))
        jobs += [
            (job, both)
            for job, on in (
                ("refresh_topics", flow.refresh_topics_enabled),
                ("sync_topic_configs", flow.sync_topic_configs_enabled),
                ("sync_topic_acls", flow.sync_topic_acls_enabled),
                ("checkpoints", flow.emit_checkpoints_enabled and flow.emit_offset_syncs_enabled),
                ("group_sync", flow.sync_group_offsets_enabled and flow.emit_checkpoints_enabled),
            )
            if on
        ]
    if config.heartbeats_enabled(flow.source, flow.target) and flow.emit_heartbeats_enabled:
        jobs.append(("heartbeats", ("target",)))
    return jobs


def _acl_problems(config: MirrorConfig, flow: FlowConfig, clients: FlowClients) -> list[Problem]:
    """The ACLs each enabled job of `flow` lacks, in the words the job itself would fail with."""
    problems = []
    jobs = _enabled_jobs(config, flow)
    # The source's topics and groups once for all the flow's jobs, not once per job.
    listed = (
        source_names(admin_client({**clients.source_admin, "log_level": 0}))
        if any("source" in sides for _, sides in jobs)
        else None
    )
    for job, sides in jobs:
        try:
            require_job_acls(flow, job, clients, sides=sides, listed=listed)
        except MissingAcl as exc:
            problems.append(
                error(
                    f"{flow.name} {job}",
                    str(exc).split(":\n", 1)[-1].strip(),
                    "run the kafka-acls command shown on that cluster as an admin (see the "
                    "least-privilege table, docs/configuration/acls.md), or give the job's principal those ACLs another way",
                )
            )
    return problems


def _remote_clashes(flows: list[FlowConfig], topics: dict[str, list[str]]) -> list[Problem]:
    writers: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for flow in flows:
        for topic in topics.get(flow.source, []):
            if should_replicate_topic(flow, topic):
                remote = flow.policy.format_remote_topic(flow.source, topic)
                writers.setdefault((flow.target, remote), set()).add((flow.source, topic))
    problems = []
    for (target, remote), sources in sorted(writers.items()):
        if len(sources) < 2:
            continue
        shown = ", ".join(f"{topic} of {alias}" for alias, topic in sorted(sources)[:NAMES_SHOWN])
        problems.append(
            warning(
                f"{target}:{remote}",
                f"{remote} on {target} would be written from {len(sources)} source topics ({shown}): their "
                "records are mixed in one topic and their offsets in one partition's order",
                "use the default replication policy (remote names carry the source alias), or exclude the "
                "topic from all flows but one if that mix is not intended",
            )
        )
    return problems
