"""A job's ties in its run: its locks and batch membership ride on its settlement (djwork/job_locks.py).

Read once as the job is admitted, so every ending (the ack, a filing, a
drop) releases them in its own Lua step; a job pushed with
``unique_until="start"`` gives its locks up as it starts, so a duplicate can
be queued while it runs.
"""

from __future__ import annotations

import logging
from typing import Any

from djwork import job_locks
from djwork import redis as redis_layer
from djwork.worker import mode
from djwork.worker.run_hooks import JobRun, RunHook

logger = logging.getLogger("djwork")


class LockTies(RunHook):
    """Joins the runs whose payload names locks or a batch."""

    def __init__(self, config: Any) -> None:
        self.release = mode.mode_for(config).release_locks  # the mode's release, chosen once

    def joins(self, target: Any, config: Any) -> tuple[str, ...]:
        return (job_locks.FIELD, "bid")

    def admit(self, run: JobRun) -> None:
        payload, jid = run.payload, run.jid
        locks = job_locks.locks_of(payload)
        if not locks:
            return None
        run.unit.locks = job_locks.encode(locks)
        if payload.get("unique_until") == "start":
            try:
                redis_layer.run(lambda conn: self.release(conn, locks, jid), idempotent=True)
                run.unit.locks = job_locks.encode([tie for tie in locks if job_locks.is_batch(tie)])
            except Exception as error:  # kept for the ack to release: later, never lost
                logger.warning("djwork: releasing the locks of job %s at its start failed: %s", jid, error)
        return None
