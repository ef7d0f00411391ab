"""The ACL pre-check meets a cluster that answered the run's first metadata request and then not
its DescribeTopics (issue 36): a run of the three-broker micro-batch fault schedule ended in a bare
`TimeoutError` traceback while a target broker restarted. Now the check ends in one sentence
naming the cluster, its role and what to check, as an unreachable cluster does everywhere else."""

from __future__ import annotations

import os
import signal

import pytest

from mirrorflow.config import load_config
from mirrorflow.kafka import ClusterUnreachable, admin_client
from mirrorflow.ops.acl_check import check_job_acls

from ..conftest import Cluster
from .kafkatools import create_topics
from .mirror_setup import mm2_text

pytestmark = pytest.mark.local_kafka


def test_a_cluster_that_stops_answering_the_acl_check_is_named_in_one_sentence(local_kafka) -> None:
    a, b = local_kafka(), local_kafka()
    src, dst = Cluster("A", a.bootstrap, a), Cluster("B", b.bootstrap, b)
    create_topics(src.bootstrap, ("orders", 1))
    flow = load_config(mm2_text([src, dst], ["A->B"])).flow("A", "B")
    config = {"bootstrap.servers": dst.bootstrap}
    admin = admin_client(config)
    admin.list_topics(timeout=10)  # connected: the cluster answered once
    node = b.nodes[0].process
    os.kill(node.pid, signal.SIGSTOP)
    try:
        with pytest.raises(ClusterUnreachable) as raised:
            check_job_acls(
                flow, "replicate", {"target": admin}, {"target": config}, topics=["orders"], timeout_s=3
            )
    finally:
        os.kill(node.pid, signal.SIGCONT)
    said = str(raised.value)
    assert f"cluster B (target of A->B) at {dst.bootstrap} did not answer the ACL check" in said, said
    assert "check that its brokers are up" in said
