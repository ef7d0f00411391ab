"""Which groups a translation pass covers, their committed offsets, and a row per group partition.

Checkpoints and group offset sync read the same source groups the same way (MM2 3.5+): a group
counts if it passes the group filter and has a committed offset on at least one topic that
passes the topic filter; only those partitions are translated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.control.groups import Committed, GroupOffsets, committed_offsets, list_groups
from mirrorflow.control.translation.partition_pass import Translator
from mirrorflow.control.translation.rule import Translation
from mirrorflow.kafka import admin_client
from mirrorflow.policy import should_replicate_group


@dataclass(frozen=True, slots=True)
class TranslatedOffset:
    group: str
    topic: str
    partition: int
    target_topic: str | None
    committed: Committed
    translation: Translation | None
    reason: str | None = None


@dataclass(frozen=True)
class SourceGroups:
    listed: int
    offsets: dict[str, GroupOffsets]


def relevant_group_offsets(
    flow: FlowConfig,
    clients: FlowClients,
    wanted: Callable[[str], bool] | None = None,
    *,
    any_topic: bool = False,
) -> SourceGroups:
    """Committed offsets of the source groups the flow checkpoints.

    Failover names its groups itself (`wanted` replaces the group filter) and wants to see every
    partition (`any_topic`), so that topics the flow does not copy show up as untranslated.
    """
    admin = admin_client(clients.source_admin)
    groups = list_groups(admin)
    pick = wanted or (lambda group: should_replicate_group(flow, group))
    chosen = [g for g in groups if pick(g)]
    relevant: dict[str, GroupOffsets] = {}
    for group, offsets in committed_offsets(admin, chosen).items():
        kept = {
            tp: c for tp, c in offsets.items() if any_topic or flow.topic_filter.should_replicate_topic(tp[0])
        }
        if kept:
            relevant[group] = kept
    return SourceGroups(len(groups), relevant)


def translate_offsets(translator: Translator, offsets: Mapping[str, GroupOffsets]) -> list[TranslatedOffset]:
    """Every group partition translated, in (group, topic, partition) order."""
    translator.prepare(tp for group_offsets in offsets.values() for tp in group_offsets)
    translator.warm(
        {
            (topic, partition, c.offset)
            for group_offsets in offsets.values()
            for (topic, partition), c in group_offsets.items()
        }
    )
    out = [
        _translated(translator, group, topic, partition, committed)
        for group in sorted(offsets)
        for (topic, partition), committed in sorted(offsets[group].items())
    ]
    # A partition found out of source order by a later group is translated again for the
    # groups that came before (see Translator.stale).
    stale = translator.stale()
    if stale:
        out = [
            _translated(translator, row.group, row.topic, row.partition, row.committed)
            if (row.topic, row.partition) in stale
            else row
            for row in out
        ]
    return out


def _translated(
    translator: Translator, group: str, topic: str, partition: int, committed: Committed
) -> TranslatedOffset:
    translation = translator.translate(topic, partition, committed.offset)
    route = translator.route(topic)
    return TranslatedOffset(
        group,
        topic,
        partition,
        route.target_topic if route else None,
        committed,
        translation,
        None if translation else translator.reasons.get((topic, partition)),
    )


def by_group(rows: Iterable[TranslatedOffset]) -> dict[str, list[TranslatedOffset]]:
    out: dict[str, list[TranslatedOffset]] = {}
    for row in rows:
        out.setdefault(row.group, []).append(row)
    return out
