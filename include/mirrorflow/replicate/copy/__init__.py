"""The copy engine: copy bounded offset ranges of source partitions to the same partition numbers
of their remote topics, exactly once (the default) or at least once, with progress and offset-syncs
in MM2's formats.

Each module decides one thing:

- job: what a worker is given (CopyJob) and gives back per partition (UnitResult);
- ids: the transactional ids a flow's copy writes under, now and in earlier versions;
- calls: client settings, Kafka calls bounded by the clusters' reachability, what errors mean;
- fencing_log: librdkafka's lines of a fenced writer, held until its window says whether a
  handover fenced it;
- clients: what a worker shares across partitions and ranges (progress reader, consumer pool,
  slot writers);
- writer: the writer of one slot, every fencing decision, "once fenced, never again";
- hanging: transactions left open on the target, found and ended before anything is written;
- resume: where a span starts, checked against stored and live topic incarnations;
- reader: reading a transaction's partitions with one assignment;
- chunk: one partition's records as produced, and the target offsets they landed at;
- transaction: one transaction of N partitions, the only path to the target;
- schedule: which partitions go together, retries, when a slot stops;
- refusal: records the target will not take;
- engine: a worker kept open from range to range.
"""

from mirrorflow.replicate.copy.calls import CONSUMER_DEFAULTS, source_consumer_config
from mirrorflow.replicate.copy.chunk import feed_runs
from mirrorflow.replicate.copy.clients import SharedClients
from mirrorflow.replicate.copy.counters import stats
from mirrorflow.replicate.copy.engine import SLOT_THREADS, CopyWorker, copy_slice
from mirrorflow.replicate.copy.ids import (
    partition_transactional_id,
    slot_transactional_id,
    transactional_id,
    transactional_id_prefix,
)
from mirrorflow.replicate.copy.job import (
    GROUP_PARTITIONS,
    CopyError,
    CopyJob,
    StalePlan,
    UnitResult,
    merge_ranges,
)
from mirrorflow.replicate.copy.schedule import SMALL_SPAN, copy_units


def copy_unit(job: CopyJob, span, shared: SharedClients | None = None) -> UnitResult:
    """Copy one span with a writer of its own slot; never raises (the error is in the result).

    `shared`: the worker's clients, when it copies more partitions than this one."""
    if shared is None:
        with SharedClients(job) as own:
            return copy_units(job, [span], own)[0]
    try:
        return copy_units(job, [span], shared)[0]
    finally:
        shared.settle_syncs()


__all__ = [
    "CONSUMER_DEFAULTS",
    "GROUP_PARTITIONS",
    "SLOT_THREADS",
    "SMALL_SPAN",
    "CopyError",
    "CopyJob",
    "CopyWorker",
    "SharedClients",
    "StalePlan",
    "UnitResult",
    "copy_slice",
    "copy_unit",
    "copy_units",
    "feed_runs",
    "merge_ranges",
    "partition_transactional_id",
    "slot_transactional_id",
    "source_consumer_config",
    "stats",
    "transactional_id",
    "transactional_id_prefix",
]
