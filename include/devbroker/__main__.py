"""`python -m devbroker`: run one single-node Kafka-compatible broker until SIGTERM/SIGINT.

stdout carries exactly one line, printed once the listener accepts connections:
`devbroker ready bootstrap=HOST:PORT cluster_id=ID`; everything else goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from devbroker.configs import BROKER_CONFIGS, BrokerConfig, InvalidConfig

log = logging.getLogger("devbroker")

EXIT_USAGE = 2


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m devbroker",
        description="Single-node Kafka-wire-compatible development broker (never for production).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on; 0 picks a free one (default)")
    parser.add_argument("--data-dir", type=Path, help="keep data here across restarts (default: memory only)")
    parser.add_argument("--cluster-id", help="cluster id (default: the data dir's, else a new random one)")
    parser.add_argument("--node-id", type=int, default=1, help="broker/node id (default 1)")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="broker config, repeatable (e.g. num.partitions=3, auto.create.topics.enable=true)",
    )
    parser.add_argument("--list-configs", action="store_true", help="print the broker config keys and exit")
    parser.add_argument("--log-level", default="INFO", help="stderr log level (default INFO)")
    return parser.parse_args(argv)


def parse_overrides(items: list[str]) -> dict[str, str]:
    overrides: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidConfig(f"--override {item!r} is not KEY=VALUE (e.g. --override num.partitions=3)")
        overrides[key.strip()] = value.strip()
    return overrides


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list_configs:
        for name, definition in sorted(BROKER_CONFIGS.items()):
            sys.stdout.write(f"{name}={definition.default if definition.default is not None else ''}\n")
        return 0
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        values = BrokerConfig(args.node_id, parse_overrides(args.override))
    except InvalidConfig as exc:
        sys.stderr.write(f"devbroker: {exc}\n")
        return EXIT_USAGE
    try:
        from devbroker.broker import resolve_cluster_id

        cluster_id = resolve_cluster_id(args.data_dir, args.cluster_id)
    except ValueError as exc:
        sys.stderr.write(f"devbroker: {exc}\n")
        return EXIT_USAGE
    try:
        import uvloop
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    return runner(_run(args, values, cluster_id))


async def _run(args: argparse.Namespace, values: BrokerConfig, cluster_id: str) -> int:
    from devbroker.broker import Broker, BrokerSettings
    from devbroker.server import Server

    settings = BrokerSettings(args.node_id, args.host, args.port, cluster_id, args.data_dir, values)
    broker = Broker(settings)
    try:
        broker.load()
    except OSError as exc:
        sys.stderr.write(f"devbroker: cannot use --data-dir {args.data_dir}: {exc}\n")
        return EXIT_USAGE
    server = Server(broker, args.host, args.port)
    try:
        host, port = await server.start()
    except OSError as exc:
        sys.stderr.write(f"devbroker: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}\n")
        await broker.close()
        return 1
    settings.port = port
    broker.start_background()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sys.stdout.write(f"devbroker ready bootstrap={args.host}:{port} cluster_id={cluster_id}\n")
    sys.stdout.flush()
    log.info(
        "listening on %s:%d (node %d, cluster %s, data dir %s)",
        host,
        port,
        args.node_id,
        cluster_id,
        args.data_dir,
    )
    await stop.wait()
    log.info("shutting down")
    await server.close()
    await broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
