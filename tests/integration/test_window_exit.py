"""How a micro-batch window's Spark job ends (issue 36): in the fault schedules, windows ended on
errors an operator cannot act on (`ListOffsets for payments-0 failed: … No leaders found` while
the source's node was frozen, a raw `_TRANSPORT: Failed to get metadata`), because only a task
that marked a cluster unreachable led to the plan's sentence. A window that ends on any error
while a cluster does not answer now says that sentence and exits with the lost-cluster code; one
whose clusters answer says its error as it was."""

from __future__ import annotations

import logging

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.replicate.report import RunReport
from mirrorflow.replicate.window.driver import WindowResult
from mirrorflow.spark.outcome import LOST_EXIT, LOST_MARK
from mirrorflow.spark.window_job import window_exit

from .mirror_setup import mm2_config

ERROR = "ListOffsets for payments-0 failed: No leaders found"  # as a window ended in the fault schedule


def _ended(error: str) -> WindowResult:
    return WindowResult(RunReport("w1", "A->B", "replicate", "exactly-once", 0, 1), error=error)


def test_a_window_that_ended_on_an_error_while_its_source_is_down_says_which_cluster(
    kafka_clusters, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = kafka_clusters(2)
    flow = mm2_config([a, b], ["A->B"]).flow("A", "B")
    clients = FlowClients.resolve(flow)

    with caplog.at_level(logging.ERROR, logger="mirrorflow.spark.window"):
        assert window_exit(flow, clients, _ended(ERROR)) == 1
    assert caplog.messages == [ERROR]  # both clusters answer: the error as it was, retried by Airflow

    caplog.clear()
    a.kafka.stop()
    with caplog.at_level(logging.ERROR, logger="mirrorflow.spark.window"):
        assert window_exit(flow, clients, _ended(ERROR)) == LOST_EXIT
    (line,) = caplog.messages
    assert line.startswith(LOST_MARK) and f"cluster A (source of A->B) at {a.bootstrap}" in line, line
    assert f"(the window ended on: {ERROR})" in line
