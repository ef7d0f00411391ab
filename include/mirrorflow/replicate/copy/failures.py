"""What one failure costs a partition of a slot's copy: a retry, or the error it fails with.

A partition alone is retried up to ATTEMPTS times; finding a record the target refuses takes up
to two more (refusal.py), which are not retries. What retrying cannot fix fails at once: a
CopyError (a stale plan, a missing remote partition, a transaction nobody of the flow can end), a
fatal producer error, anything unexpected. The messages for a slot another writer took are here
too, so that every path says the same.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException

from mirrorflow.kafka import KafkaCallError
from mirrorflow.replicate.copy.calls import describe, kafka_error
from mirrorflow.replicate.copy.chunk import PartitionCopy
from mirrorflow.replicate.copy.job import CopyError
from mirrorflow.replicate.copy.refusal import REFUSAL_STEPS, RecordRefused
from mirrorflow.replicate.copy.transaction import ForeignWriter
from mirrorflow.replicate.progress import ProgressReadError

ATTEMPTS = 3

log = logging.getLogger("mirrorflow.replicate.copy")


def retry_or_error(copy: PartitionCopy, exc: BaseException) -> tuple[bool, str | None]:
    """(retry, error): whether `copy` is tried again after `exc` (its attempt counted), and
    otherwise the error it fails with (None: it neither fails nor counts an attempt, as a step of
    finding a refused record)."""
    result = copy.result
    if isinstance(exc, RecordRefused):
        copy.refusal.steps += 1
        if copy.refusal.steps > REFUSAL_STEPS:
            return False, f"the target refused a record as too large: {exc}"
        return False, None
    if isinstance(exc, CopyError):
        return False, str(exc)
    final = False
    if isinstance(exc, ForeignWriter):
        message = str(exc)
    elif isinstance(exc, KafkaException):
        error = kafka_error(exc)
        message = describe(exc)
        final = error is not None and error.fatal()
    elif isinstance(exc, ProgressReadError):
        message = f"reading progress failed: {exc}"
    elif isinstance(exc, KafkaCallError):
        # A call the copy makes beside its own clients (the run-records look before a window's
        # writer writes): retried like a failed client call, never an unexpected failure.
        message = str(exc)
    else:
        log.error("copying %s-%s failed unexpectedly", copy.span.topic, copy.span.partition, exc_info=exc)
        return False, f"unexpected {type(exc).__name__}: {exc}"
    if final or result.attempts >= ATTEMPTS:
        return False, message
    result.attempts += 1
    return True, None


def fenced_error(copy: PartitionCopy) -> str:
    """A transaction of `copy` failed because the slot's writer was fenced."""
    return (
        f"fenced: another writer took over {copy.span.topic}-{copy.span.partition} (a newer attempt or a "
        "concurrent run of this flow, or a worker of this flow in another process that ended a transaction "
        "left open with the slot's id), or the broker aborted a transaction of this copy that outlived the "
        "producer's transaction.timeout.ms; nothing is lost, the next run copies on from progress"
    )


def taken_error(copy: PartitionCopy, where: str) -> str:
    """`copy` was not tried: the slot was taken while this writer copied `where`."""
    return (
        f"fenced: another writer took over {copy.span.topic}-{copy.span.partition} (a newer attempt or a "
        f"concurrent run of this flow took its writer slot while this one copied {where}); not copied"
    )


def swept_out_error(copy: PartitionCopy, exc: BaseException) -> str | None:
    """After this worker's own sweep fenced the slot's writer (progress_sweep.swept_since): the
    writer opens again, an attempt counted; the error once attempts ran out."""
    copy.result.attempts += 1
    if copy.result.attempts > ATTEMPTS:
        return f"fenced again and again by sweeps of hanging transactions with its slot's id: {exc}"
    return None
