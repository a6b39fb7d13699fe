"""A canvas's write on a Redis Cluster: each plan's batch in its own slot, then the first jobs (docs/cluster.md).

One server writes every plan's batch (a chain's steps, a group, a chord's header and body) and the first jobs
in one MULTI (djwork/canvas/plan.py). On a cluster each batch is its own slot, so the write is, in order:
1. each plan's batch, one MULTI in its slot (fields, members with their holds, the order list, the pending
TTL, a ``written`` mark last), then its listing entry; 2. the first jobs, grouped by node; 3. each plan that
has no member decided now (djwork/batches/cluster_accounting.py). A nested plan is a member ``b-<bid>`` of its
parent, written with the parent's own keys in step 1. A crash before 2 leaves no job, only batches that expire
by their pending TTL; the caller was told the write failed. Not replayed after a send (a second push would run
the first jobs twice).
"""

from __future__ import annotations

from typing import Any

from djwork.batches import cluster_accounting, cluster_write
from djwork.batches.batch import CHUNK, PENDING_TTL, list_batch
from djwork.redis.key_layout import CLUSTER


def write(conn: Any, plans: list[Any], collectors: list[Any], kids: dict[str, int], now: float) -> None:
    for plan in plans:
        own = CLUSTER.batch(plan.bid)
        pipe = conn.pipeline(transaction=True)
        pipe.hset(own.hash, mapping=plan.fields(now, kids[plan.bid]))
        for start in range(0, len(plan.jids), CHUNK):
            pipe.sadd(own.jids, *plan.jids[start:start + CHUNK])
            pipe.rpush(own.order, *plan.jids[start:start + CHUNK])
        if plan.holds:
            pipe.sadd(own.jids, *plan.holds)
        for key in (own.hash, own.jids, own.order):
            pipe.expire(key, PENDING_TTL)
        pipe.hset(own.hash, "written", "1")
        pipe.execute()
        listing = conn.pipeline(transaction=False)
        list_batch(listing, plan.bid, now)
        listing.execute()
    cluster_write.push_collected(conn, collectors, CHUNK)
    for plan in plans:
        if not plan.jids and not plan.holds:  # nothing will end in it (an empty group or chord header)
            cluster_accounting.check(conn, plan.bid)
