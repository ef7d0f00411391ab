"""The TCP side: size-framed Kafka requests in, responses out, one connection at a time in order.

Like Kafka, a connection has one request in processing at a time: the next is read only
after the previous one was answered, so a long-polling fetch delays later requests on the
same connection and responses always come back in request order. Anything the broker cannot
make sense of (bad framing, oversized or truncated frames, unknown API keys or versions,
bodies that do not decode) closes only that connection; the broker itself never stops
because of client input.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
from typing import Any

from kio.schema.errors import ErrorCode

from devbroker import handlers
from devbroker.broker import Broker
from devbroker.registry import HANDLERS, RequestContext
from devbroker.wire import MalformedRequest, build_response, encode_response, parse_request, peek_header

log = logging.getLogger(__name__)

API_VERSIONS = 18


class Server:
    def __init__(self, broker: Broker, host: str, port: int) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count(1)
        handlers.load_all()
        self.max_request = int(broker.config.get("socket.request.max.bytes"))

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(
            self._accept, self.host, self.port, limit=1 << 20, backlog=512
        )
        sock = self._server.sockets[0]
        host, port = sock.getsockname()[:2]
        self.port = port
        return host, port

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            # Shutdown cancels connections; ending normally keeps asyncio's stream callback quiet.
            return
        finally:
            self._connections.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn_id = next(self._ids)
        peer = writer.get_extra_info("peername")
        client_host = peer[0] if peer else ""
        try:
            while True:
                try:
                    size_bytes = await reader.readexactly(4)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                (size,) = struct.unpack(">i", size_bytes)
                if size < 8 or size > self.max_request:
                    log.warning(
                        "connection %d from %s: request size %d is outside [8, socket.request.max.bytes=%d];"
                        " closing it",
                        conn_id,
                        client_host,
                        size,
                        self.max_request,
                    )
                    return
                try:
                    frame = await reader.readexactly(size)
                except (asyncio.IncompleteReadError, ConnectionError):
                    log.info("connection %d from %s closed in the middle of a request", conn_id, client_host)
                    return
                response = await self._handle(frame, conn_id, client_host)
                if response is False:
                    return
                if response is not None:
                    writer.write(response)
                    await writer.drain()
        except ConnectionError:
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("connection %d from %s failed; closing it", conn_id, client_host)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _handle(self, frame: bytes, conn_id: int, client_host: str) -> bytes | None | bool:
        """The encoded response, None for no response (acks=0), False to close the connection."""
        api_key, api_version, correlation_id = peek_header(frame)
        entry = HANDLERS.get(api_key)
        if entry is None:
            log.warning("connection %d: unknown api key %d; closing it", conn_id, api_key)
            return False
        if not entry.min_version <= api_version <= entry.max_version:
            if api_key == API_VERSIONS:
                return unsupported_api_versions(correlation_id, entry.min_version, entry.max_version)
            log.warning(
                "connection %d: api key %d version %d is not supported (%d-%d); closing it",
                conn_id,
                api_key,
                api_version,
                entry.min_version,
                entry.max_version,
            )
            return False
        try:
            request = parse_request(frame)
        except MalformedRequest as exc:
            log.warning("connection %d: %s; closing it", conn_id, exc)
            return False
        ctx = RequestContext(
            broker=self.broker,
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
            client_id=request.client_id,
            client_host=client_host,
            connection_id=conn_id,
        )
        result = await entry.func(ctx, request.body)
        if result is None:
            return None
        body = build_response(api_key, api_version, result) if isinstance(result, dict) else result
        return encode_response(api_key, api_version, correlation_id, body)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()


def unsupported_api_versions(correlation_id: int, min_version: int, max_version: int) -> bytes:
    """Kafka's answer to an ApiVersions version it does not know: v0 layout, UNSUPPORTED_VERSION,
    and ApiVersions' own range so the client can retry with a version both sides speak."""
    body = struct.pack(
        ">ihihhh", correlation_id, ErrorCode.unsupported_version, 1, API_VERSIONS, min_version, max_version
    )
    return struct.pack(">i", len(body)) + body
