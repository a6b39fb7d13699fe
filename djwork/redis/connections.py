"""What a djwork connection is: it counts round trips and marks a failed dial as connect phase.

The replay policy (djwork.redis.policy) decides from two facts this module
records: whether a failure happened before the command left this host
(``ConnectPhaseError``, ``PoolExhaustedError``), and whether the block had
already completed a round trip (``round_trips()``). Pools are built here too,
with redis-py's own retry switched off: it re-sends the in-flight command
after a reconnect, which is exactly the replay the policy exists to control.
A ``redis+sentinel://`` URL gets redis-py's Sentinel pool made blocking and
counting, whose connections follow the master Sentinel names (``MasterWatch``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import redis as redis_py
from redis.backoff import NoBackoff
from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    MasterDownError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection

from djwork.settings.conf import Config
from djwork.settings.kinds import SentinelUrl, is_sentinel_url, sentinel_url

logger = logging.getLogger("djwork.redis")
MASTER_CHECK_INTERVAL = 1.0  # seconds between two questions to Sentinel about where the master is

# CLUSTERDOWN and TRYAGAIN: a Redis Cluster node refusing a command while its slots move or fail over.
FAILOVER_PREFIXES = ("READONLY", "NOREPLICAS", "UNBLOCKED", "MASTERDOWN", "LOADING", "CLUSTERDOWN", "TRYAGAIN")


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
    if isinstance(error, (ReadOnlyError, BusyLoadingError, MasterDownError, ClusterDownError, TryAgainError)):
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


class MasterWatch:
    """Where Sentinel says the master is: asked again at most every ``interval`` seconds, or at the next use
    after a server refused a command as a replica (READONLY) or for want of replicas (NOREPLICAS).

    redis-py's sentinel pool asks only when it dials, so a connection opened
    before a failover would talk to the old master for as long as it lives:
    Sentinel turns a demoted master into a replica only seconds after the
    switch, and until then that server acknowledges writes the new master
    never sees. One watch per pool, shared by the pool's dedicated connections.
    """

    def __init__(self, pool: SentinelConnectionPool, interval: float) -> None:
        self.proxy = pool.proxy  # what redis-py's connections hold, not the pool: no reference cycle
        self.interval = interval
        self._due = 0.0
        self._lock = threading.Lock()

    def moved(self, address: tuple[Any, Any]) -> bool:
        """Whether a connection to ``address`` no longer reaches the master Sentinel names."""
        if time.monotonic() >= self._due and self._lock.acquire(blocking=False):
            # One thread asks; the others go on with the address known so far.
            try:
                self._due = time.monotonic() + self.interval
                # Records the new address and closes the pool's idle connections to the old one.
                self.proxy.get_master_address()
            except (RedisError, OSError) as error:
                # No sentinel answers: keep the master we know, a dead one fails on its own.
                logger.debug("djwork: asking Sentinel for the master failed: %s", error)
            finally:
                self._lock.release()
        known = self.proxy.master_address
        return known is not None and tuple(known) != tuple(address)

    def ask_soon(self) -> None:
        self._due = 0.0


class _SentinelMasterConnection(SentinelManagedConnection):
    """redis-py's connection to the master Sentinel names, keeping READONLY a refusal.

    redis-py turns READONLY into a bare ConnectionError, which the replay
    policy must read as "may have run" and so refuse to replay; a READONLY
    reply proves the command did not run, so it stays the failover reply it is.
    The connection that got it is dropped before its next command (after the
    rest of a pipeline's replies are read).
    """

    def __init__(self, *, master_watch: MasterWatch, **kwargs: Any) -> None:
        self.master_watch = master_watch
        self.refused = False
        self._addressed = False
        super().__init__(**kwargs)

    def connect_to(self, address: tuple[str, int]) -> None:
        self._addressed = True
        self.refused = False  # a fresh dial: whatever refused the last command is behind us
        try:
            super().connect_to(address)
        finally:
            self._addressed = False

    def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        # redis-py redials a dropped connection from send_packed_command() and
        # can_read() through here, straight to its last address (localhost:6379
        # for one never connected), without asking Sentinel: ask it.
        if not self._addressed:
            self.connect()
            return
        super().connect_check_health(*args, **kwargs)

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return redis_py.Connection.read_response(self, *args, **kwargs)
        except ResponseError as error:
            if is_failover_reply(error):
                self.refused = True
                self.master_watch.ask_soon()
            raise

    def reason_to_leave(self) -> str | None:
        """Why this connection must carry no further command: a refusal, or Sentinel naming another master."""
        if self.refused:
            self.refused = False
            return "refused the last command (READONLY, NOREPLICAS, ...)"
        if self.master_watch.moved((self.host, self.port)):
            return "is no longer the master Sentinel names"
        return None


class CountingSentinelConnection(_RoundTripCounting, _SentinelMasterConnection):
    """A counting connection to the master Sentinel names, redialled when Sentinel names another.

    Checked before each checkout from the pool (the pool calls ``connect()``)
    and before each send on a connection held outside the pool: a move
    found at the send is a ``ConnectPhaseError`` (the command never left),
    so the caller's policy decides whether the block runs again.
    """

    def connect(self, *args: Any, **kwargs: Any) -> None:
        if getattr(self, "_sock", None) is not None and self.reason_to_leave():
            self.disconnect()
        super().connect(*args, **kwargs)

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        # Raised, not redialled in place: the caller may hold state on this
        # socket (a WATCH, a taker's client id for CLIENT UNBLOCK).
        reason = self.reason_to_leave() if getattr(self, "_sock", None) is not None else None
        if reason:
            old = f"{self.host}:{self.port}"
            self.disconnect()
            raise ConnectPhaseError(f"not sent: {old} {reason}")
        super().send_packed_command(command, check_health)


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


class CountingSentinelPool(SentinelConnectionPool, CountingPool):
    """A ``CountingPool`` whose connections go to the master Sentinel names (redis-py's pool is not blocking)."""

    def disconnect(self, inuse_connections: bool = True) -> None:
        super().disconnect(inuse_connections)
        if inuse_connections:
            # A full disconnect (the layer closing) leaves no socket open, the sentinels' included.
            self.sentinel_manager.close()


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
    if is_sentinel_url(url):
        return make_sentinel_pool(sentinel_url(url), options, config, purpose)
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


def make_sentinel_pool(url: SentinelUrl, options: dict[str, Any], config: Config, purpose: str) -> CountingSentinelPool:
    """A pool on the master Sentinel names for ``url``, with the same rules as ``make_pool``'s."""
    connect_timeout = url.options.get("socket_connect_timeout", config.connect_timeout)
    reply_timeout = url.options.get("socket_timeout", config.socket_timeout)
    never_resend = Retry(NoBackoff(), 0)
    sentinel_kwargs: dict[str, Any] = {
        "socket_connect_timeout": connect_timeout,
        "socket_timeout": reply_timeout,
        # One try per sentinel: discover_master() moves on to the next one itself.
        "retry": never_resend,
        "username": url.options.get("sentinel_username"),
        "password": url.options.get("sentinel_password"),
    }
    manager = Sentinel(list(url.sentinels), sentinel_kwargs=sentinel_kwargs)
    kwargs: dict[str, Any] = {
        "socket_connect_timeout": connect_timeout,
        "socket_timeout": reply_timeout + config.fetch_timeout if purpose == "fetch" else reply_timeout,
        "retry_on_timeout": False,
        "health_check_interval": 0,
        "client_name": f"djwork-{purpose}",
        "db": url.db,
        "username": url.username,
        "password": url.password,
        **options,
    }
    kwargs["retry"] = never_resend
    pool = CountingSentinelPool(
        url.service_name, manager, max_connections=pool_size(config, purpose), timeout=config.pool_timeout,
        connection_class=CountingSentinelConnection, **kwargs)
    pool.connection_kwargs["master_watch"] = MasterWatch(
        pool, url.options.get("master_check_interval", MASTER_CHECK_INTERVAL))
    return pool
