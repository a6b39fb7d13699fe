"""``djwork.revoke(jid)`` on a Redis Cluster: lua/revoke.lua's one step as single-slot steps (docs/cluster.md).

1. ``lua/revoke_result.lua`` writes REVOKED in the record's slot (a SUCCESS or FAILURE stays). First: a job
   running now that ends after this keeps REVOKED (lua/store_result.lua leaves it). Written after the flag, a
   job that saw the flag and ended before this step stored SUCCESS, which then stayed (seen on Redis 8).
2. ``lua/revoke_mark.lua`` flags the jid in ``djwork:revoked`` (its slot): from here on a worker that
   fetches or takes the job drops it (djwork/worker/cluster/revoked.py), and a running job sees the flag.
3. ``lua/revoke_remove.lua`` once per place the job may wait (`schedule`, `retry`, each queue searched
   and its registered lanes), each in its slot, the calls sent together (one round trip per node); then
   a removed job's batch told it died (djwork/batches/cluster_accounting.py), as one server's revoke.lua
   tells it; then the removed jobs' locks, one owner-checked call per lock (each lock is its own slot).

A crash after 1 leaves the record REVOKED and the job unflagged: the caller was told the revoke failed, and
a job that runs meanwhile keeps the REVOKED record; calling the revoke again finishes it (every step repeats
harmlessly: the same record is written, the flag moves its end, a removal finds nothing). After 2 the job
is dropped when fetched. After 3's removals, its locks may still be held (they expire by their TTL) and
its batch not told (the retry tells it: membership, counted once).
"""

from __future__ import annotations

from typing import Any

from djwork import job_locks
from djwork.batches import cluster_accounting
from djwork.payload import PayloadError, loads
from djwork.redis import keys, lanes
from djwork.redis.key_layout import CLUSTER
from djwork.results import record as result_record
from djwork.settings.conf import Config
from djwork.worker.cluster import locks as cluster_locks
from djwork.worker.cluster.calls import evaluate_each


def revoke_steps(conn: Any, jid: str, queue: str | None, config: Config, bound: int) -> list[Any]:
    """The cluster's revoke of ``jid`` through the cluster client ``conn``: key, payload pairs of what it removed."""
    spec = result_record.revoked_spec(f"job {jid} was revoked", config)
    evaluate_each(conn, "revoke_result", [((keys.result(jid), keys.cluster_result_waiters(jid)), (jid, spec))])
    evaluate_each(conn, "revoke_mark", [((keys.REVOKED,), (jid, config.result_ttl))])
    if queue is not None:
        names = [queue]
    else:
        names = sorted(name.decode() if isinstance(name, bytes) else name for name in conn.smembers(keys.QUEUES))
    places: list[tuple[tuple[str, ...], tuple[Any, ...]]] = [
        ((keys.SCHEDULE,), (jid, bound, "zset")), ((keys.RETRY,), (jid, bound, "zset"))]
    # A job with a priority waits in one of its queue's lanes (docs/priority.md), in the queue's slot.
    pipe = conn.pipeline(transaction=False)
    for name in names:
        pipe.smembers(CLUSTER.lanes(name))
    lists = [(CLUSTER.lane(name, lane), name) for name, members in zip(names, pipe.execute() if names else [],
                                                                          strict=True)
             for lane in [0, *lanes.registered(members)]]
    places += [((list_key, keys.cluster_orphan_counts(name)), (jid, bound, "list")) for list_key, name in lists]
    removed: list[Any] = []
    for (place_keys, _args), payloads in zip(places, evaluate_each(conn, "revoke_remove", places), strict=True):
        for payload in payloads:
            removed += [place_keys[0], payload]
    ties = [_locks(payload) for payload in removed[1::2]]
    cluster_accounting.end_on(conn, [end for tied in ties
                                     for end in cluster_accounting.batch_ends(job_locks.encode(tied), jid, "died")])
    cluster_locks.release(conn, sorted({lock for tied in ties for lock in tied}), jid)
    return removed


def _locks(payload: Any) -> list[str]:
    try:
        job = loads(payload)
    except PayloadError:  # not a job: no locks to release
        return []
    return job_locks.locks_of(job) if isinstance(job, dict) else []
