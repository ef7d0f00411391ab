"""The broker's state root: settings, journal, and the subsystems that own the state.

Subsystems are told apart only by the journal protocol they implement: `apply_journal(kind,
fields)` for replay and `snapshot()` for the rewrite after it. Each owns the kinds under its
prefixes (see JOURNAL_OWNERS); entries of an unknown prefix are kept so a newer journal is
not silently truncated by an older broker.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from devbroker import compaction
from devbroker.acls import AclStore
from devbroker.configs import BrokerConfig
from devbroker.groups import GroupCoordinator
from devbroker.journal import Journal
from devbroker.log import now_ms
from devbroker.producers import ProducerIdAllocator
from devbroker.topics import TopicManager
from devbroker.transactions import TransactionCoordinator

log = logging.getLogger(__name__)

JOURNAL_FILE = "devbroker-journal.jsonl"
META_FILE = "meta.properties"


class JournalOwner(Protocol):
    def apply_journal(self, kind: str, fields: dict[str, Any]) -> None: ...

    def snapshot(self) -> Iterable[tuple[str, dict[str, Any]]]: ...


@dataclasses.dataclass
class BrokerSettings:
    """Who this broker is and its config values (static overrides plus dynamic changes)."""

    node_id: int
    host: str
    port: int
    cluster_id: str
    data_dir: Path | None
    values: BrokerConfig

    def get(self, key: str) -> Any:
        """Parsed value of a broker config key (Kafka's default unless overridden)."""
        return self.values.get(key)


def resolve_cluster_id(data_dir: Path | None, requested: str | None) -> str:
    """The cluster id: the one stored in the data dir, else the requested one, else a new one.

    A data dir that belongs to another cluster is refused, as Kafka refuses to start on it."""
    stored = None
    meta = data_dir / META_FILE if data_dir is not None else None
    if meta is not None and meta.exists():
        for line in meta.read_text().splitlines():
            if line.startswith("cluster.id="):
                stored = line.split("=", 1)[1].strip()
    if stored and requested and stored != requested:
        raise ValueError(
            f"data dir {data_dir} belongs to cluster {stored}, not {requested}: pass --cluster-id {stored}"
            " or use another --data-dir"
        )
    return stored or requested or _new_cluster_id()


def _new_cluster_id() -> str:
    """Kafka's format (url-safe base64 of a random UUID), never starting with '-' so that it can
    be passed as a command-line value, as Kafka's Uuid.randomUuid also ensures."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class Broker:
    def __init__(self, config: BrokerSettings) -> None:
        self.config = config
        journal_path = config.data_dir / JOURNAL_FILE if config.data_dir is not None else None
        self.journal = Journal(journal_path)
        self.producer_ids = ProducerIdAllocator(self.journal)
        self.topics = TopicManager(self)
        self.transactions = TransactionCoordinator(self)
        self.groups = GroupCoordinator(self)
        self.acls = AclStore(self)
        self._foreign: list[tuple[str, dict[str, Any]]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._cleaner_wakeup = asyncio.Event()
        self.closed = False

    # -- journal dispatch -----------------------------------------------------------------
    def journal_owners(self) -> dict[str, JournalOwner]:
        return {
            "topic": self.topics,
            "config": self.topics,
            "log": self.topics,
            "producer": self.producer_ids,
            "txn": self.transactions,
            "group": self.groups,
            "offset": self.groups,
            "acl": self.acls,
        }

    def _owner(self, kind: str) -> JournalOwner | None:
        return self.journal_owners().get(kind.split(".", 1)[0])

    def load(self) -> None:
        """Replay the journal, open the logs, rewrite the journal as a snapshot."""
        data_dir = self.config.data_dir
        if data_dir is not None:
            data_dir.mkdir(parents=True, exist_ok=True)
            (data_dir / META_FILE).write_text(
                f"version=1\ncluster.id={self.config.cluster_id}\nnode.id={self.config.node_id}\n"
            )
        count = 0
        for kind, fields in self.journal.replay():
            owner = self._owner(kind)
            if owner is None:
                self._foreign.append((kind, fields))
            else:
                owner.apply_journal(kind, fields)
            count += 1
        self.topics.open_logs()
        self.transactions.open()
        if self.journal.enabled:
            self.journal.rewrite(self._snapshot())
            log.info("replayed %d journal entries from %s", count, self.journal.path)

    def _snapshot(self) -> Iterable[tuple[str, dict[str, Any]]]:
        seen: set[int] = set()
        for owner in self.journal_owners().values():
            if id(owner) in seen:
                continue
            seen.add(id(owner))
            yield from owner.snapshot()
        yield from self._foreign

    # -- cross-subsystem events -----------------------------------------------------------
    def on_topic_deleted(self, name: str) -> None:
        self.transactions.on_topic_deleted(name)
        self.groups.on_topic_deleted(name)

    def wake_cleaner(self) -> None:
        self._cleaner_wakeup.set()

    # -- background work ------------------------------------------------------------------
    def start_background(self) -> None:
        self._tasks = [
            asyncio.create_task(self._every("log.retention.check.interval.ms", self.enforce_retention)),
            asyncio.create_task(self._cleaner_loop()),
            asyncio.create_task(
                self._every("transaction.abort.timed.out.transaction.cleanup.interval.ms", self._expire_txns)
            ),
        ]
        self.groups.start()

    async def _every(self, interval_key: str, job) -> None:
        while True:
            await asyncio.sleep(int(self.config.get(interval_key)) / 1000)
            try:
                job()
            except Exception:
                log.exception("background job %s failed", job.__name__)

    def enforce_retention(self) -> None:
        now = now_ms()
        for topic, partition_log in self.topics.all_logs():
            if topic.deletes and partition_log.enforce_retention(now):
                log.info(
                    "retention: %s-%d now starts at offset %d",
                    topic.name,
                    partition_log.partition,
                    partition_log.log_start_offset,
                )

    def _expire_txns(self) -> None:
        self.transactions.abort_expired()
        self.transactions.expire_idle()

    async def _cleaner_loop(self) -> None:
        while True:
            backoff = int(self.config.get("log.cleaner.backoff.ms")) / 1000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._cleaner_wakeup.wait(), backoff)
            self._cleaner_wakeup.clear()
            if not self.config.get("log.cleaner.enable"):
                continue
            try:
                compaction.clean_eligible(self, now_ms())
            except Exception:
                log.exception("log cleaner failed")

    def compact_now(self, target: str) -> list[str]:
        """Roll and compact the active segments of compacted topics now (`*` for all)."""
        return compaction.compact_now(self, target, now_ms())

    async def close(self) -> None:
        self.closed = True
        self.groups.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for _topic, partition_log in self.topics.all_logs():
            partition_log.flush()
            partition_log.close()
        self.journal.close()
