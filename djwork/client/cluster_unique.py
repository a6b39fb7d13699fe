"""A unique job's push on a Redis Cluster: the lock taken first, then the push, two single-slot steps.

On one server lua/unique_push.lua takes the lock (``SET NX``) and pushes in one script. On a cluster the
lock ``unique:<digest>`` and the queue (or ``schedule``) are in different slots, so the push is split
(docs/cluster.md, Unique jobs): 1. ``SET lock jid NX PX ttl GET`` in the lock's slot; a lock another jid
holds makes this push a duplicate of that jid, and nothing is written; 2. the plain push, in the push's
round trip. A lock held by this very jid counts as taken (a replayed first step meets its own lock), so
the first step is safe to replay. A crash or a failed push between the two leaves a lock with no job:
the caller was told the push failed, or may have, and the lock expires by its TTL (``unique_for``); a
duplicate is never let in, a new copy may be refused until then.
"""

from __future__ import annotations

from typing import Any

from djwork import redis as redis_layer
from djwork.client.push_hooks import Pushed, Write
from djwork.payload import dumps
from djwork.redis import key_layout, keys, lanes


def take_then_push(lock: str, ttl_ms: int, payload: dict[str, Any], queue: str, later: float | None) -> Pushed | Write:
    """Step 1 now (the lock); step 2 as the push's ``Write``, or the holder's jid when another jid holds it."""
    jid = payload["jid"]
    # SET NX with GET (Redis 7.0): nil when this call set it, else the holder, in one command on one slot.
    holder = redis_layer.run(lambda conn: conn.set(lock, jid, nx=True, px=ttl_ms, get=True), idempotent=True)
    if holder is not None:
        holder = holder.decode() if isinstance(holder, bytes) else str(holder)
        if holder != jid:
            return Pushed(holder, duplicate_of=holder)
    raw = dumps(payload)
    if later is not None:
        return Write(("ZADD", keys.SCHEDULE, repr(float(later)), raw), jid, _pushed)
    lane = lanes.lane_of(payload)  # a prioritised job to its lane, in the queue's slot (registered by the caller)
    return Write(("LPUSH", lanes.list_key(queue, lane, key_layout.CLUSTER), raw), jid, _pushed, None, queue, lane)


def _pushed(jid: str, reply: Any) -> Pushed:
    return Pushed(jid)
