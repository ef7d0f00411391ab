"""Where a handover's lag falls, from the files `lag.py --timeline DIR` keeps.

`lag.py --timeline DIR --only 'micro-batch (Spark),handovers'` keeps, for each row, the lag of
its records second by second (by when the source appended them) and the replicator's logs; for
the handovers row also when each window was submitted. This script reads them and prints:

- the steady row (a window that runs throughout; from --settled seconds on, past a catch-up
  from the brokers' first-index stall): the median of its per-second p99 and its largest lag;
- for each window of the handovers row after the first: its start-up (from its spark-submit to
  the first slot the window before it handed over, read from that window's log) and the
  --after seconds from that takeover: the median per-second p99 and the largest lag of each, and
  whether the window before ended by its clock (`window over`) before the takeover, leaving the
  flow uncopied in between.

Run: `.venv/bin/python benchmarks/handover_timeline.py DIR` (--settled 60 --after 15).
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

LINE_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


@dataclass
class Second:
    p99_s: float
    max_s: float


def read_csv(path: Path) -> tuple[int, dict[int, Second]]:
    """Epoch ms of second 0, and each second's figures."""
    lines = path.read_text().splitlines()
    zero = int(lines[0].rsplit(":", 1)[1])
    rows = csv.DictReader(lines[1:])
    return zero, {int(r["second"]): Second(float(r["p99_s"]), float(r["max_s"])) for r in rows}


def span(seconds: dict[int, Second], start: float, end: float) -> tuple[float, float]:
    """Median per-second p99 and largest lag over [start, end)."""
    inside = [s for k, s in seconds.items() if start <= k < end]
    if not inside:
        return float("nan"), float("nan")
    return statistics.median(s.p99_s for s in inside), max(s.max_s for s in inside)


def first_line(log: Path, needle: str) -> int | None:
    """Epoch ms of the first line of `log` that holds `needle` (mirrorflow's lines are in UTC)."""
    for line in log.read_text(errors="replace").splitlines():
        found = LINE_TIME.match(line)
        if found and needle in line:
            moment = datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
            return int(moment.timestamp() * 1000)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline", type=Path)
    parser.add_argument(
        "--settled", type=float, default=60.0, help="steady row: seconds left out at the start"
    )
    parser.add_argument(
        "--after", type=float, default=15.0, help="seconds after a takeover counted as its spike"
    )
    args = parser.parse_args()
    for path in sorted(args.timeline.glob("*.csv")):
        label = path.stem
        zero, seconds = read_csv(path)
        submitted = sorted(args.timeline.glob(f"{label}-*-windows.tsv"))
        if not submitted:
            median, largest = span(seconds, args.settled, max(seconds) + 1)
            print(f"{label}: steady from {args.settled:g}s: median p99 {median:.2f}s, largest {largest:.2f}s")
            continue
        print(f"{label}: handovers")
        windows = [line.split("\t") for line in submitted[0].read_text().splitlines()]
        for (_, _, before_log), (index, at_ms, _) in zip(windows, windows[1:], strict=False):
            start = (int(at_ms) - zero) / 1000
            log = args.timeline / f"{label}-{before_log}"
            taken_ms = first_line(log, "handed writer slot")
            gave_up_ms = first_line(log, "ended (window over)")
            if taken_ms is None and gave_up_ms is not None and (gave_up_ms - zero) / 1000 <= max(seconds):
                gave_up = (gave_up_ms - zero) / 1000
                gap_p99, gap_max = span(seconds, gave_up, gave_up + args.after)
                print(
                    f"  window {index}: submitted at {start:.0f}s; the window before ended by its clock at "
                    f"{gave_up:.0f}s and handed nothing over; the {args.after:g}s after: median p99 "
                    f"{gap_p99:.2f}s, largest {gap_max:.2f}s"
                )
                continue
            if taken_ms is None or (taken_ms - zero) / 1000 > max(seconds):
                print(f"  window {index}: submitted at {start:.0f}s, no takeover within the measured span")
                continue
            taken = (taken_ms - zero) / 1000
            up_p99, up_max = span(seconds, start, taken)
            spike_p99, spike_max = span(seconds, taken, taken + args.after)
            gap = ""
            if gave_up_ms is not None and gave_up_ms < taken_ms:
                gap = f"; the window before ended by its clock {(taken_ms - gave_up_ms) / 1000:.1f}s before"
            print(
                f"  window {index}: submitted at {start:.0f}s, took over at {taken:.0f}s ({taken - start:.0f}s "
                f"later); start-up: median p99 {up_p99:.2f}s, largest {up_max:.2f}s; the {args.after:g}s after "
                f"the takeover: median p99 {spike_p99:.2f}s, largest {spike_max:.2f}s{gap}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
