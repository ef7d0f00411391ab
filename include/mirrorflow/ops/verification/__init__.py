"""Verification of a flow's copy by content, record by record (see `mirrorflow verify`).

Each module decides one thing: `plan` what to compare (per partition, from both clusters,
changing nothing), `checks` what one partition's comparison holds and its verdict, `reader`
how a partition's records are read, `digests` the order-sensitive digest of each side,
`compare` how a source partition and its copies are merged and every difference classified,
`run` where the comparisons run (Spark tasks or local processes), `report` the verdict over
all partitions and the stored evidence, and `service` the steps as the DAG, the Spark job and
the CLI call them.
"""
