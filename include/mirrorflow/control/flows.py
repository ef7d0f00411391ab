"""Which flow a control job runs for, and whether MM2 would run that job at all.

The checkpoint and group-sync jobs exist in MM2 only for enabled flows whose settings turn them
on; run by hand (CLI) for a flow where MM2 would not run them, they refuse with the setting to
change instead of doing something MM2 never does.
"""

from __future__ import annotations

from mirrorflow.config import ConfigError, FlowConfig, MirrorConfig, load_config


class JobDisabled(RuntimeError):
    """The config turns this job off for the flow; the message names the key to change."""


def load(config: MirrorConfig | str) -> MirrorConfig:
    return load_config(config) if isinstance(config, str) else config


def replication_flow(config: MirrorConfig, source: str, target: str) -> FlowConfig:
    flow = config.flow(source, target)
    if not config.replication_enabled(source, target):
        raise JobDisabled(
            f"the flow {source}->{target} does not replicate in {config.source}: set "
            f"`{source}->{target}.enabled = true` to copy {source} to {target} and checkpoint its groups"
        )
    return flow


def reverse_flow(config: MirrorConfig, flow: FlowConfig) -> FlowConfig | None:
    """The flow back from the target, whose copies on the source translate backward (failback).

    Its records carry provenance whether or not it is enabled now, so it is used whenever the
    pair resolves; a pair with config errors is left out.
    """
    try:
        return config.flow(flow.target, flow.source)
    except ConfigError:
        return None


def checkpoints_enabled(flow: FlowConfig) -> bool:
    """MM2 runs checkpoint tasks when emit.checkpoints is on and offset-syncs exist to translate with."""
    return flow.emit_checkpoints_interval is not None and flow.emit_offset_syncs_enabled


def require_checkpoints(flow: FlowConfig) -> None:
    if flow.emit_checkpoints_interval is None:
        raise JobDisabled(
            f"checkpoints are off for {flow.name} (emit.checkpoints.enabled=false or a negative "
            f"emit.checkpoints.interval.seconds): set `{flow.name}.emit.checkpoints.enabled = true`"
        )
    if not flow.emit_offset_syncs_enabled:
        raise JobDisabled(
            f"{flow.name} writes no offset-syncs (emit.offset-syncs.enabled=false), and MM2 emits no "
            f"checkpoints without them: set `{flow.name}.emit.offset-syncs.enabled = true`"
        )


def group_sync_enabled(flow: FlowConfig) -> bool:
    """MM2 syncs group offsets from its checkpoint task, so it needs checkpoints too."""
    return flow.sync_group_offsets_interval is not None and checkpoints_enabled(flow)


def require_group_sync(flow: FlowConfig) -> None:
    if flow.sync_group_offsets_interval is None:
        raise JobDisabled(
            f"group offset sync is off for {flow.name} (sync.group.offsets.enabled is false by default in "
            f"MM2): set `{flow.name}.sync.group.offsets.enabled = true`"
        )
    require_checkpoints(flow)
