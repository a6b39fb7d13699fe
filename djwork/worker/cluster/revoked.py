"""A revoked job met by a worker on a Redis Cluster: its taken copy dropped, not run (docs/cluster.md).

One server drops it inside the step that took it (``fetch.lua``, ``drop_revoked.lua``). On a cluster the
revoked set, the in-progress list, the record and the locks are in different slots, so the drop is steps:

1. ``lua/revoked_now.lua`` reads which of the jobs just taken are revoked (``djwork:revoked``'s slot);
2. ``lua/drop_copy.lua`` takes each off its in-progress list and retires its recovery count (the
   queue's slot; with basic fetch the job already left its queue, and only the count goes);
3. ``lua/revoke_result.lua`` writes REVOKED (the record's slot: a SUCCESS or FAILURE stays);
4. its locks, one owner-checked call per lock.

A crash after 1 changes nothing: the job is still in progress, recovered and taken again, and dropped
then. After 2 the job is gone; its record was written by the revoke itself (its last step), or is left
as it was if that revoke did not finish; its locks expire by their TTL. Every step repeats harmlessly.
Its batch is told it died after 3, before 4 (djwork/batches/cluster_accounting.py): a crash before it leaves the
batch waiting for a job that will not run, as a crash between a revoke's steps leaves its record unwritten.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from djwork import job_locks
from djwork import redis as redis_layer
from djwork.batches import cluster_accounting
from djwork.payload import PayloadError, loads
from djwork.redis import keys
from djwork.results import record as result_record
from djwork.settings.conf import get_config
from djwork.worker.cluster import locks as cluster_locks
from djwork.worker.cluster.calls import evaluate_each


def drop_revoked(taken: Sequence[tuple[Any, str, str]]) -> set[int]:
    """Drop the revoked among ``taken`` (raw payload, in-progress list or '', the queue's orphan counts).

    Returns the positions in ``taken`` that were dropped (the caller runs the others).
    """
    jobs = [_job(raw) for raw, _in_progress, _counts in taken]
    jids = sorted({job["jid"] for job in jobs if job})
    if not jids:
        return set()
    # Read only: replayed freely.
    revoked = {value.decode() if isinstance(value, bytes) else value for value in redis_layer.run(
        lambda conn: evaluate_each(conn, "revoked_now", [((keys.REVOKED,), jids)])[0], idempotent=True)}
    dropped = {position for position, job in enumerate(jobs) if job and job["jid"] in revoked}
    if dropped:
        # Idempotent: an LREM of what is gone, the same record, owner-checked lock releases.
        drops = [(taken[position], jobs[position]) for position in sorted(dropped)]
        redis_layer.run(lambda conn: _drop_on(conn, drops), idempotent=True)
    return dropped


def _drop_on(conn: Any, drops: list[tuple[tuple[Any, str, str], dict[str, Any]]]) -> None:
    evaluate_each(conn, "drop_copy", [((in_progress, counts), (raw, job["jid"]))
                                      for (raw, in_progress, counts), job in drops if in_progress])
    for (_raw, in_progress, counts), job in drops:
        if not in_progress:
            conn.hdel(counts, job["jid"])
    config = get_config()
    evaluate_each(conn, "revoke_result", [
        ((keys.result(job["jid"]), keys.cluster_result_waiters(job["jid"])),
         (job["jid"], result_record.revoked_spec(f"job {job['jid']} was revoked", config))) for _taken, job in drops])
    cluster_accounting.end_on(conn, [end for _taken, job in drops
                                for end in cluster_accounting.batch_ends(job_locks.encode(job_locks.locks_of(job)),
                                                                    job["jid"], "died")])
    for _taken, job in drops:
        cluster_locks.release(conn, job_locks.locks_of(job), job["jid"])


def _job(raw: Any) -> dict[str, Any] | None:
    try:
        job = loads(raw)
    except PayloadError:  # not a job: it is run (and reported broken) as on one server, never dropped here
        return None
    return job if isinstance(job.get("jid"), str) else None
