"""Seeded fault schedules that search for crash-recovery defects no forged state covers.

The reliability suite (tests/reliability) builds each fault on purpose, one at a time, and each
row of the recovery table in docs/concepts/exactly-once.md has a test that forges its state. What
those cannot find are the states that only arise when faults meet: a run frozen while the target
restarts, a source that comes back during a second run's fencing. Here a schedule drawn from one
seed throws such faults at a flow that copies real traffic between real clusters, and a checker
then proves what the target holds, so a failing seed replays the same schedule.

- `schedule`: the faults (drawn from the seed before anything starts), the clusters, and one
  whole schedule run end to end;
- `load`: the records written into the source while the schedule runs;
- `runs`: the `mirrorflow replicate` processes, back to back, and how each ended;
- `invariants`: what the target must hold once the faults have stopped.
"""
