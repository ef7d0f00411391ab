"""Kafka wire framing on top of kio's message types.

kio generates one dataclass per API version, so the same logical response has a different
class (and sometimes different fields) for every version a client may pick. Handlers
therefore describe responses as plain dicts and `build` turns them into the entity of the
version the client asked for: keys the version lacks are dropped, fields the dict leaves
out take the schema default, and plain ints become the rich kio types (timedeltas, aware
datetimes, error codes) the writers expect.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import struct
import typing
import uuid
from collections.abc import Mapping
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

_MISSING = dataclasses.MISSING
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class MalformedRequest(Exception):
    """The bytes on the connection are not a request this broker can parse."""


@dataclasses.dataclass(frozen=True, slots=True)
class RequestFrame:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header: Any
    body: Any


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """api_key, api_version and correlation_id: the fixed prefix of every request header."""
    if len(frame) < 8:
        raise MalformedRequest(f"request of {len(frame)} bytes is shorter than a request header")
    return struct.unpack_from(">hhi", frame, 0)


@functools.cache
def request_type(api_key: int, api_version: int) -> type:
    return load_request_schema(api_key, api_version)


@functools.cache
def response_type(api_key: int, api_version: int) -> type:
    return load_response_schema(api_key, api_version)


def parse_request(frame: bytes | memoryview) -> RequestFrame:
    """Decode header and body of one request frame (without its 4-byte size prefix)."""
    api_key, api_version, correlation_id = peek_header(frame)
    schema = request_type(api_key, api_version)
    try:
        header, used = entity_reader(schema.__header_schema__)(frame, 0)
        body, body_used = entity_reader(schema)(frame, used)
    except Exception as exc:  # kio raises assorted errors on truncated or corrupt input
        raise MalformedRequest(f"cannot decode api_key={api_key} v{api_version}: {exc}") from exc
    if used + body_used > len(frame):
        raise MalformedRequest("request body runs past the end of its frame")
    return RequestFrame(api_key, api_version, correlation_id, header.client_id, header, body)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """Serialize a response entity with its header, prefixed by the frame size."""
    schema = type(body)
    header_schema = schema.__header_schema__
    # ApiVersions responses always use header v0 so that clients can parse them before they
    # know which versions the broker speaks (KIP-511).
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(struct.pack(">i", correlation_id))
    if header_schema.__flexible__ and api_key != 18:
        out.write(b"\0")  # empty tagged fields of response header v1
    entity_writer(schema)(out, body)
    data = out.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def build_response(api_key: int, api_version: int, data: Mapping[str, Any]) -> Any:
    return build(response_type(api_key, api_version), data)


def build(entity_type: type, data: Mapping[str, Any]) -> Any:
    """Make an instance of a kio entity class from a plain dict (see module docstring)."""
    hints = _hints(entity_type)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(entity_type):
        if f.name in data:
            kwargs[f.name] = _coerce(hints[f.name], f.metadata.get("kafka_type"), data[f.name])
        elif f.default is _MISSING and f.default_factory is _MISSING:
            kwargs[f.name] = _zero(hints[f.name], f.metadata.get("kafka_type"))
    return entity_type(**kwargs)


@functools.cache
def _hints(entity_type: type) -> dict[str, Any]:
    return typing.get_type_hints(entity_type)


def _entity_of(hint: Any) -> type | None:
    """The nested entity class of a field typed `Entity`, `Entity | None` or `tuple[Entity, ...]`."""
    for arg in (hint, *typing.get_args(hint)):
        if isinstance(arg, type) and dataclasses.is_dataclass(arg):
            return arg
    return None


def _is_tuple(hint: Any) -> bool:
    return typing.get_origin(hint) is tuple


def _strip_optional(hint: Any) -> Any:
    args = typing.get_args(hint)
    if type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return hint


def _coerce(hint: Any, kafka_type: str | None, value: Any) -> Any:
    if value is None:
        return None
    hint = _strip_optional(hint)
    nested = _entity_of(hint)
    if _is_tuple(hint):
        if nested is not None:
            return tuple(v if isinstance(v, nested) else build(nested, v) for v in value)
        inner = typing.get_args(hint)[0]
        return tuple(_coerce(inner, kafka_type, v) for v in value)
    if nested is not None:
        return value if isinstance(value, nested) else build(nested, value)
    if kafka_type == "error_code":
        return ErrorCode(int(value))
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        return None if value < 0 else _EPOCH + datetime.timedelta(milliseconds=value)
    if kafka_type == "uuid" and isinstance(value, (bytes, str)):
        return uuid.UUID(bytes=value) if isinstance(value, bytes) else uuid.UUID(value)
    return value


def _zero(hint: Any, kafka_type: str | None) -> Any:
    """Value for a required field the handler did not mention."""
    if _is_tuple(hint):
        return ()
    if type(None) in typing.get_args(hint):
        return None
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kafka_type == "bool":
        return False
    if kafka_type in ("string",):
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    nested = _entity_of(hint)
    if nested is not None:
        return build(nested, {})
    return 0


def millis(value: datetime.timedelta | datetime.datetime | int | None) -> int:
    """Plain milliseconds from the rich kio types found in requests."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int((value - _EPOCH).total_seconds() * 1000)
    return int(value)
