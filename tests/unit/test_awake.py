"""The awake clock stands still while the process is stopped, and only then."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

CHILD = """
import sys, time
from mirrorflow import awake
awake.monotonic()
time.sleep(0.5)
print("ready", flush=True)
sys.stdin.readline()
wall, clock = time.monotonic(), awake.monotonic()
time.sleep(float(sys.argv[1]))  # stopped from outside while it sleeps
print(round(time.monotonic() - wall, 2), round(awake.monotonic() - clock, 2), flush=True)
"""


def _run(stop_s: float) -> tuple[float, float]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "1.0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    child.stdin.write("go\n")
    child.stdin.flush()
    if stop_s:
        time.sleep(0.3)
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(stop_s)
        os.kill(child.pid, signal.SIGCONT)
    out, _ = child.communicate(timeout=30)
    wall, clock = map(float, out.split())
    return wall, clock


def test_the_time_a_process_was_stopped_is_not_awake_time() -> None:
    wall, clock = _run(3.0)
    assert wall >= 3.0
    assert clock < 1.6, f"{clock}s awake over {wall}s, 3s of it stopped"


def test_a_process_never_stopped_is_awake_all_the_time() -> None:
    wall, clock = _run(0.0)
    assert abs(wall - clock) < 0.05, (wall, clock)
