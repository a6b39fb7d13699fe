"""A limiter's steps on a Redis Cluster that one server runs inside the admission's script (docs/cluster.md).

Each limiter's keys carry its hash tag (``LimiterKeys`` in djwork/redis/key_layout.py), so every decision
is still one single-slot call of lua/limiter_*.lua. What spans slots is done here, apart: the name listed in
the registry (lua/limiter_list.lua) before the admission, a dead process's holdings found limiter by
limiter (each keeps its own holdings index), and a waiter's block on its wake list, on a connection of its
own to the node that owns that list.
"""

from __future__ import annotations

from typing import Any

import redis as redis_py

from djwork import redis as redis_layer
from djwork.limiter.base import SWEEP_BATCH
from djwork.redis import cluster as redis_cluster
from djwork.redis import keys, scripts
from djwork.redis.key_layout import LimiterKeys


def list_apart(conn: Any, limiter_keys: LimiterKeys, name: str, ttl: float) -> None:
    """List ``name`` in the registry when its layout keeps the registry out of the admission (a cluster).

    Before the admission: a crash between leaves a listed limiter nobody holds, as an idle one is, which
    leaves the registry by its ttl. One server lists inside the admission's script: nothing to do here.
    """
    if limiter_keys.registry == limiter_keys.meta:
        scripts.evaluate(conn, "limiter_list", [keys.LIMITERS], [name, repr(ttl), SWEEP_BATCH])


def holdings_by_limiter(conn: Any) -> dict[str, list[Any]]:
    """Every registered limiter's holdings entries (``identity\\tname\\ttoken``), one ZRANGE per limiter.

    A cluster has no shared holdings index (it would put every limiter's admission in one slot): the
    registry names the limiters, and the reads go out in one pipeline, split by node.
    """
    names = [value.decode() if isinstance(value, bytes) else str(value)
             for value in conn.zrange(keys.LIMITERS, 0, -1)]
    if not names:
        return {}
    pipe = conn.pipeline(transaction=False)
    for name in names:
        pipe.zrange(keys.cluster_limiter_holdings(name), 0, -1)
    replies = pipe.execute(raise_on_error=False)
    return {name: list(reply) for name, reply in zip(names, replies, strict=True) if isinstance(reply, list) and reply}


class WakeConnection:
    """A waiter's own connection to the node that owns its wake list (``DedicatedConnection``'s ``run``/``close``).

    A cluster client has no single pool to take a dedicated connection from. A failed block is left to
    the caller (it asks the script again, which sees a grant whatever happened to the wake-up).
    """

    def __init__(self, client: redis_py.RedisCluster, wake_key: str) -> None:
        self.connection = redis_cluster.node_connection(client, wake_key)

    def run(self, block: Any) -> Any:
        try:
            return block(self.connection)
        except BaseException:
            self.connection.disconnect()  # a half-read socket is never used again; the next send redials
            raise

    def close(self) -> None:
        self.connection.disconnect()


def wake_connection(wake_key: str) -> Any:
    """The connection a waiter blocks on: a dedicated one on one server, one to the wake list's node on a cluster."""
    client = redis_layer.client("default")
    if isinstance(client, redis_py.RedisCluster):
        return WakeConnection(client, wake_key)
    return redis_layer.DedicatedConnection("default")
