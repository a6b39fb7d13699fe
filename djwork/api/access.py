"""Every Redis call of djwork.api: the admin pool, the replay rule for each call, and one error type.

The admin pool keeps a dashboard page or an admin script from taking
connections the worker's pushes need. Reads are replayed after a lost reply
(they change nothing); a write says whether it may be (``replay``): only when
running it twice leaves Redis as running it once would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from redis.exceptions import RedisClusterException, RedisError

from djwork import redis as redis_layer
from djwork.api.errors import RedisUnavailable

T = TypeVar("T")


def read(block: Callable[[Any], T]) -> T:
    """Run a read-only ``block(conn)`` on the admin pool, replayed as the policy allows."""
    return write(block, replay=True)


def write(block: Callable[[Any], T], *, replay: bool) -> T:
    """Run ``block(conn)`` on the admin pool; with ``replay`` it is re-run after a lost reply."""
    try:
        return redis_layer.run(block, idempotent=replay, purpose="admin")
    except (RedisError, RedisClusterException) as error:
        # RedisClusterException (no node reachable, CROSSSLOT) is no RedisError in redis-py.
        raise RedisUnavailable(f"{type(error).__name__}: {error}") from error
