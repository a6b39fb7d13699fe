"""A canvas's write on a Redis Cluster: each plan's batch in its own slot, then the first jobs (docs/cluster.md).

One server writes every plan's batch (a chain's steps, a group, a chord's header and body) and the first jobs
in one MULTI (djwork/canvas/plan.py). On a cluster each batch is its own slot, so the write is, in order:
1. each plan's batch, one MULTI in its slot (fields, members with their holds, the order list, the pending
TTL, a ``written`` mark last), then its listing entry; 2. the first jobs, grouped by node; 3. each plan that
has no member decided now (djwork/batches/cluster_accounting.py). A nested plan is a member ``b-<bid>`` of its
parent, written with the parent's own keys in step 1. A crash before 2 leaves no job, only batches that expire
by their pending TTL; the caller was told the write failed. Not replayed after a send (a second push would run
the first jobs twice).

New plans that join a running canvas's batch (``replace()``, ``add_to_chord()``, a generator-fed chord's later
members: djwork/canvas/replace.py) add two steps: 0. that batch marked for the leader's sweep, before anything
can be left pending in it; then step 1; then, instead of step 2, the join (lua/batch_join.lua, in that batch's
slot: the membership change, counted once by member, and the first jobs kept as pending callbacks in the same
step); then those pushed with push_once and their fields cleared (cluster_accounting.settle); then step 3.
A crash before the join leaves only the new batches, which expire (the job that asked runs again and joins
afresh); after it, the pending first jobs are pushed by the next end of a member of that batch (the asking
job's own end at the latest: it is still pending there) or by the sweep, once (the queue's dedupe).
"""

from __future__ import annotations

from typing import Any

from djwork.batches import cluster_accounting, cluster_write
from djwork.batches.batch import CHUNK, PENDING_TTL, list_batch
from djwork.payload import new_jid
from djwork.redis import keys
from djwork.redis.key_layout import CLUSTER
from djwork.worker.cluster.calls import evaluate_each

Join = tuple[str, list[str]]  # (the running batch's bid, batch_join.lua's membership arguments)


def write(conn: Any, plans: list[Any], collectors: list[Any], kids: dict[str, int], now: float,
          join: Join | None = None) -> bool:
    """The steps above; whether the new plans joined (False: a replacement an earlier run already made)."""
    if join is not None:
        cluster_accounting.mark(conn, {join[0]})
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
    if join is None:
        cluster_write.push_collected(conn, collectors, CHUNK)
    else:
        bid, membership = join
        joined = evaluate_each(conn, "batch_join", [((keys.batch(bid),), [*membership, *_pending(collectors)])])[0]
        if not joined:
            return False  # nothing kept: the new batches hold no job and expire
        cluster_accounting.settle_now(conn, bid)
    for plan in plans:
        if not plan.jids and not plan.holds:  # nothing will end in it (an empty group or chord header)
            cluster_accounting.check(conn, plan.bid)
    return True


def _pending(collectors: list[Any]) -> list[str]:
    """The first jobs as batch_account's pending callback fields: pushed once each by push_once, by the field's
    name, whoever pushes them (this call, another member's end or the sweep)."""
    token = new_jid()  # a join of its own: two joins' fields never share a name
    values = [f"q\t{queue}\t{raw}" for collector in collectors for (queue, _lane), raws in collector.queued.items()
              for raw in raws]  # no lane on a cluster: a priority is refused
    values += [f"s\t{score!r}\t{raw}" for collector in collectors for score, raw in collector.scheduled]
    return [part for number, value in enumerate(values, 1)
            for part in (f"{cluster_accounting.CALLBACK_FIELD}join-{token}-{number}", value)]
