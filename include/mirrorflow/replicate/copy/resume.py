"""Where a span's copy starts, and whether it may start at all.

A plan names the topic incarnations it copies between (`span.incarnation`: the source and remote
topic ids) and the progress it saw (`span.progress`, `span.progress_incarnation`). Between the plan
and the copy anything can happen: a retry of the same run copied part of the span, a concurrent
run copied it, the source or the remote topic was deleted and created again. Offsets alone cannot
tell these apart (a recreated topic reuses offsets from 0), so every decision here compares topic
ids too:

- progress written for the span's own incarnation moved on: the copy resumes right after it;
- progress is still what the plan saw: the copy starts where the plan said;
- progress now belongs to an incarnation the plan did not know, or the topics themselves are no
  longer the plan's: the plan is stale. The span is not copied (StalePlan); the next plan sees
  the topics and progress as they are and copies exactly what is missing.

Progress without topic ids (MM2 wrote it, or a mirrorflow that recorded none) can only be
compared by offset, as before ids were recorded.
"""

from __future__ import annotations

from collections.abc import Mapping

from mirrorflow.replicate.copy.job import StalePlan
from mirrorflow.replicate.plan import PartitionSpan
from mirrorflow.replicate.progress import Stored, split_incarnation


def topic_ids(incarnation: str) -> tuple[str, str]:
    """(source topic id, remote topic id) of an incarnation, without its floor."""
    source_id, remote_id, _ = split_incarnation(incarnation)
    return source_id, remote_id


def sync_incarnation(span: PartitionSpan) -> str:
    """What the span's offset-syncs name as their incarnation: "<source id>,<remote id>", or ""
    when the plan knew no topic ids."""
    source_id, remote_id = topic_ids(span.incarnation)
    return f"{source_id},{remote_id}" if source_id or remote_id else ""


def as_planned(span: PartitionSpan, stored: Stored | None) -> bool:
    """Whether progress is still what the plan saw (offset and incarnation)."""
    if stored is None:
        return True
    return stored.offset == span.progress and stored.incarnation == span.progress_incarnation


def _same_incarnation(stored: Stored, span: PartitionSpan) -> bool | None:
    """Whether stored progress was written for the span's own topics; None when either side
    names no topic ids, so only offsets can be compared."""
    stored_ids, span_ids = topic_ids(stored.incarnation), topic_ids(span.incarnation)
    if not any(stored_ids) or not any(span_ids):
        return None
    return stored_ids == span_ids


def resume_offset(span: PartitionSpan, stored: Stored | None) -> int:
    """Where the copy of `span` starts, given the progress stored now; raises StalePlan when the
    progress belongs to topics the plan did not copy between."""
    if stored is None or as_planned(span, stored):
        return span.start
    same = _same_incarnation(stored, span)
    if same is False:
        raise StalePlan(
            f"progress of {span.topic}-{span.partition} was written at offset {stored.offset} for other "
            f"topic incarnations ({stored.incarnation}) than this run's plan copies ({span.incarnation}) "
            "since the plan was made: the source or the remote topic was deleted and created again, or "
            "another run copied it meanwhile; not copied, the next run plans it anew"
        )
    # The same topics (or none named): a retry of this run, or another writer, went on since the plan.
    return max(span.start, stored.offset + 1)


def moves_progress(span: PartitionSpan, stored: Stored | None) -> bool:
    """Whether a span with nothing (left) to copy must still write progress: to its end, when
    the plan's view still holds and progress is not there yet (auto.offset.reset=latest, records
    the source deleted before they were copied, a recreated topic: its progress is then -1 if
    the new topic is empty), so the next plan starts in the right place."""
    return (
        as_planned(span, stored)
        and (span.end > 0 or bool(span.restarted))
        and (stored is None or stored.offset != span.end - 1 or bool(span.restarted))
    )


def check_live(span: PartitionSpan, source_ids: Mapping[str, str], remote_ids: Mapping[str, str]) -> None:
    """Raise StalePlan if the source or remote topic is not the incarnation the plan copies
    between any more (deleted and created again since): copying would read the new source
    topic's offsets as the old one's, or write into a remote topic the plan never saw."""
    planned_source, planned_remote = topic_ids(span.incarnation)
    live_source, live_remote = source_ids.get(span.topic, ""), remote_ids.get(span.remote_topic, "")
    for planned, live, topic, side in (
        (planned_source, live_source, span.topic, "source"),
        (planned_remote, live_remote, span.remote_topic, "remote"),
    ):
        if planned and not live:
            # Fails closed: a topic missing now may be one being created again, which the copy
            # would take for the plan's.
            raise StalePlan(
                f"{side} topic {topic} is not there now (it was, with topic id {planned}, when this run "
                f"planned): deleted since, or being created again; {span.topic}-{span.partition} is not "
                "copied: the next run plans it anew"
            )
    if planned_source and live_source and planned_source != live_source:
        raise StalePlan(
            f"source topic {span.topic} was deleted and created again after this run's plan (topic id "
            f"{planned_source} is now {live_source}); {span.topic}-{span.partition} is not copied: the "
            "next run copies the new topic from its start"
        )
    if planned_remote and live_remote and planned_remote != live_remote:
        raise StalePlan(
            f"remote topic {span.remote_topic} was deleted and created again after this run's plan "
            f"(topic id {planned_remote} is now {live_remote}); {span.topic}-{span.partition} is not "
            "copied: the next run rebuilds it from the source"
        )
