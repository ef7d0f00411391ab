"""window/announced.py: a window whose driver cannot read the flow's recent takeovers does not
start, and says why."""

from __future__ import annotations

import socket

import pytest

from mirrorflow.replicate.window.announced import CountsUnread, announced_counts


def test_an_unreadable_run_records_topic_stops_the_window_naming_the_flow() -> None:
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{unused.getsockname()[1]}"
    config = {"bootstrap.servers": address, "log_level": 0}
    with pytest.raises(CountsUnread) as caught:
        announced_counts(config, config, "A->B", since_ms=0, timeout_s=1)
    message = str(caught.value)
    assert "the takeovers of A->B's windows in mirrorflow-runs.internal could not be read" in message
    assert "this window does not start" in message
