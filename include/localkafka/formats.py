"""Formatted data dirs kept and copied: the storage tool runs once per kind of node, not per node.

Kafka's storage tool is a JVM of its own (about a second of CPU here), and a test run starts
well over a hundred nodes. What it writes into a new combined node's data dir depends only on the
Kafka line, the broker settings it reads and the SCRAM users it is given, except three values of
`meta.properties`: the cluster id, the node id and the directory id (random for every dir). So
the first format of each kind is kept under `kafka/format-cache/<key>/`, exactly as the tool wrote
it, and a later node of the same kind gets a copy with those three values set to its own.

`LOCALKAFKA_FORMAT_CACHE=off` runs the tool for every node.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from localkafka import runtime

CACHE_ENV = "LOCALKAFKA_FORMAT_CACHE"
META = "meta.properties"
# Settings that move the files the tool writes: such a node is formatted by the tool itself.
PLACEMENT = ("log.dirs", "log.dir", "metadata.log.dir")


def cache_root() -> Path:
    return runtime.PROJECT_ROOT / "kafka" / "format-cache"


def kind(
    line_version: str, overrides: Mapping[str, object], format_args: Sequence[str], nodes: int
) -> str | None:
    """The key of what the tool would write for such a node, or None when it is not kept."""
    if os.environ.get(CACHE_ENV, "").lower() in ("off", "0", "false", "no"):
        return None
    if any(name in overrides for name in PLACEMENT):
        return None
    described = json.dumps(
        [line_version, sorted((k, str(v)) for k, v in overrides.items()), list(format_args), nodes]
    )
    # A digest: the SCRAM passwords among the arguments never appear in a path.
    return hashlib.sha256(described.encode()).hexdigest()[:24]


def directory_id() -> str:
    """A random directory id in Kafka's text form (16 bytes, URL-safe base64 without padding;
    like Kafka, never one that starts with '-')."""
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _own_meta(template: str, cluster_id: str, node_id: int) -> str | None:
    """`template` with the node's own values, or None if it lacks the cluster or node id. A
    directory id is new for every dir (Kafka before 3.7 writes none)."""
    values = {"cluster.id": cluster_id, "node.id": str(node_id), "directory.id": directory_id()}
    lines, seen = [], set()
    for line in template.splitlines():
        name = line.split("=", 1)[0].strip()
        if not line.startswith("#") and name in values:
            seen.add(name)
            line = f"{name}={values[name]}"
        lines.append(line)
    return "\n".join(lines) + "\n" if {"cluster.id", "node.id"} <= seen else None


def copy_into(key: str | None, data: Path, *, cluster_id: str, node_id: int) -> bool:
    """Fill the new data dir `data` from the kept format of `key`; False when there is none
    (the caller runs the tool, then `keep`s what it wrote)."""
    if key is None:
        return False
    kept = cache_root() / key
    try:
        template = (kept / META).read_text()
    except OSError:
        return False
    meta = _own_meta(template, cluster_id, node_id)
    if meta is None:
        return False
    shutil.copytree(kept, data, dirs_exist_ok=True)
    (data / META).write_text(meta)
    return True


def keep(key: str | None, data: Path) -> None:
    """Keep what the tool just wrote into `data` as the format of `key` (the first writer wins;
    a parallel test worker that formatted the same kind drops its copy)."""
    if key is None or (cache_root() / key).exists():
        return
    cache_root().mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache_root()))
    try:
        shutil.copytree(data, staging, dirs_exist_ok=True)
        with contextlib.suppress(OSError):  # another worker kept it first
            staging.rename(cache_root() / key)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
