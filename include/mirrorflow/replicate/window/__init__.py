"""Micro-batch windows (mirrorflow.replicate.mode = micro-batch): one DAG run, one Spark application
whose long-running tasks copy every interval through the same copy engine, handing over to the
next window without a gap.

Each module decides one thing:

- settings: how long a window copies, how often, and how long it waits for the next one;
- share: which task copies which slots (and so which partitions, new ones included);
- partitions: one partition from batch to batch (its next range, what was copied, its lag);
- lag: lag in seconds as histograms over the last minutes;
- figures: a task's records and lag, one window's merged from its tasks', and which of them
  become a log line;
- channel: the records a window's driver, tasks and the next window exchange in the runs topic;
- task: one task's loop, the handover and taking slots back;
- handovers: what a task says of its handover (one INFO line per set of slots; the fenced
  writers' librdkafka lines at DEBUG);
- summary: a window's summary in sentences;
- local: the tasks in local processes (the CLI);
- driver: a window from its driver's side (plan again, follow the figures, store the report).
"""
