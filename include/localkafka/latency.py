"""A slow link on loopback: a TCP proxy that holds every byte for a fixed one-way delay.

This kernel has no netem, so a cluster that should look far away gets a listener of its own
(`LocalKafka(..., link_delay_ms=25)` adds the SLOW listener) whose advertised address is this
proxy's port: clients that bootstrap there are told the proxy's address for every broker, so
each request and each answer crosses the delay once (a round trip costs twice the delay), while
the cluster's PLAINTEXT listener stays direct for the test's own set-up.

The proxy runs in a process of its own (localkafka.delay_proxy)
so that its work never competes for the interpreter lock with the copy being measured. Bytes are
forwarded in the order received, each chunk released `delay` after it arrived; the link has no
bandwidth limit and no loss. What a direction holds is bounded (`MAX_IN_FLIGHT`): past it the
proxy stops reading that side until it has forwarded enough, as a full TCP window would.
"""

from __future__ import annotations

import select
import signal
import subprocess
import sys
from collections.abc import Mapping

from localkafka.broker import die_with_parent

READY = "latency proxy ready"


class LatencyProxy:
    """The proxy process for one cluster: `routes` maps each listen port to a broker port."""

    def __init__(self, delay_ms: float, routes: Mapping[int, int]) -> None:
        self.delay_ms = delay_ms
        self.routes = dict(routes)
        self.process: subprocess.Popen[str] | None = None

    def start(self, timeout_s: float = 30.0) -> LatencyProxy:
        args = [f"{listen}={upstream}" for listen, upstream in self.routes.items()]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "localkafka.delay_proxy", str(self.delay_ms), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - only sets the death signal
        )
        assert self.process.stdout is not None
        readable, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        line = self.process.stdout.readline() if readable else f"no answer within {timeout_s:.0f}s"
        if READY not in line:
            self.stop()
            raise RuntimeError(f"the latency proxy did not start: {line}")
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None
