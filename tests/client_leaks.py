"""librdkafka clients a test leaves running.

A client left alive keeps its threads and connections, and goes on refreshing metadata: a
leaked producer or admin client (librdkafka lets those auto-create topics by default) recreated
a topic a later test deleted, with the broker's defaults, on the clusters a worker's tests
share, and the later test failed for a reason far from its own. Leaks came from the product
(confluent-kafka 2.16 keeps, for good, an exception being handled whenever one of its calls
raises meanwhile, and with it every frame and client that exception's traceback reaches) as
well as from tests; each test is held to leave none.
"""

from __future__ import annotations

import contextlib
import gc
import time
from pathlib import Path

# A client being destroyed by another thread still runs its threads for a moment.
SETTLE_S = 5.0


def running_clients() -> int:
    """librdkafka clients whose threads run in this process: each has one `rdk:main` thread."""
    count = 0
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            count += task.joinpath("comm").read_text().startswith("rdk:main")
    return count


def live_clients() -> int:
    """running_clients() after a garbage collection (what is only unreachable is not a leak)."""
    gc.collect()
    return running_clients()


def leaked_since(before: int) -> str | None:
    """None when no more clients run than `before` (waiting up to SETTLE_S for destroyed ones to
    stop); else what is left, with what holds each client object."""
    if running_clients() <= before:
        return None
    deadline = time.monotonic() + SETTLE_S
    while live_clients() > before:
        if time.monotonic() > deadline:
            return _describe(running_clients() - before)
        time.sleep(0.1)
    return None


def _describe(extra: int) -> str:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

    held = []
    for obj in gc.get_objects():
        if isinstance(obj, (Producer, Consumer, AdminClient)):
            holders = sorted({type(r).__name__ for r in gc.get_referrers(obj) if not isinstance(r, list)})
            held.append(f"{type(obj).__name__} held by {', '.join(holders) or 'nothing the collector sees'}")
    return f"{extra} librdkafka client(s) left running: " + ("; ".join(held) or "no client object is left")
