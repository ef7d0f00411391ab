"""`mirrorflow status` with a cluster that is down (issue 10): about 300 raw librdkafka lines used
to reach the terminal. Its clients log through Python logging with repeats held back, so the
command says once per cluster why it could not read it, and stdout stays the report."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from ..conftest import Cluster
from .mirror_setup import mm2_text

RAW_LINE = re.compile(r"^%\d\|\d+\.\d+\|", re.MULTILINE)


def test_status_with_a_stopped_cluster_says_so_once_without_librdkafka_lines(
    shared_clusters, local_kafka, tmp_path
) -> None:
    a, _, _ = shared_clusters
    stopped = local_kafka()
    stopped.stop()
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_text([a, Cluster("B", stopped.bootstrap)], ["A->B"]))

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from mirrorflow.cli import main; main()",
            "status",
            str(config),
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert not RAW_LINE.search(done.stderr), done.stderr[:2000]
    assert len(done.stderr.splitlines()) <= 6, done.stderr[:2000]
    assert done.stderr.count(f"cluster B at {stopped.bootstrap}") == 1, done.stderr
    body = json.loads(done.stdout)
    [b] = [c for c in body["clusters"] if c["alias"] == "B"]
    assert stopped.bootstrap in b["error"]
    [flow] = body["flows"]
    assert flow["flow"] == "A->B" and "target B unreachable" in flow["error"]
