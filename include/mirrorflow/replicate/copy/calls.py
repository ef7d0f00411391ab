"""The copy's Kafka calls: client settings, calls bounded by the clusters' reachability, and
what an error means (fenced, too large, retriable).

Every blocking call waits in slices of WAIT_SLICE_S and looks at the cluster's ClusterWatch in
between, so a cluster that went away ends the copy within mirrorflow.cluster.unreachable.timeout.ms
however many calls are waiting on it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from mirrorflow import awake
from mirrorflow.kafka import LIBRDKAFKA_LOG, ClusterUnreachable, ClusterWatch, served, topic_ids
from mirrorflow.replicate.copy.fencing_log import producer_log
from mirrorflow.replicate.copy.job import CopyError, CopyJob

CLIENT_TIMEOUT_S = 60.0
WAIT_SLICE_S = 1.0
NEW_TOPIC_WAIT_S = 10.0
ABORT_TIMEOUT_S = 10.0
COPY_REQUEST_BYTES = 100 << 20  # Kafka's socket.request.max.bytes default: no bigger record can arrive

# librdkafka holds a client's connections to brokers it learns from the bootstrap metadata back
# for half of reconnect.backoff.ms ("sparse connections"; 50 ms at the default 100 ms). A copy
# makes a producer per writer slot, so that wait was paid again and again (measured: 45 ms of a
# 55 ms first metadata request). A user's own setting wins.
COPY_RECONNECT_BACKOFF_MS = 20

# The copy producer's linger.ms when the user sets none (nor its alias queue.buffering.max.ms).
# librdkafka's idempotent producer (and so the transactional one) sends at most five requests
# per partition at a time, and while five are out its broker thread wakes at once again for
# every queued record older than linger.ms: with the 5 ms default, a bulk copy whose queue runs
# ahead of the target spun that thread for about a quarter of the copy's CPU (measured with perf:
# rd_kafka_toppar_producer_serve and its mutexes, 2.5 us of 9.6 us a record). A full batch
# (batch.size, batch.num.messages) is sent without waiting for it, and every transaction ends
# with a flush, which sends what lingers at once, so the copy's records never wait for it.
COPY_LINGER_MS = 1000

# Source consumer settings that suit a bulk copy; the user's source consumer config overrides
# them. Once its prefetch queue holds queued.max.messages.kbytes (64 MiB), librdkafka waits
# fetch.queue.backoff.ms (1 s by default) before it fetches again, while a copy drains that
# queue in a fraction of the time: with the default, a single-partition copy mostly waits.
# A fetch carries at most max.partition.fetch.bytes per partition (1 MiB by default); 8 MiB means
# an eighth of the fetch requests for both sides to handle. A worker's consumers are reused from
# partition to partition (see clients.SharedClients), and a consumer sends one fetch at a time to
# a broker: once a partition's copy has read to the end, the broker holds the next fetch for
# fetch.wait.max.ms (500 ms by default) before it answers, and the next partition's first fetch
# waits behind it. A fetch that finds records returns at once whatever this is.
CONSUMER_DEFAULTS: dict[str, object] = {
    "fetch.queue.backoff.ms": 10,
    "max.partition.fetch.bytes": 8 << 20,
    "fetch.wait.max.ms": 10,
}

log = logging.getLogger("mirrorflow.replicate.copy")

FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})
"""What a producer sees once a newer one with its transactional.id exists (or the broker aborted
its transaction at transaction.timeout.ms and bumped its epoch): librdkafka names it _FENCED or
PRODUCER_FENCED, and a broker answers a produce of the old epoch with INVALID_PRODUCER_EPOCH,
which librdkafka treats as abortable. Trying again would fence the newer writer back."""


def kafka_error(exc: BaseException) -> KafkaError | None:
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return error if isinstance(error, KafkaError) else None


def is_fencing(exc: BaseException, fatal: KafkaError | None = None) -> bool:
    """Whether `exc` says a newer writer took over. A producer that hit a fatal error answers
    every later call with _FATAL ("Local: Fatal error"); `fatal` is the error librdkafka reported
    as fatal first (see Writer's error callback), which says why."""
    error = kafka_error(exc)
    if error is None:
        return False
    if error.code() in FENCED_CODES:
        return True
    return error.code() == KafkaError._FATAL and fatal is not None and fatal.code() in FENCED_CODES


def is_too_large(exc: BaseException) -> bool:
    error = kafka_error(exc)
    return error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE


def describe(exc: BaseException) -> str:
    error = kafka_error(exc)
    if error is not None:
        return f"{error.name()}: {error.str()}"
    return str(exc)


def new_client_config(config: dict[str, Any]) -> dict[str, Any]:
    """A copy producer's settings. It never has a topic created by writing to (or asking the
    metadata of) one that is missing, whatever the config it was given says (librdkafka's
    producer default allows it): a late writer of a deleted progress topic brought it back with
    one partition and cleanup.policy=delete, which retention then empties.

    Its librdkafka lines go through Python logging (the config's `logger`, else
    mirrorflow.librdkafka), a transactional producer's by way of fencing_log, which holds the
    lines of a fenced writer until the window says whether a handover fenced it."""
    config["logger"] = producer_log(config.get("logger") or LIBRDKAFKA_LOG, config.get("transactional.id"))
    config["allow.auto.create.topics"] = False
    if "reconnect.backoff.ms" not in config:
        ceiling = int(config.get("reconnect.backoff.max.ms", 10_000))
        config["reconnect.backoff.ms"] = min(COPY_RECONNECT_BACKOFF_MS, ceiling)
    return config


def copy_linger_ms(config: dict[str, Any]) -> int:
    """COPY_LINGER_MS, below the producer's message.timeout.ms (librdkafka refuses a linger.ms
    that is not)."""
    timeout_ms = int(config.get("message.timeout.ms", config.get("delivery.timeout.ms", 300_000)))
    return max(0, min(COPY_LINGER_MS, timeout_ms // 2))


def producer_config(job: CopyJob, watch: ClusterWatch, transactional: str | None) -> dict[str, Any]:
    config = new_client_config(
        {**watch.config(job.target_producer), "enable.idempotence": True, "acks": "all"}
    )
    if "linger.ms" not in config and "queue.buffering.max.ms" not in config:
        config["linger.ms"] = copy_linger_ms(config)
    # librdkafka refuses records above message.max.bytes (1,000,000 by default) itself, below
    # Kafka's own default limit: the target's topic limit is the one that must decide.
    config["message.max.bytes"] = max(int(config.get("message.max.bytes", 0)), COPY_REQUEST_BYTES)
    if transactional:
        config["transactional.id"] = transactional
        config["logger"] = producer_log(config["logger"], transactional)
    return config


def source_consumer_config(job: CopyJob) -> dict[str, Any]:
    """The copy consumer's settings: the user's, over mirrorflow's defaults, under what the copy
    itself relies on (no group offsets, EOF events, its own group id)."""
    return {
        "isolation.level": "read_committed",
        **CONSUMER_DEFAULTS,
        **job.source_consumer,
        # The plan fixed where each span starts (the user's auto.offset.reset only decides that
        # for partitions with no progress). The copy never jumps by itself: an offset that is
        # gone is an error event, counted as lost to retention or failed, never skipped silently.
        "auto.offset.reset": "error",
        "group.id": f"mirrorflow-{job.source}->{job.target}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
    }


def watches(job: CopyJob) -> tuple[ClusterWatch, ClusterWatch]:
    """(source, target) watches of one worker: every copy thread and client of the worker tells
    them what it sees, so once a cluster has been out of reach for its limit, every copy waiting
    on it gives up at once instead of each waiting out the limit in turn."""
    return (
        ClusterWatch(
            job.source, str(job.source_consumer.get("bootstrap.servers", "")), job.unreachable_timeout_s
        ),
        ClusterWatch(
            job.target, str(job.target_producer.get("bootstrap.servers", "")), job.unreachable_timeout_s
        ),
    )


def retrying(call: Callable[[float], Any], watch: ClusterWatch, what: str, *, answered: bool = True) -> Any:
    """Run a transactional call that may be called again after a timeout (init, commit, abort)
    in short slices, so a cluster that went away is noticed within its unreachable limit.

    `answered`: whether the call's success is the cluster's answer. An abort is not: librdkafka
    ends a transaction that registered no partition without asking the coordinator, so an idle
    copy's abort succeeds against a dead target, and it kept the worker's watch (shared by its
    copies) from ever reaching the limit."""
    deadline = awake.monotonic() + CLIENT_TIMEOUT_S
    while True:
        try:
            result = call(WAIT_SLICE_S)
            if answered:
                watch.alive()
            return result
        except KafkaException as exc:
            error = kafka_error(exc)
            if error is None or not error.retriable() or awake.monotonic() > deadline:
                raise
            watch.check()
            log.debug("%s: retrying after %s", what, error)


def abort(producer: Producer, watch: ClusterWatch) -> None:
    """abort_transaction, retried like the other transactional calls; its success is no answer
    from the cluster (see `retrying`)."""
    retrying(producer.abort_transaction, watch, "abort_transaction", answered=False)


def flush(
    producer: Producer,
    watch: ClusterWatch,
    timeout_s: float = CLIENT_TIMEOUT_S,
    delivered: Callable[[], int] | None = None,
) -> int:
    """producer.flush in short slices: returns what is still unsent after `timeout_s`, and raises
    ClusterUnreachable as soon as the cluster has been out of reach for its limit.

    `delivered` counts the successful delivery reports of what is being flushed: only one more of
    those proves the cluster answered. A shorter queue proves nothing, since librdkafka also
    empties it by failing deliveries (message.timeout.ms) of a cluster that is gone; counted as
    answers, those kept a dead target looking alive. Without `delivered`, the flush clears nothing
    and leaves the watch to the clients' other answers."""
    deadline = awake.monotonic() + timeout_s
    acknowledged = delivered() if delivered is not None else 0
    remaining = served(producer.flush, 0)
    while remaining:
        remaining = served(producer.flush, WAIT_SLICE_S)
        if delivered is not None and delivered() > acknowledged:
            acknowledged = delivered()
            watch.alive()
        watch.check()
        if awake.monotonic() > deadline:
            break
    return remaining


def flush_all(
    producer: Producer, watch: ClusterWatch, what: str, delivered: Callable[[], int] | None = None
) -> None:
    remaining = flush(producer, watch, delivered=delivered)
    if remaining:
        raise CopyError(f"{remaining} {what} were not acknowledged in time")


def drop(producer: Producer) -> None:
    """Let a producer go now: what it holds unsent is purged (its attempt already failed), so
    closing never waits on a cluster that went away."""
    with contextlib.suppress(KafkaException, SystemError, RuntimeError):
        producer.purge()
        producer.flush(0)


METADATA_FLOOR_S = 3.0
METADATA_RETRY_S = 0.2
MAX_PAUSES = 3
"""How often one request is asked again because the process was stopped while it waited."""


def request_wait(watch: ClusterWatch) -> float:
    """How long one request to the watched cluster may wait: what is left of the limit, at least
    METADATA_FLOOR_S (see topic_metadata)."""
    return max(min(watch.limit_s, METADATA_FLOOR_S), watch.time_left())


def topic_metadata(client: Producer | Consumer, topic: str, watch: ClusterWatch) -> Any:
    """One Metadata request for `topic` (None when the answer does not name it); a cluster
    that does not answer within the watch's limit is ClusterUnreachable. A request made once the
    cluster is already out of reach waits only what is left of the limit, but at least
    METADATA_FLOOR_S: a new reader's first request, made after the source died, once held a copy
    (and the large-span turn others waited for) a whole limit more; a process that was frozen
    (SIGSTOP, a suspended VM) past the limit still gets a real chance to hear from the cluster,
    whose answer clears the watch. A request that fails well before that time (its connection
    broke) is asked again within it. The wait is on the process's awake clock (awake.py): a
    process stopped while it waited (SIGSTOP) has waited only as long as it ran."""
    deadline = awake.monotonic() + request_wait(watch)
    while True:
        try:
            answer = client.list_topics(topic, timeout=max(0.1, deadline - awake.monotonic()))
            break
        except KafkaException as exc:
            error = kafka_error(exc)
            if error is None or error.code() not in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT):
                raise
            if awake.monotonic() >= deadline - METADATA_RETRY_S:
                raise ClusterUnreachable(watch.alias, watch.bootstrap, watch.limit_s, error.str()) from exc
            # Failed well before the wait was out: a connection that broke, not a cluster that
            # stayed silent. librdkafka closes a connection whose request outlived
            # socket.timeout.ms, so a process woken from SIGSTOP (or a suspended VM) finds its
            # connections failing their requests at once; asking again goes over a new one.
            time.sleep(METADATA_RETRY_S)
    watch.alive()
    return answer.topics.get(topic)


def described_topic_ids(admin: AdminClient, topics: Iterable[str], watch: ClusterWatch) -> dict[str, str]:
    """kafka.topic_ids waiting as topic_metadata does: what is left of the watch's limit, at least
    METADATA_FLOOR_S. No answer in that time is ClusterUnreachable (the cluster has then been
    silent for the limit), not an empty answer: a copy that took it for one went on to produce and
    flush, and waited the limit a second time (a micro-batch window whose target died ended after
    42 s, limit 15 s). An error well before that time (a broker's connection dropped, as in a
    leader's failover) is no proof the cluster is gone: the cluster is asked again until that time
    is up, and never skipped (a check that passes unanswered copies a recreated topic as the old
    one). A request whose wait ran out while the process was stopped (awake.py) is asked again."""
    topics = list(topics)
    pauses = 0
    deadline = awake.monotonic() + request_wait(watch)
    while True:
        timeout = max(METADATA_RETRY_S, deadline - awake.monotonic())
        started, awake_started = time.monotonic(), awake.monotonic()
        try:
            ids = topic_ids(admin, topics, timeout_s=timeout, answered=True)
        except (TimeoutError, KafkaException) as exc:
            ran = awake.monotonic() - awake_started
            if pauses < MAX_PAUSES and time.monotonic() - started >= timeout and ran < timeout * 0.9:
                pauses += 1
                deadline = awake.monotonic() + request_wait(watch)
                continue  # the wait ran out while the process was stopped
            if isinstance(exc, TimeoutError):
                raise ClusterUnreachable(
                    watch.alias,
                    watch.bootstrap,
                    watch.limit_s,
                    f"DescribeTopics got no answer in {timeout:.0f}s",
                ) from exc
            if awake.monotonic() + METADATA_RETRY_S < deadline:
                watch.check()
                time.sleep(METADATA_RETRY_S)
                continue
            raise ClusterUnreachable(watch.alias, watch.bootstrap, watch.limit_s, describe(exc)) from exc
        watch.alive()
        return ids


def init_transactions(producer: Producer, topic: str, watch: ClusterWatch) -> None:
    """init_transactions on a new producer, after a Metadata request that waits for a broker
    connection. A new client's first Metadata answer comes over its bootstrap connection, which
    librdkafka then closes for the brokers the answer names; init_transactions called before one
    of those is up finds "no brokers available for Transactions" and waits for the coordinator
    query timer, 500 ms (measured: one init in seven, 90 ms on average; 4 ms with this request)."""
    topic_metadata(producer, topic, watch)
    retrying(producer.init_transactions, watch, "init_transactions")


def partition_count(producer: Producer, topic: str, watch: ClusterWatch) -> int:
    """Partitions of `topic` on the target. A topic the plan created moments ago may not have
    reached every broker yet (UNKNOWN_TOPIC_OR_PARTITION for a while): wait that out, briefly."""
    deadline = awake.monotonic() + NEW_TOPIC_WAIT_S
    while True:
        metadata = topic_metadata(producer, topic, watch)
        if metadata is not None and metadata.error is None and metadata.partitions:
            return len(metadata.partitions)
        unknown = metadata is None or (
            metadata.error is not None and metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        )
        if not unknown or awake.monotonic() > deadline:
            raise CopyError(f"topic {topic} is missing on the target cluster: {metadata and metadata.error}")
        time.sleep(0.1)
