"""`python -m localkafka --data-dir DIR [--port PORT] [--cluster-id ID] [--brokers 3]`

Formats DIR when it is new, starts the cluster, prints one ready line naming the bootstrap
address once a client can fetch metadata, and runs until SIGTERM or Ctrl-C, which stop every
node cleanly. Started again on the same DIR, it comes back on the same ports with everything
that was acknowledged.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from localkafka.node import LocalKafka, LocalKafkaError
from localkafka.runtime import DEFAULT_HEAP, RuntimeMissing


def parse_override(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--override takes key=value, got {text!r}")
    return key.strip(), value.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localkafka", description=__doc__.split("\n\n")[1])
    parser.add_argument("--data-dir", required=True, help="where the cluster keeps its logs and metadata")
    parser.add_argument(
        "--port", type=int, default=0, help="PLAINTEXT port of the first node (default: a free one)"
    )
    parser.add_argument("--cluster-id", help="Kafka cluster id for a new data dir (default: random)")
    parser.add_argument(
        "--brokers", type=int, default=1, help="nodes (each broker and controller); default 1"
    )
    parser.add_argument(
        "--heap", default=DEFAULT_HEAP, help=f"maximum heap per node (default {DEFAULT_HEAP})"
    )
    parser.add_argument(
        "--line",
        help="Kafka release line to run, e.g. 3.9 (one kafka/pom.xml pins; default: the main line)",
    )
    parser.add_argument(
        "--jmx",
        action="store_true",
        help="open each node's JMX agent on a free 127.0.0.1 port, unauthenticated (the ready line names it)",
    )
    parser.add_argument(
        "--override",
        action="append",
        type=parse_override,
        default=[],
        metavar="KEY=VALUE",
        help="a broker property, applied last (repeatable)",
    )
    args = parser.parse_args(argv)

    # A flag, not a threading.Event: the handler runs in the main thread, possibly where the
    # event's wait holds its lock, and Event.set() would then wait for that lock forever.
    asked: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, _frame: asked.append(signum))
    try:
        kafka = LocalKafka(
            args.data_dir,
            brokers=args.brokers,
            port=args.port,
            cluster_id=args.cluster_id,
            overrides=dict(args.override),
            heap=args.heap,
            jmx=args.jmx,
            line=args.line,
        ).start()
    except (LocalKafkaError, RuntimeMissing) as exc:
        print(f"localkafka: {exc}", file=sys.stderr)
        return 1
    print(
        f"localkafka ready bootstrap={kafka.bootstrap} cluster_id={kafka.cluster_id} "
        f"kafka={kafka.line.version} data_dir={kafka.data_dir}"
        + "".join(f" jmx={node.jmx_url}" for node in kafka.nodes if node.jmx_port is not None),
        flush=True,
    )
    try:
        checked = 0.0
        while not asked:
            time.sleep(0.1)
            if time.monotonic() - checked < 1.0:
                continue
            checked = time.monotonic()
            dead = [n for n in kafka.nodes if not n.running]
            if dead:
                print(f"localkafka: node {dead[0].node_id} exited\n{dead[0].log_tail()}", file=sys.stderr)
                return 1
    finally:
        kafka.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
