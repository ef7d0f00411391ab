"""Topics: names, ids, partitions, config overrides, and the partition logs behind them.

Every change is journaled (`topic.*`, `config.*`, `log.*`) before the request that made it is
answered; at start the journal is replayed into plain state first and the logs are opened
afterwards, so a topic deleted and recreated under the same name never sees old data.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from devbroker.configs import (
    BrokerConfig,
    InvalidConfig,
    TopicConfigView,
    validate_topic_configs,
)
from devbroker.log import PartitionLog

if TYPE_CHECKING:
    from devbroker.broker import Broker

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


class TopicError(Exception):
    """A request-level failure with the Kafka error code and message to return."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_name(name: str) -> None:
    if not name:
        raise TopicError(ErrorCode.invalid_topic_exception, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.invalid_topic_exception, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(
            ErrorCode.invalid_topic_exception,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}",
        )
    if not _LEGAL.match(name):
        raise TopicError(
            ErrorCode.invalid_topic_exception,
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_'"
            " and '-'",
        )


def collision_key(name: str) -> str:
    """Kafka forbids topics whose names differ only in '.' vs '_' (metric names would clash)."""
    return name.replace(".", "_")


@dataclasses.dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partition_count: int
    configs: dict[str, str]
    view: TopicConfigView
    logs: list[PartitionLog] = dataclasses.field(default_factory=list)

    @property
    def compacted(self) -> bool:
        return "compact" in self.view["cleanup.policy"]

    @property
    def deletes(self) -> bool:
        return "delete" in self.view["cleanup.policy"]


