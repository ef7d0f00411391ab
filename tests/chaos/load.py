"""The source's traffic while a fault schedule runs: a thread that writes sequenced records into
a few topics, part of them plain (idempotent) and part in transactions, some of which it aborts.

Transactions matter to the copy: they put commit and abort markers, and aborted records, into
the source partitions, so the copy's offsets skip on the source and its offset-syncs must end a
run at each gap; a copy that took an aborted record, or skipped a committed one, shows up in the
checker. Values name their topic, partition and a sequence number per partition, so the first
differences the checker prints can be read without a decoder. Some records have no key, some
have headers (repeated names, null values), so byte equality is tested on all of a record.

The load goes on through every fault, the source's own kill included: it never fails, it
counts. A producer whose transaction cannot be ended is dropped and a new one with the same
transactional.id fences it, as an application would do. What the source holds is the truth the
checker compares with, so nothing here needs to know which records made it.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import KafkaException, Producer

RATE = 250  # records a second, about half of them in transactions
BURST = 20  # plain records, then a transaction of as many, per round
ABORTED = 0.1  # the share of transactions aborted after their records were written
# A source transaction a killed source broker left open holds the copy's reads (its last stable
# offset) until the broker aborts it; 10 s instead of librdkafka's 60 keeps that short.
TRANSACTION_TIMEOUT_MS = 10_000
CALL_S = 10.0  # every transactional call waits at most this long


@dataclass
class LoadFigures:
    produced: int = 0  # records handed to a producer
    delivered: int = 0  # acknowledged by the source (plain ones, and transactional ones before the commit)
    transactions: Counter = field(default_factory=Counter)  # committed / aborted / failed
    errors: Counter = field(default_factory=Counter)  # error name -> count

    def line(self) -> str:
        errors = ", ".join(f"{name} {n}" for name, n in self.errors.most_common(5)) or "none"
        return (
            f"load: {self.produced:,} records produced, {self.delivered:,} acknowledged; transactions "
            f"committed {self.transactions['committed']}, aborted {self.transactions['aborted']}, "
            f"failed {self.transactions['failed']}; producer errors: {errors}"
        )


class Load:
    """`start()` it, `stop()` it; `figures` counts what it did and `failure` holds an exception
    that ended the thread early (a bug here, never a fault of the schedule's)."""

    def __init__(self, bootstrap: str, topics: tuple[str, ...], partitions: int, seed: int) -> None:
        self.bootstrap, self.topics, self.partitions = bootstrap, topics, partitions
        self.rng = random.Random(f"chaos-load-{seed}")
        self.transactional_id = f"chaos-load-{seed}"
        self.figures = LoadFigures()
        self.failure: BaseException | None = None
        self._sequence: Counter = Counter()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-load", daemon=True)

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 90.0) -> None:
        self._stopping.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise TimeoutError(f"the load thread did not end within {timeout_s:.0f}s")

    # -- records ------------------------------------------------------------------------------

    def _record(self) -> dict:
        topic = self.rng.choice(self.topics)
        partition = self.rng.randrange(self.partitions)
        self._sequence[(topic, partition)] += 1
        sequence = self._sequence[(topic, partition)]
        value = b"%s/%d/%d|" % (topic.encode(), partition, sequence) + self.rng.randbytes(
            self.rng.randrange(60)
        )
        record: dict = {"topic": topic, "partition": partition, "value": value}
        if self.rng.random() < 0.7:
            record["key"] = b"k%d-" % sequence + self.rng.randbytes(self.rng.randrange(4))
        if self.rng.random() < 0.3:
            record["headers"] = [
                (self.rng.choice(("trace", "h")), self.rng.choice((None, self.rng.randbytes(5))))
                for _ in range(self.rng.randrange(1, 4))
            ]
        return record

    def _delivered(self, error, _message) -> None:
        if error is None:
            self.figures.delivered += 1
        else:
            self.figures.errors[error.name()] += 1

    # -- producers ----------------------------------------------------------------------------

    def _plain(self) -> Producer:
        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                "log_level": 0,
            }
        )

    def _transactional(self) -> Producer | None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                "linger.ms": 5,
                "log_level": 0,
            }
        )
        try:
            producer.init_transactions(CALL_S)
        except KafkaException as exc:
            error = exc.args[0]
        else:
            return producer
        self.figures.errors[f"init: {error.name()}"] += 1
        self._flush(producer, 0)
        return None

    def _transaction(self, producer: Producer) -> bool:
        """One transaction of BURST records; False when the producer must be replaced.

        No client call is made while an exception is being handled: confluent-kafka keeps such
        an exception for good when a call raises meanwhile, and with it this frame's producer
        (tests/client_leaks.py)."""
        error = None
        try:
            producer.begin_transaction()
            for _ in range(BURST):
                producer.produce(on_delivery=self._delivered, **self._record())
                self.figures.produced += 1
            if self.rng.random() < ABORTED:
                producer.flush(CALL_S)  # written, then aborted: offsets a read_committed reader skips
                producer.abort_transaction(CALL_S)
                self.figures.transactions["aborted"] += 1
            else:
                producer.commit_transaction(CALL_S)
                self.figures.transactions["committed"] += 1
            return True
        except KafkaException as exc:
            error = exc.args[0]
        except BufferError:
            pass
        self.figures.transactions["failed"] += 1
        self.figures.errors[f"transaction: {error.name() if error else 'queue full'}"] += 1
        if error is None or not error.txn_requires_abort():
            return False
        try:
            producer.abort_transaction(CALL_S)
        except KafkaException:
            return False
        return True

    def _burst(self, plain: Producer) -> bool:
        """BURST plain records; False when the producer must be replaced (a fatal error: an
        idempotent producer whose records timed out while the source was down can end up there)."""
        for _ in range(BURST):
            try:
                plain.produce(on_delivery=self._delivered, **self._record())
            except BufferError:
                self.figures.errors["plain: queue full"] += 1
                return True
            except KafkaException as exc:
                self.figures.errors[f"plain: {exc.args[0].name()}"] += 1
                return False
            self.figures.produced += 1
        plain.poll(0)
        return True

    def _flush(self, producer: Producer, timeout_s: float) -> int:
        """flush(), which raises once the producer has failed fatally (a transactional one fenced
        or told its state is invalid): counted, and the producer is dropped by the caller."""
        try:
            return producer.flush(timeout_s)
        except KafkaException as exc:
            error = exc.args[0]
        self.figures.errors[f"flush: {error.name()}"] += 1
        return 0

    def _run(self) -> None:
        plain: Producer | None = None
        transactional: Producer | None = None
        try:
            while not self._stopping.is_set():
                started = time.monotonic()
                plain = plain or self._plain()
                if not self._burst(plain):
                    self._flush(plain, 0)
                    plain = None
                if transactional is None:
                    transactional = self._transactional()
                elif not self._transaction(transactional):
                    self._flush(transactional, 0)
                    transactional = None  # the next one fences it
                spare = 2 * BURST / RATE - (time.monotonic() - started)
                if spare > 0:
                    self._stopping.wait(spare)
            if transactional is not None:
                self._flush(transactional, CALL_S)
            if plain is not None and (left := self._flush(plain, 60)):
                self.figures.errors["plain: unsent at the end"] += left
        except BaseException as exc:  # noqa: BLE001 - reported by the schedule, never lost
            self.failure = exc
        finally:
            del plain, transactional
