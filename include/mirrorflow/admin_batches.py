"""Admin requests cut to what Kafka's controller applies in one go.

A KRaft controller turns one request's changes into one batch of metadata records and refuses a
batch of more than 10,000 of them: every item of the request then fails with POLICY_VIOLATION
("Unable to perform excessively large batch operation"), and a flow that sends the same request
on every run never gets past it (MirrorMaker 2 does exactly that with its remote topics,
KAFKA-19327). What makes records:

- CreateTopics: a record for each topic, each of its partitions and each config it is created
  with (2,600 one-partition topics with two configs each are 10,400 records in 2,600 partitions);
  a request may also create at most 10,000 partitions;
- CreatePartitions: a record for each new partition;
- IncrementalAlterConfigs: a record for each config that changes (at most one an operation);
- CreateAcls: a record for each new ACL.

Requests stay at half the bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

RECORDS_PER_REQUEST = 5_000

T = TypeVar("T")


def request_batches(
    items: Iterable[T], records: Callable[[T], int], *, limit: int | None = None
) -> Iterator[list[T]]:
    """`items` in order, cut into requests that make at most `limit` (RECORDS_PER_REQUEST)
    metadata records each, `records(item)` being an item's; a single item above it goes alone."""
    bound = RECORDS_PER_REQUEST if limit is None else limit
    batch: list[T] = []
    count = 0
    for item in items:
        size = records(item)
        if batch and count + size > bound:
            yield batch
            batch, count = [], 0
        batch.append(item)
        count += size
    if batch:
        yield batch


def new_topic_records(topic) -> int:
    """The metadata records of creating a NewTopic: the topic, its partitions, its configs."""
    return 1 + max(1, topic.num_partitions) + len(topic.config or {})
