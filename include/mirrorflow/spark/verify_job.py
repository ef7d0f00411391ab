"""The verify job: `spark-submit spark_apps/mirrorflow_verify.py --config F --flow A->B --plan-offset N`.

The driver reads the verification plan the Airflow plan task stored in the run-records topic,
compares its partitions in at most tasks.max Spark tasks (verify_slice: both clusters
read once, nothing written but the report), stores the report and exits 0 whatever the
comparison found: a wrong record is the report task's to call, with the summary it stores and
the message it fails with. The job exits non-zero only when it could not do its work (no such
plan, Spark or the run-records topic failing); a partition that could not be read is a check
with an error in the report. Arguments and credentials are the copy job's
(mirrorflow.spark.copy_job): secrets reach the driver in the environment only. A Spark task
that is retried reads its partitions again: the job writes to no topic it compares.
"""

from __future__ import annotations

import logging
import sys
import time
from functools import partial

from mirrorflow.ops.verification.plan import VerifyError, read_plan
from mirrorflow.ops.verification.report import VerifyReport, store_report
from mirrorflow.ops.verification.run import compare_job_for, verify_slice
from mirrorflow.spark.copy_job import configure_logging, flow_and_clients, parse_args, run_slices

log = logging.getLogger("mirrorflow.spark.verify")


def main(argv: list[str] | None = None) -> int:
    configure_logging()
    args = parse_args(argv, "mirrorflow_verify.py", "Compare the partitions of one verification plan.")
    flow, clients = flow_and_clients(args)
    try:
        plan = read_plan(clients, args.plan_offset, flow.name)
    except VerifyError as exc:
        raise SystemExit(str(exc)) from None
    job = compare_job_for(flow, clients, plan)
    started_ms = int(time.time() * 1000)
    slices = plan.slices()
    log.info(
        "verification %s of %s: %d partitions over %d tasks",
        plan.run_id,
        flow.name,
        len(plan.spans),
        len(slices),
    )
    checks = run_slices(f"mirrorflow verify {flow.name} {plan.run_id}", slices, partial(verify_slice, job))
    report = VerifyReport.build(plan, checks, started_ms)
    store_report(clients, report)
    totals = report.totals()
    log.info(
        "verification %s of %s: %s; %d source records compared, %d matched, %d wrong, %d pending, "
        "%d partitions not read (the report task gives the verdict)",
        plan.run_id,
        flow.name,
        report.verdict(),
        totals["source_records"],
        totals["matched"],
        totals["wrong_total"],
        totals["pending"],
        totals["failed_partitions"],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
