"""The key guard's move on a Redis Cluster: one server's ``lua/quarantine.lua`` split into single-slot steps.

One server checks a key, renames it aside, indexes the copy and trims old copies in one script. On a
cluster the key, its copy and the index ``djwork:quarantine`` are in different slots unless named for it
(docs/cluster.md, quarantine.lua), so the move is:

1. ``lua/quarantine_move.lua`` in the key's slot: the type checked and, when wrong, the key renamed to a
   copy named in that same slot (``key_layout.quarantine_head``: the key's own hash tag, or the key wrapped
   in braces), with its 30-day TTL. A key whose braces make no tag can't be named in its slot: its DUMP is
   RESTOREd under a copy in another slot, then ``lua/quarantine_drop.lua`` deletes the key only if it still
   holds what was copied.
2. ``lua/quarantine_index.lua`` in the index's slot: the copy indexed, the index trimmed (by age, five
   copies per key, a thousand in all), the index itself moved aside first if it is the wrong type.
3. The copies the trim dropped from the index deleted, each in its slot.

A crash after 1 leaves the copy unindexed: it is not listed and expires with its TTL; the key is free for
djwork already. After the RESTORE and before the drop, the key is still wrong and the copy unindexed: the
next check copies it again. After 2 the trimmed copies are unindexed and expire likewise. Each step is
safe to repeat (a replay of 1 finds the key moved, of 2 adds the same member, of 3 deletes nothing).
"""

from __future__ import annotations

import os
from typing import Any

from djwork import redis as redis_layer
from djwork.redis import keys, scripts
from djwork.redis.key_layout import CLUSTER


def quarantine(key: str, expected: str, ttl: int, keep: int, cap: int) -> tuple[Any, Any, Any, Any]:
    """Move ``key`` aside if it holds neither nothing nor ``expected``: (type found, copy or None, index type,
    index copy or None), as one server's script replies."""
    head = CLUSTER.quarantine_head(key)
    token = os.urandom(4).hex()
    # Replayed after a lost reply: the first run moved the key, so the replay finds it absent (or moves a
    # fresh wrong one), never moves a good one.
    found, copy, score, dumped, stamp = redis_layer.run(lambda conn: scripts.evaluate(
        conn, "quarantine_move", [key], [expected, head or "", ttl, token]), idempotent=True)
    if dumped:
        head = f"{keys.QUARANTINE_PREFIX}{key}:"
        copy = f"{head}{_text(stamp)}:{token}"
        _copy_by_dump(key, copy, dumped, ttl)
    if not copy:
        return found, None, "zset", None
    copy = _text(copy)
    index_reply = redis_layer.run(lambda conn: scripts.evaluate(
        conn, "quarantine_index", [keys.QUARANTINE_INDEX],
        [copy, score, head, ttl, keep, cap, CLUSTER.quarantine_head(keys.QUARANTINE_INDEX), os.urandom(4).hex()]),
        idempotent=True)
    index_type, index_copy, *dropped = index_reply
    if dropped:
        redis_layer.run(lambda conn: _delete_each(conn, dropped), idempotent=True)
    return found, copy, index_type, index_copy


def _copy_by_dump(key: str, copy: str, dumped: bytes, ttl: int) -> None:
    # REPLACE: a replay after a lost reply writes the same copy again.
    redis_layer.run(lambda conn: conn.restore(copy, ttl * 1000, dumped, replace=True), idempotent=True)
    # A key written since the DUMP stays (nothing deleted without its copy); the copy of what it held is
    # indexed all the same, as one server's move followed by that write would leave it.
    redis_layer.run(lambda conn: scripts.evaluate(conn, "quarantine_drop", [key], [dumped]), idempotent=True)


def _delete_each(conn: Any, copies: list[Any]) -> None:
    pipe = conn.pipeline(transaction=False)  # a cluster's pipeline: one round trip per node
    for copy in copies:
        pipe.delete(copy)
    pipe.execute()


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
