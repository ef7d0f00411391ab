"""The ACL check before a run asks each group's coordinator for the principal's operations. A new
cluster creates __consumer_offsets on its first group request and loads it before it answers; a
benchmark on a loaded machine met a bare TimeoutError there. The check waits for the coordinator
within a bound and otherwise fails with one error naming the group and what to check."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from mirrorflow.kafka import KafkaCallError
from mirrorflow.ops import acl_check


def test_a_coordinator_that_never_answers_is_named_not_a_timeout(local_kafka, monkeypatch) -> None:
    # One broker cannot hold an offsets topic of replication factor 3: no coordinator ever loads.
    kafka = local_kafka(overrides={"offsets.topic.replication.factor": "3"})
    monkeypatch.setattr(acl_check, "COORDINATOR_WAIT_S", 4.0)
    probe = acl_check._Probe(AdminClient({"bootstrap.servers": kafka.bootstrap}), 2.0)
    with pytest.raises(
        KafkaCallError, match="group 'mirrorflow-copy'.*group coordinator gave no answer within 4 s"
    ):
        probe._describe_groups(["mirrorflow-copy"])
