"""What a djwork connection is: it counts round trips and marks a failed dial as connect phase.

The replay policy (djwork.redis_policy) decides from two facts this module
records: whether a failure happened before the command left this host
(``ConnectPhaseError``, ``PoolExhaustedError``), and whether the block had
already completed a round trip (``round_trips()``). Pools are built here too,
with redis-py's own retry switched off: it re-sends the in-flight command
after a reconnect, which is exactly the replay the policy exists to control.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import redis as redis_py
from redis.backoff import NoBackoff
from redis.exceptions import BusyLoadingError, MasterDownError, ReadOnlyError, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry

from djwork.conf import Config

FAILOVER_PREFIXES = ("READONLY", "NOREPLICAS", "UNBLOCKED", "MASTERDOWN", "LOADING")


class ConnectPhaseError(RedisConnectionError):
    """Raised while dialing or handshaking: the caller's command never left this host."""


class PoolExhaustedError(RedisConnectionError):
    """No pooled connection became free within POOL_TIMEOUT."""


def is_failover_reply(error: BaseException) -> bool:
    """An error reply by which the server refused a command *before running it*: role change, loading, quorum.

    redis-py strips the code from the message of the replies it maps to a
    class (READONLY, LOADING, MASTERDOWN), so those are recognised by class
    or ``status_code``; unmapped ones (NOREPLICAS, UNBLOCKED) by prefix.
    """
    if isinstance(error, (ReadOnlyError, BusyLoadingError, MasterDownError)):
        return True
    if getattr(error, "status_code", None) in FAILOVER_PREFIXES:
        return True
    return isinstance(error, ResponseError) and str(error).startswith(FAILOVER_PREFIXES)


_odometer = threading.local()


def round_trips() -> int:
    """Replies to commands this thread has read from Redis, over its whole life (monotonic).

    Handshake replies (HELLO, CLIENT SETNAME, ... while dialing) and failover
    refusals (READONLY, LOADING, ...) are not counted: neither ran a command of ours.
    """
    return getattr(_odometer, "count", 0)


class _RoundTripCounting:
    """Counts completed replies, and marks every dial failure as connect-phase.

    Counted *after* a reply arrives (an error reply is a reply: the command
    ran): a command that never reached the server leaves the odometer where
    it was, which is what keeps the connect-phase replay alive for a block
    that failed on its very first round trip.
    """

    round_trips = 0
    _dialing = False

    def connect(self, *args: Any, **kwargs: Any) -> None:
        # The pool calls connect() on every checkout; redis-py 8 runs it through
        # its retry machinery even when connected, which cost more client CPU
        # than the push itself. Connected is connected: nothing to dial.
        if getattr(self, "_sock", None) is not None:
            return
        self._dial(super().connect, *args, **kwargs)  # type: ignore[misc]

    def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        # redis-py >= 6 re-dials through this (not connect()) when a command
        # finds the socket gone; it is connect phase all the same.
        if getattr(self, "_sock", None) is not None:
            return
        self._dial(super().connect_check_health, *args, **kwargs)  # type: ignore[misc]

    def _dial(self, method: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        # The handshake's replies are not round trips of the caller's block: a
        # dial that dies after CLIENT SETNAME answered has still not sent the
        # block's command, so it must stay a replayable connect-phase failure.
        outer, self._dialing = self._dialing, True
        try:
            method(*args, **kwargs)
        except ConnectPhaseError:
            raise
        except (RedisError, OSError) as error:
            raise ConnectPhaseError(f"connect failed: {error}") from error
        finally:
            self._dialing = outer

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            response = super().read_response(*args, **kwargs)  # type: ignore[misc]
        except ResponseError as error:
            # A failover refusal proves that command did not run; counting it
            # would turn every READONLY into "dirty" and void the failover retry.
            if not is_failover_reply(error):
                self._count()
            raise
        self._count()
        return response

    def _count(self) -> None:
        if self._dialing:
            return
        self.round_trips += 1
        _odometer.count = getattr(_odometer, "count", 0) + 1


class CountingConnection(_RoundTripCounting, redis_py.Connection):
    pass


class CountingUnixConnection(_RoundTripCounting, redis_py.UnixDomainSocketConnection):
    pass


class CountingSSLConnection(_RoundTripCounting, redis_py.SSLConnection):
    pass


class CountingPool(redis_py.BlockingConnectionPool):
    """A blocking pool whose "no connection free" is a ``PoolExhaustedError`` (the command never left)."""

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().get_connection(*args, **kwargs)
        except ConnectPhaseError:
            raise
        except RedisConnectionError as error:
            if "No connection available" in str(error):
                raise PoolExhaustedError(str(error)) from error
            raise


def connection_kwargs_from_cache(alias: str) -> tuple[str, dict[str, Any]]:
    """The Redis URL and options of a django-redis (or Django's own Redis) cache alias."""
    from django.conf import settings

    cache = settings.CACHES[alias]
    location = cache.get("LOCATION")
    if isinstance(location, (list, tuple)):
        location = location[0]
    options = dict(cache.get("OPTIONS") or {})
    extra: dict[str, Any] = {}
    if "PASSWORD" in options:
        extra["password"] = options["PASSWORD"]
    for key in ("CONNECTION_POOL_KWARGS",):
        extra.update(options.get(key) or {})
    return str(location), extra


def url_and_options(config: Config) -> tuple[str, dict[str, Any]]:
    """Where ``config`` connects (its CACHE alias's Redis, else REDIS_URL) and with which redis-py options."""
    if config.cache:
        url, extra = connection_kwargs_from_cache(config.cache)
    else:
        url, extra = config.redis_url, {}
    return url, {**extra, **config.redis_options}


def pool_size(config: Config, purpose: str) -> int:
    if config.pool_size:
        return int(config.pool_size)
    total_concurrency = sum(capsule.concurrency for capsule in config.capsules)
    if purpose == "fetch":
        return total_concurrency + 2 * len(config.queue_names) + 4
    return total_concurrency + 10


def make_pool(config: Config, purpose: str) -> CountingPool:
    url, options = url_and_options(config)
    parsed = urlparse(url)
    connection_class: type = CountingConnection
    if parsed.scheme == "unix":
        connection_class = CountingUnixConnection
    elif parsed.scheme == "rediss":
        connection_class = CountingSSLConnection
    # Blocking fetches wait server-side up to FETCH_TIMEOUT; the socket must
    # outlast that or every idle fetch would surface as a read timeout.
    socket_timeout = config.socket_timeout
    if purpose == "fetch":
        socket_timeout = max(socket_timeout, config.fetch_timeout + config.socket_timeout)
    kwargs: dict[str, Any] = {
        "socket_connect_timeout": config.connect_timeout,
        "socket_timeout": socket_timeout,
        "retry_on_timeout": False,
        "health_check_interval": 0,
        "client_name": f"djwork-{purpose}",
        **options,
    }
    kwargs["retry"] = Retry(NoBackoff(), 0)  # never let redis-py re-send a command
    pool = CountingPool.from_url(
        url,
        max_connections=pool_size(config, purpose),
        timeout=config.pool_timeout,
        **kwargs,
    )
    pool.connection_class = connection_class
    return pool
