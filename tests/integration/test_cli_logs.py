"""How the `mirrorflow` command logs, on real Kafka: every log line on stderr carries its time,
level and logger, in the command's process and in the worker processes it spawns (which start
with Python's logging unset: their warnings used to come out as bare sentences, that neither a
reader nor a script could tell from the command's own lines), and --log-level sets the level."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from .kafkatools import create_topics, produce_keyed, read_topic
from .mirror_setup import mm2_text

MIRRORFLOW = str(Path(sys.executable).parent / "mirrorflow")
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: ")


def test_a_windows_task_processes_log_at_the_commands_level_with_time_level_and_logger(
    shared_clusters, unique, tmp_path
) -> None:
    a, b = shared_clusters[:2]
    topic = unique("cli-logs")
    create_topics(a.bootstrap, (topic, 2))
    produce_keyed(a.bootstrap, topic, 40, 2, b"v" * 10)
    config = tmp_path / "mm2.properties"
    config.write_text(
        mm2_text(
            [a, b],
            ["A->B"],
            f"A->B.topics = {topic}\ntasks.max = 2\nmirrorflow.replicate.mode = micro-batch\n",
        )
    )

    done = subprocess.run(
        [MIRRORFLOW, "--log-level", "info", "replicate", str(config), "--flow", "A->B", "--window", "10"],
        capture_output=True,
        text=True,
        timeout=240,
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sum(len(records) for records in read_topic(b.bootstrap, f"A.{topic}", 2).values()) == 40
    # Each task process logs its end at INFO: only a task process that logs as the command does
    # prints that line, and prints it with its time, level and logger.
    ended = [line for line in done.stderr.splitlines() if " window task " in line and " ended (" in line]
    assert ended, done.stderr[-3000:]
    assert all(LINE.match(line) and " INFO mirrorflow.window: " in line for line in ended), ended
    levels = {found.group(1) for line in done.stderr.splitlines() if (found := LINE.match(line))}
    assert "DEBUG" not in levels, done.stderr[-3000:]
