"""The transactional ids a flow's copy writes under, now and in earlier versions."""

from __future__ import annotations

from mirrorflow.replicate.plan import COPY_SLOTS, writer_slot


def transactional_id_prefix(source: str, target: str) -> str:
    """What every transactional.id of a flow's copy starts with (the ACL's prefixed resource)."""
    return f"mirrorflow-{source}->{target}-"


def slot_transactional_id(source: str, target: str, slot: int, slots: int = COPY_SLOTS) -> str:
    # "#" cannot appear in a topic name, so no slot's id is ever a per-partition id.
    return f"{transactional_id_prefix(source, target)}#{slot}-of-{slots}"


def transactional_id(source: str, target: str, topic: str, partition: int, slots: int = COPY_SLOTS) -> str:
    """The transactional.id that writes the copy of a source partition: its slot's."""
    return slot_transactional_id(source, target, writer_slot(topic, partition, slots), slots)


def partition_transactional_id(source: str, target: str, topic: str, partition: int) -> str:
    """The id a mirrorflow without writer slots wrote a partition's copy under."""
    return f"{transactional_id_prefix(source, target)}{topic}-{partition}"


def older_ids(
    source: str, target: str, topic: str, partition: int, slots: int, current: int = COPY_SLOTS
) -> list[str]:
    """Ids other than the slot id under `current` writer slots (the flow's, plan.flow_writer_slots)
    that may have written a partition whose progress names `slots` writer slots (0: none named, so
    a writer with a transactional.id per partition; another count: the flow's before its mode or
    tasks.max changed)."""
    if slots == current:
        return []
    if slots:
        return [transactional_id(source, target, topic, partition, slots)]
    return [partition_transactional_id(source, target, topic, partition)]
