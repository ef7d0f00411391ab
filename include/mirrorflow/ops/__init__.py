"""Operator actions built on replication and its control jobs, such as moving consumer groups
between clusters (failover and failback)."""
