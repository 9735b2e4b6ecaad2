"""A process that starts renewing a job's lease and is killed before its write lands.

    python -m tests.contract.killed_writer embedded SQLITE_PATH JOB_ID OWNER
    python -m tests.contract.killed_writer google EMULATOR_HOST PROJECT COLLECTION JOB_ID OWNER

It opens the store as a service would, calls `update` with a mutation that prints
`inside` and then hangs, so the parent can SIGKILL it while the update has read the job
(and, with a read-write transaction, would hold its lock) but written nothing.
"""

from __future__ import annotations

import os
import sys
import threading
from datetime import UTC, datetime, timedelta

from shared.domain.job import Job
from shared.ports import JobStore


def _open(argv: list[str]) -> tuple[JobStore, list[str]]:
    if argv[0] == "embedded":
        from shared.adapters.embedded.job_store import SqliteJobStore
        from shared.adapters.embedded.sqlite import SqliteDatabase

        return SqliteJobStore(SqliteDatabase(argv[1])), argv[2:]
    from google.cloud import firestore

    from localcloud.emulators import FIRESTORE_HOST_ENV
    from shared.adapters.google.job_store import FirestoreJobStore

    os.environ[FIRESTORE_HOST_ENV] = argv[1]
    client = firestore.Client(project=argv[2])
    return FirestoreJobStore(client, argv[3], timedelta(days=30)), argv[4:]


def main(argv: list[str]) -> None:
    store, (job_id, owner) = _open(argv)

    def hang(job: Job) -> Job:
        print("inside", flush=True)
        threading.Event().wait()  # until killed
        return job.renew(owner, datetime.now(UTC), timedelta(seconds=30))

    store.update(job_id, hang)


if __name__ == "__main__":
    main(sys.argv[1:])
