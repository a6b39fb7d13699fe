"""Clearing a queue or a sorted set without stranding the locks its jobs own.

A plain UNLINK deleted unique jobs but left their ``unique:<digest>`` locks,
so every copy of those jobs was refused until the locks' TTL ran out. The
key is set aside in one step (new pushes go to a fresh key at once), then
walked in batches: each job's locks are released, owner-checked
(djwork/job_locks.py), and the batch is dropped.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from djwork import job_locks
from djwork.api import access
from djwork.api.cluster_actions import SetAsideSteps, release_each
from djwork.api.cluster_entries import by_mode
from djwork.dead import ScriptCall
from djwork.redis import keys
from djwork.redis.key_layout import layout_of

BATCH = 1000


def clear_releasing_locks(key: str, queue_name: str = "") -> int:
    """Delete the LIST or ZSET ``key`` (and ``queue_name`` from `queues`); returns how many entries it held."""
    aside = access.read(layout_of).clearing_copy(key, uuid.uuid4().hex)
    set_aside = by_mode(ScriptCall("set_aside", [key, aside, keys.QUEUES], [queue_name]),
                        SetAsideSteps(key, aside, queue_name))  # one script, or a cluster's steps
    # Not replayed: after a lost reply the key may already be renamed; the copy still expires.
    size = int(access.write(set_aside.evaluate, replay=False))
    is_list = size > 0 and access.read(lambda conn: conn.type(aside)) == b"list"

    def read_batch(conn: Any) -> list[bytes]:
        return conn.lrange(aside, 0, BATCH - 1) if is_list else conn.zrange(aside, 0, BATCH - 1)

    while size:
        batch = access.read(read_batch)
        if not batch:
            break
        _release(batch)
        count = len(batch)

        def drop(conn: Any, count: int = count) -> Any:
            return conn.ltrim(aside, count, -1) if is_list else conn.zremrangebyrank(aside, 0, count - 1)

        access.write(drop, replay=False)  # a replay would drop a batch not yet walked
    access.write(lambda conn: conn.unlink(aside), replay=True)
    return size


def _release(batch: list[bytes]) -> None:
    owned: list[tuple[str, list[str]]] = []
    for raw in batch:
        if b"djwork_locks" not in raw and b'"bid"' not in raw:  # most jobs own none: skip the parse
            continue
        try:
            payload = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(payload, dict) and isinstance(payload.get("jid"), str):
            locks = job_locks.locks_of(payload)
            if locks:
                owned.append((payload["jid"], locks))
    if not owned:
        return
    access.write(release_each(owned).evaluate, replay=True)  # compare-and-delete: a replay releases nothing twice