class TopicManager:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self._start_offsets: dict[tuple[str, int], int] = {}
        self._opened = False

    @property
    def broker_config(self) -> BrokerConfig:
        return self.broker.config.values

    # -- lookups used by other subsystems -------------------------------------------------
    def partition_count(self, name: str) -> int | None:
        topic = self.topics.get(name)
        return None if topic is None else topic.partition_count

    def topic_id(self, name: str) -> uuid.UUID | None:
        topic = self.topics.get(name)
        return None if topic is None else topic.topic_id

    def get_log(self, name: str, partition: int) -> PartitionLog | None:
        topic = self.topics.get(name)
        if topic is None or not 0 <= partition < topic.partition_count:
            return None
        return topic.logs[partition]

    def all_logs(self) -> Iterable[tuple[Topic, PartitionLog]]:
        for topic in list(self.topics.values()):
            for partition_log in topic.logs:
                yield topic, partition_log

    # -- journal --------------------------------------------------------------------------
    def apply_journal(self, kind: str, fields: dict[str, Any]) -> None:
        if kind == "topic.create":
            topic = self._make(
                fields["name"], uuid.UUID(fields["id"]), int(fields["partitions"]), fields["configs"]
            )
            self._register(topic)
        elif kind == "topic.delete":
            topic = self.topics.pop(fields["name"], None)
            if topic is not None:
                self.by_id.pop(topic.topic_id, None)
                self._start_offsets = {k: v for k, v in self._start_offsets.items() if k[0] != topic.name}
        elif kind == "topic.partitions":
            self.topics[fields["name"]].partition_count = int(fields["count"])
        elif kind == "config.topic":
            topic = self.topics[fields["name"]]
            topic.configs = dict(fields["configs"])
            topic.view = TopicConfigView(topic.configs, self.broker_config)
        elif kind == "config.broker":
            layer = self._broker_layer(fields["scope"])
            layer.clear()
            layer.update(fields["configs"])
        elif kind == "log.start":
            self._start_offsets[(fields["topic"], int(fields["partition"]))] = int(fields["offset"])
        else:
            log.warning("ignoring unknown journal entry kind %s", kind)

    def snapshot(self) -> Iterable[tuple[str, dict[str, Any]]]:
        for scope in ("default", "node"):
            layer = self._broker_layer(scope)
            if layer:
                yield "config.broker", {"scope": scope, "configs": dict(layer)}
        for topic in self.topics.values():
            yield (
                "topic.create",
                {
                    "name": topic.name,
                    "id": str(topic.topic_id),
                    "partitions": topic.partition_count,
                    "configs": topic.configs,
                },
            )
            for partition_log in topic.logs:
                if partition_log.log_start_offset > 0:
                    yield (
                        "log.start",
                        {
                            "topic": topic.name,
                            "partition": partition_log.partition,
                            "offset": partition_log.log_start_offset,
                        },
                    )

    def _broker_layer(self, scope: str) -> dict[str, str]:
        values = self.broker_config
        return values.dynamic_node if scope == "node" else values.dynamic_default

    def open_logs(self) -> None:
        """After replay: open (and recover) every partition log."""
        self._opened = True
        data_dir = self._data_root()
        if data_dir is not None:
            self._remove_orphans(data_dir)
        for topic in self.topics.values():
            self._open_partitions(topic)

    def _remove_orphans(self, data_dir: Path) -> None:
        """Partition dirs of topics the journal no longer has (deleted before a crash)."""
        wanted = {f"{t.name}-{p}" for t in self.topics.values() for p in range(t.partition_count)}
        for child in data_dir.iterdir():
            if not child.is_dir() or child.name in wanted or not re.match(r"^.+-\d+$", child.name):
                continue
            # Only directories holding nothing but segment files are ours to remove.
            if all(f.is_file() and f.suffix in (".log", ".cleaned") for f in child.iterdir()):
                log.info("removing data of deleted partition %s", child.name)
                shutil.rmtree(child, ignore_errors=True)

    def _data_root(self) -> Path | None:
        return self.broker.config.data_dir

    def _open_partitions(self, topic: Topic) -> None:
        root = self._data_root()
        while len(topic.logs) < topic.partition_count:
            p = len(topic.logs)
            directory = None if root is None else root / f"{topic.name}-{p}"
            partition_log = PartitionLog(topic.name, p, directory, topic.view.__getitem__)
            start = self._start_offsets.get((topic.name, p))
            if start is not None and start > partition_log.log_start_offset:
                partition_log.advance_start(min(start, partition_log.next_offset))
            partition_log.dirty_from = partition_log.log_start_offset
            topic.logs.append(partition_log)

    def _make(self, name: str, topic_id: uuid.UUID, partitions: int, configs: Mapping[str, str]) -> Topic:
        overrides = dict(configs)
        return Topic(name, topic_id, partitions, overrides, TopicConfigView(overrides, self.broker_config))

    def _register(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic

    # -- admin operations -----------------------------------------------------------------
    def check_create(
        self, name: str, partitions: int, replication: int, configs: Mapping[str, str | None]
    ) -> tuple[int, int, dict[str, str]]:
        """Validate a topic creation as Kafka's controller does; returns the resolved values."""
        validate_name(name)
        if name in self.topics:
            raise TopicError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        key = collision_key(name)
        for other in self.topics:
            if collision_key(other) == key:
                raise TopicError(
                    ErrorCode.invalid_topic_exception,
                    f"Topic '{name}' collides with existing topic: {other}",
                )
        if partitions == -1:
            partitions = int(self.broker_config.get("num.partitions"))
        if partitions <= 0:
            raise TopicError(
                ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value."
            )
        if replication == -1:
            replication = int(self.broker_config.get("default.replication.factor"))
        if replication <= 0:
            raise TopicError(
                ErrorCode.invalid_replication_factor,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if replication > 1:
            raise TopicError(
                ErrorCode.invalid_replication_factor,
                f"Unable to replicate the partition {replication} time(s): The target replication factor of"
                f" {replication} cannot be reached because only 1 broker(s) are registered.",
            )
        try:
            resolved = validate_topic_configs(configs)
        except InvalidConfig as exc:
            raise TopicError(ErrorCode.invalid_config, str(exc)) from None
        return partitions, replication, resolved

    def create(self, name: str, partitions: int, configs: Mapping[str, str]) -> Topic:
        topic = self._make(name, uuid.uuid4(), partitions, configs)
        self.broker.journal.append(
            "topic.create", name=name, id=str(topic.topic_id), partitions=partitions, configs=dict(configs)
        )
        self._register(topic)
        if self._opened:
            self._open_partitions(topic)
        log.info("created topic %s with %d partition(s)", name, partitions)
        return topic

    def delete(self, name: str) -> None:
        topic = self.topics.pop(name)
        self.by_id.pop(topic.topic_id, None)
        self.broker.journal.append("topic.delete", name=name)
        for partition_log in topic.logs:
            partition_log.delete()
        self.broker.on_topic_deleted(name)
        log.info("deleted topic %s", name)

    def add_partitions(self, topic: Topic, count: int) -> None:
        self.broker.journal.append("topic.partitions", name=topic.name, count=count)
        topic.partition_count = count
        self._open_partitions(topic)

    def set_configs(self, topic: Topic, configs: Mapping[str, str]) -> None:
        self.broker.journal.append("config.topic", name=topic.name, configs=dict(configs))
        topic.configs = dict(configs)
        topic.view = TopicConfigView(topic.configs, self.broker_config)
        for partition_log in topic.logs:
            partition_log.settings = topic.view.__getitem__
        self.broker.wake_cleaner()

    def set_broker_configs(self, scope: str, configs: Mapping[str, str]) -> None:
        self.broker.journal.append("config.broker", scope=scope, configs=dict(configs))
        layer = self._broker_layer(scope)
        layer.clear()
        layer.update(configs)
        for topic in self.topics.values():
            topic.view.invalidate()
        self.broker.wake_cleaner()

    def record_log_start(self, topic: str, partition: int, offset: int) -> None:
        self.broker.journal.append("log.start", topic=topic, partition=partition, offset=offset)
