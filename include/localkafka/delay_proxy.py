"""The latency proxy's process (`python -m localkafka.delay_proxy DELAY_MS LISTEN=UPSTREAM ...`):
asyncio forwarding on 127.0.0.1, each chunk released `DELAY_MS` after it arrived. See latency.py,
which starts it; it lives apart so that running it does not import the localkafka package first.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections import deque
from collections.abc import Mapping

from localkafka.latency import READY

HOST = "127.0.0.1"
CHUNK = 256 * 1024
MAX_IN_FLIGHT = 32 * 1024 * 1024


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    """One direction: read as it comes, release each chunk `delay_s` after it was read."""
    loop = asyncio.get_running_loop()
    queue: deque[tuple[float, bytes]] = deque()
    queued = 0
    more = asyncio.Event()
    room = asyncio.Event()
    room.set()
    done = False

    async def release() -> None:
        nonlocal queued
        while queue or not done:
            if not queue:
                more.clear()
                await more.wait()
                continue
            due, data = queue[0]
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            queue.popleft()
            queued -= len(data)
            writer.write(data)
            await writer.drain()
            if queued < MAX_IN_FLIGHT:
                room.set()

    sender = asyncio.create_task(release())
    try:
        while True:
            await room.wait()
            data = await reader.read(CHUNK)
            if not data:
                break
            queue.append((loop.time() + delay_s, data))
            queued += len(data)
            if queued >= MAX_IN_FLIGHT:
                room.clear()
            more.set()
    finally:
        done = True
        more.set()
        with contextlib.suppress(ConnectionError, OSError):
            await sender
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


async def _serve(listen_port: int, upstream_port: int, delay_s: float) -> asyncio.Server:
    async def connect(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            broker_reader, broker_writer = await asyncio.open_connection(HOST, upstream_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            _pump(client_reader, broker_writer, delay_s),
            _pump(broker_reader, client_writer, delay_s),
            return_exceptions=True,
        )

    return await asyncio.start_server(connect, HOST, listen_port)


async def _main(delay_ms: float, routes: Mapping[int, int]) -> None:
    servers = [await _serve(listen, upstream, delay_ms / 1000) for listen, upstream in routes.items()]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(READY, flush=True)
    await stop.wait()
    for server in servers:
        server.close()


def main(argv: list[str]) -> int:
    delay_ms = float(argv[0])
    routes = {int(a.split("=")[0]): int(a.split("=")[1]) for a in argv[1:]}
    asyncio.run(_main(delay_ms, routes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
