"""MM2's periodic control-plane jobs beside the data copy: heartbeats, topic/partition/config/ACL
sync, checkpoints and group offsets, plus the MirrorClient view of what the heartbeats prove.

Each job is one plain function that an Airflow task, the `mirrorflow` CLI and the tests call.
"""
