"""A batch's write on a Redis Cluster: single-slot steps instead of one MULTI (docs/cluster.md, the batch write).

One server writes the batch's keys, its parent's membership, the listing and the jobs in one MULTI
(djwork/batches/batch.py). On a cluster those lie in several slots, so the write is, in this order:

1. the batch's keys in its slot, one MULTI (its hash, ``total``, the pending set ``{b-<bid>}-jids`` and the
   order list, their pending TTL; the ``written`` mark last);
2. the parent's membership, one MULTI in the parent's slot (``b-<bid>`` pending in its set, ``kids``);
3. the ``batches`` listing (its own slot);
4. the jobs' pushes, grouped by node (djwork.redis.exchange_on), ``SADD queues`` with them;
5. an empty batch's events decided (djwork/batches/cluster_accounting.py).

A crash before 4 leaves no job: only the batch's keys, which expire by their pending TTL (30 days), and a
listing entry that names them; the caller was told the write failed. A child's membership of its parent
left by such a crash keeps the parent pending for ever, as a member job that never ends would, until the
parent's keys expire: the parent's job that opened the child is still running then and fails with it.
No step is replayed after a send: a second push of the jobs would run them twice.
"""

from __future__ import annotations

from typing import Any

from djwork import redis as redis_layer
from djwork.batches import cluster_accounting
from djwork.redis import keys, lanes
from djwork.redis.key_layout import CLUSTER


def write(conn: Any, bid: str, fields: dict[str, Any] | None, parent: str | None, collector: Any, keep_results: bool,
          pending_ttl: int, chunk: int, listed: Any) -> None:
    """Steps 1 to 5 for ``collector``'s jobs; ``fields`` for a new batch (None: jobs added to an existing one)."""
    own = CLUSTER.batch(bid)
    count = len(collector.jids)
    pipe = conn.pipeline(transaction=True)
    if fields is not None:
        pipe.hset(own.hash, mapping={**fields, **({"parent": parent} if parent else {})})
    pipe.hincrby(own.hash, "total", count)
    for start in range(0, count, chunk):
        pipe.sadd(own.jids, *collector.jids[start:start + chunk])
        if keep_results:
            pipe.rpush(own.order, *collector.jids[start:start + chunk])
    for key in (own.hash, own.jids, own.order):
        pipe.expire(key, pending_ttl)
    pipe.hset(own.hash, "written", "1")
    pipe.execute()
    if parent:
        pipe = conn.pipeline(transaction=True)
        pipe.sadd(CLUSTER.batch(parent).jids, own.hash)
        pipe.hincrby(keys.batch(parent), "kids", 1)
        pipe.execute()
    if fields is not None:
        listed(conn)
    push_collected(conn, [collector], chunk)
    if fields is not None and count == 0:
        cluster_accounting.check(conn, bid)


def push_collected(conn: Any, collectors: list[Any], chunk: int) -> None:
    """The collected jobs pushed, grouped by node (one round trip per node), ``SADD queues`` with them."""
    commands: list[tuple[Any, ...]] = []
    for collector in collectors:
        for (queue, lane), raws in collector.queued.items():
            for start in range(0, len(raws), chunk):
                # A priority's lane carries the queue's hash tag: the push and its registration, one slot.
                commands += lanes.push_commands(queue, lane, raws[start:start + chunk], layout=CLUSTER)
        if collector.scheduled:
            commands.append(("ZADD", keys.SCHEDULE, *(part for score, raw in collector.scheduled
                                                       for part in (repr(score), raw))))
    queues = dict.fromkeys(queue for collector in collectors for queue, _lane in collector.queued)
    if queues:
        commands.append(("SADD", keys.QUEUES, *queues))
    if commands:
        for reply in redis_layer.exchange_on(conn, commands):
            if isinstance(reply, Exception):
                raise reply
