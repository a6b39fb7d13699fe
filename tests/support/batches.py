"""Ending a batch member's run as a worker would, through the script the worker runs for it: ack or failure."""

from __future__ import annotations

import json

from djwork import dead, job_locks
from djwork.redis import keys, scripts


def ack(raw_redis, job: dict) -> None:
    """fetch.lua's ack of a successful run (limit 0: it takes nothing)."""
    raw = json.dumps(job)
    scripts.evaluate(raw_redis, "fetch", [keys.PAUSED, keys.ORPHAN_COUNTS, keys.FINISHED_LATE, keys.REVOKED,
                                          keys.RESULT_WAITERS, "queue:none", "t:inprogress", "t:isolated",
                                          "t:lanes"],
                     [0, "reliable", 1, 0, "none", -1, raw, job["jid"], job_locks.encode(job_locks.locks_of(job)),
                      "", ""])


def fail(raw_redis, job: dict, target: str) -> None:
    """fail.lua's filing of a failed run in retry, dead, or nowhere (drop)."""
    dead.file_failure("t:inprogress", json.dumps(job), target, job, 0.0, job["jid"],
                      locks=job_locks.encode(job_locks.locks_of(job))).evaluate(raw_redis)
