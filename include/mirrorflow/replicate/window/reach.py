"""How a task notices that its target is gone when it has nothing to copy.

A busy task learns it from its copies (the copy engine's watches). A task whose partitions are
idle, or that holds no partition at all (a flow of a few partitions over tasks.max tasks), writes
nothing to the target but its status every few seconds, and would go on for the whole window
after the target died, holding up the window's end and the next window. Its own clients of the
target (the runs-topic tail and the status writer) report broken connections to a ClusterWatch;
only then does the task ask the target once, briefly, whether it answers, so a healthy window
costs no request, and a target that does not answer for mirrorflow.cluster.unreachable.timeout.ms
fails the task with the same error a copy would give.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException

from mirrorflow.kafka import ClusterWatch
from mirrorflow.replicate.copy import CopyJob

PROBE_S = 1.0
"""The longest one look at a suspect target waits: the batch loop goes on after it."""


class TargetReach:
    def __init__(self, job: CopyJob) -> None:
        self.watch = ClusterWatch(
            job.target, str(job.target_producer.get("bootstrap.servers", "")), job.unreachable_timeout_s
        )

    def config(self, client_config: Mapping[str, Any]) -> dict[str, Any]:
        """A client config of the target that reports its broken connections here."""
        return self.watch.config(client_config)

    def check(self, probe: Callable[[float], object]) -> None:
        """Raise ClusterUnreachable once the target has not answered for its limit; `probe`
        (a metadata request) is asked only while a client of the task has seen it go away."""
        if self.watch.down_since is None:
            return
        try:
            probe(PROBE_S)
        except KafkaException:
            self.watch.check()
            return
        self.watch.alive()
