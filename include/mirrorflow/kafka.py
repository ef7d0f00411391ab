"""Small, shared Kafka helpers on confluent-kafka: bounded partition reads and offset lookups.

Every mirrorflow component talks to Kafka through confluent-kafka directly; this module only
holds the few patterns several of them need, so each is written (and tested) once.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from mirrorflow import awake

TIMEOUT_S = 60.0
POLL_S = 0.05
ATTEMPT_S = 5.0
# librdkafka's own codes for "the broker asked is gone": worth asking again, after a metadata refresh.
LEADER_GONE = (
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._DESTROY_BROKER,
    KafkaError._NODE_UPDATE,
)
# The broker's own "ask again" answers while a partition's leader is being elected (a topic just
# created, say by MM2's Connect worker). librdkafka does not mark them retriable on every call
# (get_watermark_offsets raises NOT_LEADER_FOR_PARTITION with retriable() false), so they are named.
# OFFSET_NOT_AVAILABLE is a newly elected leader whose high watermark has not caught up yet: Kafka
# refuses offsets until it has, so that they never go backwards.
# The leader-epoch answers come from a broker whose metadata lags the leader epoch the client
# sent ("Leader epoch is newer than broker epoch", seen from ListOffsets on a loaded machine right
# after a topic's creation); Kafka's own clients retry them too.
ASK_AGAIN = (
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.OFFSET_NOT_AVAILABLE,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.FENCED_LEADER_EPOCH,
)

# What a cluster answers for a partition it does not have.
UNKNOWN = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC)
# What kafka_diagnosis.no_answer says of a cluster when its connection errors are certain (a host
# that does not resolve, a security protocol mismatch, failed authentication).
DIAGNOSES = ("cannot resolve host", "likely a security protocol mismatch", "authentication failed")


class RepeatFilter(logging.Filter):
    """Lets one librdkafka line of a kind through per `interval_s` and counts the rest.

    A cluster that is down makes every client log a failed connection on each reconnect
    backoff; without this a run's log fills with thousands of identical lines. Lines of a kind
    share librdkafka's facility and their text with digits removed (ports, offsets, timings)."""

    def __init__(self, interval_s: float = 30.0) -> None:
        super().__init__()
        self.interval_s = interval_s
        self.seen: dict[tuple[str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        facility = str(args[0]) if args else ""
        text = str(args[-1]) if args else record.getMessage()
        kind = (facility, _DIGITS.sub("", text))
        now = time.monotonic()
        last, suppressed = self.seen.get(kind, (-self.interval_s, 0))
        if now - last < self.interval_s:
            self.seen[kind] = (last, suppressed + 1)
            return False
        self.seen[kind] = (now, 0)
        if len(self.seen) > 1000:  # bounded: forget the oldest kinds
            for old in sorted(self.seen, key=lambda k: self.seen[k][0])[:500]:
                del self.seen[old]
        if suppressed:
            record.msg = f"{record.msg} ({suppressed} like it in the last {now - last:.0f}s not shown)"
        return True


_DIGITS = re.compile(r"\d+")
# librdkafka's own log, at its real levels (confluent-kafka maps syslog levels to Python's).
# FlowClients puts it in every client config; records of a kind repeat at most every 30 s.
LIBRDKAFKA_LOG = logging.getLogger("mirrorflow.librdkafka")
if not any(isinstance(f, RepeatFilter) for f in LIBRDKAFKA_LOG.filters):
    LIBRDKAFKA_LOG.addFilter(RepeatFilter())


class KafkaCallError(RuntimeError):
    """A Kafka call failed; the message names the cluster object and the broker's error."""


UNREACHABLE_TIMEOUT_KEY = "mirrorflow.cluster.unreachable.timeout.ms"


class ClusterUnreachable(RuntimeError):
    """Every broker of a cluster stayed unreachable for longer than the flow allows.

    One error naming the cluster, its address and what to check stands for what librdkafka would
    otherwise say a thousand times (one failed connection per reconnect backoff); it is raised
    when a cluster goes away mid-copy (ClusterWatch) and when a run starts against a cluster that
    does not answer (`not_answering`, from mirrorflow.clients.check_reachable)."""

    def __init__(
        self, alias: str, bootstrap: str, seconds: float, last_error: str, *, message: str | None = None
    ) -> None:
        super().__init__(
            message
            or f"cluster {alias} ({bootstrap}) has been unreachable for {seconds:.0f}s: {last_error}; "
            f"check that its brokers are up and reachable from here (the limit is {UNREACHABLE_TIMEOUT_KEY})"
        )
        self.alias = alias

    @classmethod
    def not_answering(
        cls,
        alias: str,
        role: str,
        bootstrap: str,
        seconds: float,
        error: str,
        *,
        address_key: str,
        wait_setting: str | None = UNREACHABLE_TIMEOUT_KEY,
    ) -> ClusterUnreachable:
        setting = f" ({wait_setting} sets the wait)" if wait_setting else ""
        if error.startswith(DIAGNOSES):
            return cls(
                alias,
                bootstrap,
                seconds,
                error,
                message=f"cluster {alias} ({role}) at {bootstrap} cannot be reached: {error} (check {address_key})",
            )
        return cls(
            alias,
            bootstrap,
            seconds,
            error,
            message=f"cluster {alias} ({role}) at {bootstrap} did not answer within {seconds:g}s ({error}); "
            f"check {address_key} and that the cluster is up and reachable from here{setting}",
        )


# librdkafka's answers that say a cluster cannot be reached (all of its brokers down, a failed
# connection or request); anything that gets through clears them.
_UNREACHABLE = (
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._RESOLVE,
    KafkaError._AUTHENTICATION,
)


class ClusterWatch:
    """Tells, from librdkafka's error callback, how long one cluster has been unreachable.

    Give `on_error` to a client as its `error_cb`; call `alive()` whenever the cluster answered
    (a successful delivery report, a record, a metadata answer), never on what librdkafka decides
    by itself (failed deliveries, an abort it ends without the coordinator); `check()` between
    bounded waits raises ClusterUnreachable once the cluster has been out of reach for `limit_s`."""

    def __init__(self, alias: str, bootstrap: str, limit_s: float) -> None:
        self.alias, self.bootstrap, self.limit_s = alias, bootstrap, limit_s
        self.down_since: float | None = None
        self.last_error = ""

    def on_error(self, error: KafkaError) -> None:
        if error.code() in _UNREACHABLE:
            if self.down_since is None:
                self.down_since = awake.monotonic()
            self.last_error = error.str()

    def alive(self) -> None:
        self.down_since = None

    def down_for(self) -> float:
        """How long the cluster has been out of reach, on the process's awake clock (awake.py):
        time the process spent stopped (SIGSTOP) is no time the cluster failed to answer in."""
        return 0.0 if self.down_since is None else awake.monotonic() - self.down_since

    def check(self) -> None:
        if self.down_since is not None and self.down_for() > self.limit_s:
            raise ClusterUnreachable(self.alias, self.bootstrap, self.down_for(), self.last_error)

    def time_left(self) -> float:
        """How long a call may still wait before the cluster has been out of reach for the limit:
        a call made after the cluster went away waits what is left of it, not the whole limit."""
        if self.down_since is None:
            return self.limit_s
        return max(0.0, self.limit_s - self.down_for())

    def config(self, client_config: Mapping[str, Any]) -> dict[str, Any]:
        """The client config with this watch as its error callback."""
        return {**client_config, "error_cb": self.on_error}


def served(call: Callable[[float], int], timeout: float) -> int:
    """producer.flush or poll, with the fatal error underneath when confluent-kafka reports one.

    After a fatal error (a fenced producer, an authorization refused) confluent-kafka 2.16 raises
    it from flush() and then runs the delivery callbacks with that exception still set, which
    Python reports as a SystemError from the callback; the KafkaException is its cause.

    Those two exceptions are never released (confluent-kafka keeps a reference the garbage
    collector cannot see), so they must not carry our frames: re-raised as it was, their tracebacks
    kept every frame it passed through alive, and with them the fenced producer, the worker's
    consumers and any client a caller held, whose threads then ran for the life of the process
    (a leaked producer's metadata refresh recreated deleted topics with the broker's defaults).
    A fresh exception with the same error is raised instead, and the kept ones are cut loose."""
    try:
        return call(timeout)
    except SystemError as exc:
        cause = exc.__cause__
        if not isinstance(cause, KafkaException):
            raise
        exc.__cause__ = None
        exc.__traceback__ = None
        cause.__traceback__ = None
        cause.__context__ = None
        raise KafkaException(*cause.args) from None


def admin_client(config: Mapping[str, Any]) -> AdminClient:
    """An admin client that never has a topic created by asking its metadata (librdkafka makes
    admin clients as producers, whose default allows it)."""
    return AdminClient({**config, "allow.auto.create.topics": False})


def await_topics(admin: AdminClient, partitions: Mapping[str, int], *, timeout_s: float = TIMEOUT_S) -> None:
    """Return once every topic is known with at least its partition count, each with a leader.

    Kafka acknowledges CreateTopics and CreatePartitions when its controller has committed
    them; brokers learn of them a moment later, and until then a producer or a metadata request
    gets UNKNOWN_TOPIC_OR_PARTITION. Whoever creates topics for others to use waits here, with
    one DescribeTopics request per attempt for all of them."""
    waiting = dict(partitions)
    deadline = time.monotonic() + timeout_s
    while waiting:
        futures = admin.describe_topics(TopicCollection(sorted(waiting)), request_timeout=timeout_s)
        for name, future in futures.items():
            try:
                description = future.result(timeout_s)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise KafkaCallError(f"describing topic {name} failed: {exc}") from exc
                continue
            known = description.partitions
            if len(known) >= waiting[name] and all(p.leader is not None and p.leader.id >= 0 for p in known):
                del waiting[name]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise KafkaCallError(
                f"topics created {timeout_s:.0f}s ago are still not served by the brokers: {', '.join(sorted(waiting))}"
            )
        time.sleep(POLL_S)


NO_ANSWER_CODES = frozenset({KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN})
"""Errors that say a request got no answer from the cluster, not that the cluster refused it."""


def topic_ids(
    admin: AdminClient, topics: Iterable[str], *, timeout_s: float = TIMEOUT_S, answered: bool = False
) -> dict[str, str]:
    """Kafka's topic ID of each existing topic (one DescribeTopics request for all of them): a
    deleted and recreated topic has the same name and a new ID. Topics that do not exist, or
    that the cluster does not describe, are left out. `answered`: a request the cluster did not
    answer raises (TimeoutError, or KafkaException with a NO_ANSWER_CODES code) instead of
    leaving its topics out."""
    names = sorted(set(topics))
    if not names:
        return {}
    out = {}
    futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout_s)
    for name, future in futures.items():
        try:
            description = future.result(timeout_s)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if answered and isinstance(error, KafkaError) and error.code() in NO_ANSWER_CODES:
                raise
            continue
        if description.topic_id is not None:
            out[name] = str(description.topic_id)
    return out


def reader(config: Mapping[str, Any], *, isolation: str = "read_committed") -> Consumer:
    """A consumer for assigned reads: no group membership, no commits."""
    return Consumer(
        {
            **config,
            "group.id": config.get("group.id", "mirrorflow-reader"),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
        }
    )


def idle_read_text(
    config: Mapping[str, Any], topic: str, partition: int, position: int, end: int | None, idle_s: float
) -> str:
    """Why a read of `topic`-`partition` gave up: nothing came for `idle_s` seconds, neither a
    record nor the partition's end, from offset `position` on."""
    goal = "the partition's end" if end is None else f"offset {end}"
    servers = config.get("bootstrap.servers", "?")
    return (
        f"reading {topic}-{partition} at {servers}: nothing came for {idle_s:g}s from offset {position} "
        f"on, neither a record nor {goal} (the cluster, or the partition's leader, did not answer in "
        "time, or the records up to there do not exist)"
    )


def read_partition(
    config: Mapping[str, Any],
    topic: str,
    partition: int,
    *,
    start: int = 0,
    end: int | None = None,
    isolation: str = "read_committed",
    idle_timeout_s: float = 30.0,
) -> Iterator[Message]:
    """Records of one partition from `start` up to `end` (exclusive), or to the end as of now:
    the first end-of-partition event, which a read_committed reader sees at the last stable offset."""
    consumer = reader(config, isolation=isolation)
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        last_seen = time.monotonic()
        position = start
        while True:
            # librdkafka's consume() waits its whole timeout unless the batch fills up, so a
            # short timeout in a loop ends a small read quickly.
            batch = consumer.consume(1000, timeout=POLL_S)
            if not batch:
                if time.monotonic() - last_seen > idle_timeout_s:
                    raise KafkaCallError(
                        idle_read_text(config, topic, partition, position, end, idle_timeout_s)
                    )
                continue
            last_seen = time.monotonic()
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if end is None or message.offset() >= end:
                            return
                        continue
                    raise KafkaException(error)
                if end is not None and message.offset() >= end:
                    return
                position = message.offset() + 1
                yield message
                if end is not None and message.offset() + 1 >= end:
                    return
    finally:
        consumer.close()
