"""Print the BigQuery DML that deletes erased jobs' event rows (docs/review.md#erasure).

The intake does not depend on the BigQuery client: an operator runs the statement with
`bq query --use_legacy_sql=false` once the rows have left the streaming buffer (about 90
minutes after their events). Each erasure answer names its jobs and the same statement.

    python -m services.intake.students.erasure_admin \
        --table PROJECT.DATASET.grading_completed_raw JOB...
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from shared.service_layer.erasure import bigquery_statement


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m services.intake.students.erasure_admin", description=__doc__
    )
    parser.add_argument("--table", required=True, help="project.dataset.grading_completed_raw")
    parser.add_argument("job_ids", nargs="+", help="the erased jobs' ids")
    args = parser.parse_args(argv)
    try:
        print(bigquery_statement(args.table, list(args.job_ids)))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
