"""Exact consumer-offset translation: group offsets on a flow's source become offsets on its target.

MM2 cannot know a target offset between its sparse offset-syncs and claims "one past the sync"
(its +1 rule), so a failed-over group re-reads up to offset.lag.max records per partition, and
far more when it lags. mirrorflow knows more:
- dense offset-syncs (replicate/offset_syncs.py) bracket every run of records contiguous on both
  clusters, so inside a run `down = run.down + (u - run.up)` and between runs nothing was copied;
- provenance headers on every copied record name its source offset, and a flow's records are
  sorted by source offset in each target partition, so reading one record ("a probe") tells on
  which side of `u` a target offset lies.

That order is checked, not assumed. An at-least-once re-copy (a run died after writing records
but before recording progress), or a source topic recreated without a floor, leaves the same
source offsets twice in a target partition. The sync index notes a re-copy (an upstream offset
going back while the downstream one goes on) and every record a probe reads is compared with its
neighbours; where the order breaks, the binary search is not trusted and the partition is read
once instead (Status.SCANNED).

Offset-syncs, like progress, belong to one incarnation of the source topic and one of the remote
topic (Kafka's topic IDs): a pass uses only the syncs of the topics as they are now, and a
partition whose remote (or source) topic was recreated since it was last copied is not
translated until a copy has written into the new topic.

One module per decision:
- rule.py: where a group resumes, given a partition's syncs, bounds and probes (pure);
- sync_index.py: every offset-sync of a flow, per partition and incarnation, read once per pass;
- incarnations.py: which of a partition's syncs describe the topics as they are now;
- coverage.py and probe.py: whose records count, and reading the target for them, cached;
- bounds.py: where partitions start and end, and how many records a group has left;
- routes.py: which way a topic translates (forward, or back for failback) and its name there;
- partition_pass.py: what one pass answers for each partition (the rule it applies, or why not);
- group_pass.py: which groups a pass translates, and their rows.
"""
