"""spark-submit entry point for mirrorflow's verify job (see mirrorflow.spark.verify_job)."""

import sys

from mirrorflow.spark.verify_job import main

if __name__ == "__main__":
    sys.exit(main())
