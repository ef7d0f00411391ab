"""Airflow asks a task to stop by calling on_kill from the task's SIGTERM handler: the request is
kept when it comes before there is anything to stop, and making it takes no lock the interrupted
main thread may hold."""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import timedelta

import pytest

from mirrorflow.airflow.maintenance import EmitHeartbeatsOperator
from mirrorflow.airflow.task_stop import StopRequest


@pytest.fixture
def sigterm_sets():
    """SIGTERM in this process runs `stop.set()` in the main thread, as on_kill runs."""
    previous = signal.getsignal(signal.SIGTERM)

    def install(stop: StopRequest) -> None:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())

    yield install
    signal.signal(signal.SIGTERM, previous)


def test_a_sigterm_wakes_the_main_thread_waiting_on_it(sigterm_sets) -> None:
    stop = StopRequest()
    sigterm_sets(stop)
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
    begun = time.monotonic()
    assert stop.wait(30) is True
    assert time.monotonic() - begun < 10 and stop.is_set()


def test_a_set_from_a_signal_handler_at_any_point_of_a_wait_never_hangs(sigterm_sets) -> None:
    # SIGTERMs while the main thread waits again and again, each handler setting the request:
    # threading.Event hangs here (the handler's set() runs where wait() holds the event's lock
    # and waits for it forever); this takes no lock.
    stop = StopRequest()
    sigterm_sets(stop)
    fired = threading.Event()

    def fire() -> None:
        for _ in range(300):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.0005)
        fired.set()

    threading.Thread(target=fire, daemon=True).start()
    begun = time.monotonic()
    waits = 0
    while not fired.is_set():
        stop.wait(0)
        waits += 1
        assert time.monotonic() - begun < 60
    assert stop.is_set() and waits > 0


def test_a_wait_without_a_request_times_out() -> None:
    stop = StopRequest()
    assert stop.wait(0.05) is False and not stop.is_set()
    stop.set()
    assert stop.wait(0) is True and stop.is_set()


def test_heartbeats_asked_to_stop_before_their_window_emit_nothing() -> None:
    # The request came before execute: the window does not start (no config read, no cluster).
    op = EmitHeartbeatsOperator(
        task_id="emit",
        config_path="/no/such/config.properties",
        pairs=[("A", "B")],
        intervals=[timedelta(seconds=1)],
        run=timedelta(hours=1),
    )
    op.on_kill()
    begun = time.monotonic()
    assert op.execute({}) == {"window_s": 0.0, "pairs": {}}
    assert time.monotonic() - begun < 5
