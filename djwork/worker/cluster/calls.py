"""Many calls of one Lua script on a Redis Cluster, each in its own slot, one round trip per node.

A step that one server runs as one script over many keys (every job's result, every lock of a job)
becomes one single-slot call per key on a cluster; sent together, they cost one round trip per node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.exceptions import NoScriptError

from djwork import redis as redis_layer
from djwork.redis import scripts


def evaluate_each(conn: Any, name: str, calls: Sequence[tuple[Sequence[str], Sequence[Any]]],
                  raise_on_error: bool = True) -> list[Any]:
    """Script ``name`` run once per (keys, args) through the cluster client ``conn``; the replies, in order.

    An error reply raises, after every call has its reply (or stays in its place, ``raise_on_error=False``).
    """
    commands = [("EVALSHA", scripts.sha(name), len(call_keys), *call_keys, *args) for call_keys, args in calls]
    if not commands:
        return []
    replies = redis_layer.exchange_on(conn, commands)
    # NOSCRIPT ran nothing (a node promoted since the boot, or no worker booted): those calls go again as EVAL.
    refused = [index for index, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if refused:
        again = redis_layer.exchange_on(conn, [("EVAL", scripts.source(name), *commands[index][2:])
                                               for index in refused])
        for index, reply in zip(refused, again, strict=True):
            replies[index] = reply
    for reply in replies:
        if raise_on_error and isinstance(reply, Exception):
            raise reply
    return replies
