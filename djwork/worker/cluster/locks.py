"""A job's locks released on a Redis Cluster: one owner-checked ``lua/lock_release.lua`` call per lock.

On one server the step that ends a job (the ack, a burial) releases its locks inside the same script. On
a cluster each lock (``unique:<digest>``, a periodic entry's running lock) is a slot of its own, so the
locks are released after that step, one call each, sent together. A crash between the two leaves the
job ended and its lock held: the lock expires by its TTL (``unique_for``), refusing a new copy of the
job until then, never letting a duplicate in. Each call compares the owner first, so a repeat, or a
lock taken by another jid since, releases nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from djwork import job_locks
from djwork import redis as redis_layer
from djwork.worker.cluster.calls import evaluate_each

logger = logging.getLogger("djwork.worker")


def release(conn: Any, locks: Sequence[str], jid: str) -> int:
    """``job_locks.release`` for a cluster: each lock of ``locks`` that ``jid`` owns deleted; the number released.

    Batch ties are left out, as there (a batch is refused on a cluster).
    """
    held = [key for key in locks if not job_locks.is_batch(key)]
    if not held or not jid:
        return 0
    return sum(int(reply) for reply in evaluate_each(conn, "lock_release", [((key,), (jid,)) for key in held]))


def release_ended(ended: Sequence[tuple[str, str]]) -> None:
    """Release the locks of jobs just ended, each (jid, encoded locks); a failure is logged, not raised.

    Called after the step that ended them has its reply: a lock left held expires by its TTL.
    """
    calls = [(jid, key) for jid, encoded in ended if jid and encoded
             for key in encoded.split(job_locks.SEPARATOR) if key and not job_locks.is_batch(key)]
    if not calls:
        return
    try:
        # Idempotent: owner-checked, so a replay releases nothing more.
        redis_layer.run(lambda conn: evaluate_each(conn, "lock_release", [((key,), (jid,)) for jid, key in calls]),
                        idempotent=True)
    except Exception as error:
        logger.warning("djwork: releasing the locks of %d finished jobs failed (they expire by their TTL): %s",
                       len({jid for jid, _key in calls}), error)
