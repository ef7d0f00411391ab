"""Read a flow's offset-syncs topic once per pass into a SyncIndex.

The topic (`flow.offset_syncs_topic` on `flow.offset_syncs_cluster`, partition 0 only, as MM2
writes it) is compacted by key = upstream topic + partition, so old syncs may be gone; the
translation falls back to provenance headers where they are. Records that do not decode as
OffsetSync are skipped, as MM2's OffsetSyncStore skips them. A sync's run header (written by
mirrorflow's copy, see replicate/offset_syncs.py) is kept with it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.control.reading import read_from_start
from mirrorflow.control.translate import SyncIndex
from mirrorflow.mm2.formats import Mm2FormatError, OffsetSync
from mirrorflow.replicate.offset_syncs import run_of

log = logging.getLogger(__name__)


def read_sync_index(consumer_config: Mapping[str, Any], topic: str) -> SyncIndex:
    """Every decodable sync in `topic` partition 0, up to its last stable offset now."""
    index = SyncIndex()
    skipped = 0
    for message in read_from_start(consumer_config, topic):
        try:
            index.add(OffsetSync.decode(message.key(), message.value()), run_of(message.headers()))
        except Mm2FormatError:
            skipped += 1
    if skipped:
        log.warning("skipped %d records of %s that are not offset-syncs", skipped, topic)
    return index


def flow_sync_index(flow: FlowConfig, clients: FlowClients) -> SyncIndex:
    """The flow's syncs, read where `offset-syncs.topic.location` puts them."""
    side = "source" if flow.offset_syncs_cluster == flow.source else "target"
    return read_sync_index(clients.consumer(side), flow.offset_syncs_topic)
