"""Every Redis call of djwork.api: the admin pool, the replay rule for each call, and one error type.

The admin pool keeps a dashboard page or an admin script from taking
connections the worker's pushes need. Reads are replayed after a lost reply
(they change nothing); a write says whether it may be (``replay``): only when
running it twice leaves Redis as running it once would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from redis.exceptions import RedisClusterException, RedisClusterUnreachableError, RedisError

from djwork import redis as redis_layer
from djwork.api.errors import ApiError, RedisUnavailable
from djwork.redis.url import public_location

T = TypeVar("T")


def redis_location() -> str:
    """The Redis these calls go to, without any password: for a page's footer and an outage message."""
    return public_location()


def read(block: Callable[[Any], T]) -> T:
    """Run a read-only ``block(conn)`` on the admin pool, replayed as the policy allows."""
    return write(block, replay=True)


def write(block: Callable[[Any], T], *, replay: bool) -> T:
    """Run ``block(conn)`` on the admin pool; with ``replay`` it is re-run after a lost reply."""
    try:
        return redis_layer.run(block, idempotent=replay, purpose="admin")
    except (RedisError, RedisClusterUnreachableError) as error:
        # RedisClusterUnreachableError (no node of a cluster answers) is no RedisError in redis-py.
        raise RedisUnavailable(f"{type(error).__name__}: {error}") from error
    except RedisClusterException as error:
        # A step a cluster refuses (CROSSSLOT: its keys are in several slots) is not an outage: the person
        # who asked is told it is not done, and why, on the page they are on.
        raise ApiError(f"not done: this step is not available on a Redis Cluster yet (docs/cluster.md): "
                       f"{error}") from error
