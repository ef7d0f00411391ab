"""What a writer or a plan does with a transaction a crash left open on the target, decided in
one place (docs/concepts/exactly-once.md, "Transactions left open on the target", has the table).

- decision.py classifies what an open transaction holds: dead and never committed, committed
  with its marker lost in this partition, another producer's, or cannot be told;
- landed.py tells whether the copies that progress names had committed in their remote
  partitions, for every key of a transaction at once (tails.py reads the last committed records of
  many partitions through one consumer, for it and for the plan's found_copies.py);
- hanging.py is the mechanics: last stable offsets and high watermarks in batched calls, the
  sweep (a transaction of the right id that writes a record and aborts), the error with Kafka's
  command for what the flow cannot end;
- remote_clear.py acts on remote partitions before a slot writer writes them (abort, rewind
  progress so committed records are copied again, or refuse);
- progress_sweep.py acts on progress partitions for a settle or a plan (abort, then write back
  the progress of every key whose copy committed, or refuse).

Nothing here imports the package's callers (the writer, the planner) at run time.
"""
