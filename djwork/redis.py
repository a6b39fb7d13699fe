"""Redis connections and the replay (apply-safety) policy — the only module that makes pools.

A Redis call that fails on the network leaves the server state unknown: the
command may have run and only its reply been lost. Replaying it then doubles a
push, re-zeroes a counter, or discards what a destructive read took (seed 002,
wurk's redis_pool.rb). So a block of Redis work is re-run only when that is
provably safe:

* the caller marked it ``idempotent=True`` (pure reads, owner-CAS scripts,
  writes whose repeat is a no-op): exponential backoff with jitter up to a
  cap, ``REDIS_MAX_ATTEMPTS`` tries in all;
* or the error is connect-phase (``ConnectPhaseError``: the socket never
  carried our command) *and* the block has completed no round trip yet —
  one completed reply voids the proof for everything before the failing
  command;
* READONLY / failover replies: once, immediately, after dropping the pool's
  idle connections so the next dial reaches the new primary — and, for a
  non-idempotent block, only if no *other* round trip completed first (the
  failover reply itself is a refusal, not a round trip);
* pool exhaustion (no connection free within ``POOL_TIMEOUT``): once, and
  under the same "no round trip yet" rule for a non-idempotent block.

redis-py's own retry is switched off on every pool (``Retry(NoBackoff(), 0)``),
because it re-sends the in-flight command after a reconnect — exactly the
replay this module exists to control. Every retry, refusal and give-up is
logged and reported to the telemetry hooks.

Usage::

    value = run(lambda conn: conn.get("k"), idempotent=True)

    for attempt in attempts(idempotent=False):
        with attempt as conn:
            conn.lpush(...)
            conn.sadd(...)

(A bare ``with`` block cannot re-run its own body in Python, hence the
``attempts()`` loop; see docs/architecture.md.)
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlparse

import redis as redis_py
from redis.backoff import NoBackoff
from redis.exceptions import BusyLoadingError, MasterDownError, ReadOnlyError, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry

logger = logging.getLogger("djwork.redis")
T = TypeVar("T")

FAILOVER_PREFIXES = ("READONLY", "NOREPLICAS", "UNBLOCKED", "MASTERDOWN", "LOADING")


class ConnectPhaseError(RedisConnectionError):
    """Raised while dialing or handshaking: the caller's command never left this host."""


class PoolExhaustedError(RedisConnectionError):
    """No pooled connection became free within POOL_TIMEOUT."""


class RedisReplayRefused(RedisConnectionError):
    """A connection error hit a block that may already have applied, so it was not replayed."""


def _is_failover_reply(error: BaseException) -> bool:
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
            if not _is_failover_reply(error):
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


class _Pool(redis_py.BlockingConnectionPool):
    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().get_connection(*args, **kwargs)
        except ConnectPhaseError:
            raise
        except RedisConnectionError as error:
            if "No connection available" in str(error):
                raise PoolExhaustedError(str(error)) from error
            raise


@dataclass(frozen=True)
class RedisEvent:
    """What the telemetry hook receives for every retry, refusal and give-up."""

    kind: str  # "retry" | "refused" | "gave_up"
    reason: str  # "connect" | "idempotent" | "failover" | "pool" | "unsafe"
    error: BaseException
    attempt: int
    purpose: str
    idempotent: bool


_listeners: list[Callable[[RedisEvent], None]] = []


def add_listener(listener: Callable[[RedisEvent], None]) -> None:
    """Register a telemetry hook (in addition to settings.DJWORK['REDIS_EVENT_HOOK'])."""
    _listeners.append(listener)


def remove_listener(listener: Callable[[RedisEvent], None]) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


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


class RedisLayer:
    """One process's pools, one per purpose, built lazily; rebuilt after fork."""

    PURPOSES = ("default", "fetch", "heartbeat", "admin")

    def __init__(self, config: Any) -> None:
        self.config = config
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._clients: dict[str, redis_py.Redis] = {}
        self._hook = self._resolve_hook(config.redis_event_hook)

    @staticmethod
    def _resolve_hook(hook: Any) -> Callable[[RedisEvent], None] | None:
        if hook is None or callable(hook):
            return hook
        from django.utils.module_loading import import_string

        return import_string(hook)

    def url_and_options(self) -> tuple[str, dict[str, Any]]:
        if self.config.cache:
            url, extra = connection_kwargs_from_cache(self.config.cache)
        else:
            url, extra = self.config.redis_url, {}
        return url, {**extra, **self.config.redis_options}

    def pool_size(self, purpose: str) -> int:
        if self.config.pool_size:
            return int(self.config.pool_size)
        total_concurrency = sum(capsule.concurrency for capsule in self.config.capsules)
        if purpose == "fetch":
            return total_concurrency + 2 * len(self.config.queue_names) + 4
        return total_concurrency + 10

    def client(self, purpose: str = "default") -> redis_py.Redis:
        client = self._clients.get(purpose)
        if client is not None:
            return client
        with self._lock:
            client = self._clients.get(purpose)
            if client is None:
                client = redis_py.Redis(connection_pool=self._make_pool(purpose))
                self._clients[purpose] = client
        return client

    def _make_pool(self, purpose: str) -> _Pool:
        url, options = self.url_and_options()
        parsed = urlparse(url)
        connection_class: type = CountingConnection
        if parsed.scheme == "unix":
            connection_class = CountingUnixConnection
        elif parsed.scheme == "rediss":
            connection_class = CountingSSLConnection
        # Blocking fetches wait server-side up to FETCH_TIMEOUT; the socket must
        # outlast that or every idle fetch would surface as a read timeout.
        socket_timeout = self.config.socket_timeout
        if purpose == "fetch":
            socket_timeout = max(socket_timeout, self.config.fetch_timeout + self.config.socket_timeout)
        kwargs: dict[str, Any] = {
            "socket_connect_timeout": self.config.connect_timeout,
            "socket_timeout": socket_timeout,
            "retry_on_timeout": False,
            "health_check_interval": 0,
            "client_name": f"djwork-{purpose}",
            **options,
        }
        kwargs["retry"] = Retry(NoBackoff(), 0)  # never let redis-py re-send a command
        pool = _Pool.from_url(
            url,
            max_connections=self.pool_size(purpose),
            timeout=self.config.pool_timeout,
            **kwargs,
        )
        pool.connection_class = connection_class
        return pool

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, {}
        for client in clients.values():
            try:
                client.connection_pool.disconnect()
            except Exception:  # pragma: no cover - teardown must not raise
                logger.debug("pool disconnect failed", exc_info=True)

    # --- the policy ---------------------------------------------------------
    def run(self, block: Callable[[redis_py.Redis], T], *, idempotent: bool = False,
            purpose: str = "default") -> T:
        for attempt in self.attempts(idempotent=idempotent, purpose=purpose):
            with attempt as conn:
                return block(conn)
        raise AssertionError("unreachable: attempts() raises on its final failure")

    def attempts(self, *, idempotent: bool = False, purpose: str = "default") -> Iterator[_Attempt]:
        state = _AttemptState(self, idempotent, purpose)
        while not state.done:
            state.number += 1
            yield _Attempt(state)

    def notify(self, event: RedisEvent) -> None:
        level = logging.ERROR if event.kind == "gave_up" else logging.WARNING
        logger.log(level, "redis %s (%s) attempt %d purpose=%s idempotent=%s: %s: %s",
                   event.kind, event.reason, event.attempt, event.purpose, event.idempotent,
                   type(event.error).__name__, event.error)
        for listener in [self._hook, *_listeners]:
            if listener is None:
                continue
            try:
                listener(event)
            except Exception:
                logger.exception("redis telemetry hook failed")

    def backoff_delay(self, attempt: int) -> float:
        base = self.config.redis_backoff_base * (2 ** (attempt - 1))
        return min(self.config.redis_backoff_cap, base) * (0.5 + random.random() / 2)


class _AttemptState:
    def __init__(self, layer: RedisLayer, idempotent: bool, purpose: str) -> None:
        self.layer = layer
        self.idempotent = idempotent
        self.purpose = purpose
        self.number = 0
        self.done = False
        self.failover_retried = False
        self.pool_retried = False


class _Attempt:
    """One try of a block: a context manager that decides, on error, whether another try follows."""

    def __init__(self, state: _AttemptState) -> None:
        self.state = state
        self.odometer = 0

    def __enter__(self) -> redis_py.Redis:
        self.odometer = round_trips()
        return self.state.layer.client(self.state.purpose)

    def __exit__(self, exc_type: Any, error: BaseException | None, _tb: Any) -> bool:
        state = self.state
        if error is None:
            state.done = True
            return False
        if not isinstance(error, RedisError):
            state.done = True
            return False
        dirty = round_trips() != self.odometer
        reason = self._classify(error)
        if reason is None:
            state.done = True
            return False
        layer = state.layer
        make_event = lambda kind, why: RedisEvent(  # noqa: E731
            kind, why, error, state.number, state.purpose, state.idempotent)
        safe = state.idempotent or (not dirty and reason in ("connect", "failover", "pool"))
        if not safe:
            # Pool exhaustion proves only the *failing* command never left; an
            # earlier completed round trip of the block may have applied, so a
            # replay could double it — same rule as connect phase.
            layer.notify(make_event("refused", "unsafe"))
            state.done = True
            return False
        if reason == "pool":
            if state.pool_retried:
                layer.notify(make_event("gave_up", "pool"))
                state.done = True
                return False
            state.pool_retried = True
            layer.notify(make_event("retry", "pool"))
            time.sleep(random.uniform(0.01, 0.05))
            return True
        if reason == "failover":
            if state.failover_retried:
                layer.notify(make_event("gave_up", "failover"))
                state.done = True
                return False
            state.failover_retried = True
            layer.notify(make_event("retry", "failover"))
            # Idle connections only (ours was released before we got here):
            # closing sockets other threads are mid-command on would fail their
            # commands after they may have applied (and cut blocking fetches).
            layer.client(state.purpose).connection_pool.disconnect(inuse_connections=False)
            return True
        if state.number >= layer.config.redis_max_attempts:
            layer.notify(make_event("gave_up", "idempotent" if state.idempotent else "connect"))
            state.done = True
            return False
        layer.notify(make_event("retry", "idempotent" if state.idempotent else "connect"))
        time.sleep(layer.backoff_delay(state.number))
        return True

    @staticmethod
    def _classify(error: BaseException) -> str | None:
        if isinstance(error, PoolExhaustedError):
            return "pool"
        if _is_failover_reply(error):
            return "failover"
        if isinstance(error, ConnectPhaseError):
            return "connect"
        if isinstance(error, (RedisConnectionError, redis_py.TimeoutError)):
            return "unknown"
        return None


_layer: RedisLayer | None = None
_layer_lock = threading.Lock()


def get_layer() -> RedisLayer:
    """This process's RedisLayer; a forked child builds its own (no parent sockets survive)."""
    global _layer
    layer = _layer
    if layer is not None and layer.pid == os.getpid():
        return layer
    with _layer_lock:
        if _layer is None or _layer.pid != os.getpid():
            from djwork.conf import get_config

            _layer = RedisLayer(get_config())
        return _layer


def use_config(config: Any) -> None:
    """Build this process's pools from ``config`` (a worker's, with its command-line overrides).

    Pools are sized from concurrency and queue count: built from settings alone,
    ``runworkers -c 50`` would starve its own processors of connections.
    """
    global _layer
    with _layer_lock:
        if _layer is not None and _layer.pid == os.getpid() and _layer.config is config:
            return
        old, _layer = _layer, RedisLayer(config)
    if old is not None and old.pid == os.getpid():
        old.close()


def reset() -> None:
    """Drop this process's pools (settings changed, or a forked child starting fresh)."""
    global _layer
    with _layer_lock:
        old, _layer = _layer, None
    if old is not None and old.pid == os.getpid():
        old.close()


def _after_fork_in_child() -> None:
    # The child must not touch the parent's sockets or locks: forget them
    # without closing (closing would send QUIT on the parent's connections).
    global _layer, _layer_lock
    _layer = None
    _layer_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def run(block: Callable[[redis_py.Redis], T], *, idempotent: bool = False, purpose: str = "default") -> T:
    """Run ``block(conn)`` under the replay policy (see the module docstring)."""
    return get_layer().run(block, idempotent=idempotent, purpose=purpose)


def attempts(*, idempotent: bool = False, purpose: str = "default") -> Iterator[_Attempt]:
    return get_layer().attempts(idempotent=idempotent, purpose=purpose)


def client(purpose: str = "default") -> redis_py.Redis:
    """The raw pooled client, for callers that handle errors themselves (the health probe's PING)."""
    return get_layer().client(purpose)


def exchange(connection: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """Send ``commands`` in one write and read every reply: one round trip, as a pipeline.

    The same wire exchange as ``pipeline(transaction=False)...execute(raise_on_error=False)``
    (error replies come back as exception objects in their place) without
    building a Pipeline object, which costs more client CPU than a push. Any
    other failure disconnects, so a half-read socket is never used again,
    and propagates to the caller.
    """
    try:
        connection.send_packed_command(connection.pack_commands(commands))
        replies: list[Any] = []
        for _command in commands:
            try:
                replies.append(connection.read_response())
            except ResponseError as error:
                replies.append(error)
        return replies
    except BaseException:
        connection.disconnect()
        raise


def dedicated_connection(purpose: str = "fetch", layer: RedisLayer | None = None) -> Any:
    """A connection of its own, outside the pool, with the pool's settings and timeouts.

    For a thread that blocks on a queue: another thread interrupts that block
    with CLIENT UNBLOCK, which needs the id of a connection nobody else uses.
    Taken from the pool instead, it would also starve the pool of a slot for
    as long as the thread lives. The caller handles errors and disconnects.
    """
    pool = (layer or get_layer()).client(purpose).connection_pool
    return pool.connection_class(**pool.connection_kwargs)


class DedicatedConnection:
    """One caller's own connection, outside the pool, under the policy's connect-phase rule.

    For a caller that runs one round trip at a time and often (the worker's
    batch fetch): no pool checkout and release around each. Before each use
    it is checked for EOF, as redis-py's pool checks a connection it lends,
    so a socket the server closed (restart, idle timeout) is redialled
    instead of failing after the send. A failed dial is retried once (the
    command never left this host); any later failure drops the connection
    and propagates, since the command may have run.
    """

    def __init__(self, purpose: str, layer: RedisLayer | None = None) -> None:
        self.purpose = purpose
        self._layer = layer  # None: the settings' layer, looked up at each use (it can be replaced)
        self._connection: Any = None

    def run(self, block: Callable[[Any], T]) -> T:
        for attempt in (1, 2):
            connection = self._open()
            try:
                return block(connection)
            except ConnectPhaseError as error:
                self.close()
                layer = self._layer or get_layer()
                if attempt == 2:
                    layer.notify(RedisEvent("gave_up", "connect", error, attempt, self.purpose, False))
                    raise
                layer.notify(RedisEvent("retry", "connect", error, attempt, self.purpose, False))
            except BaseException:
                self.close()
                raise
        raise AssertionError("unreachable: the second attempt returns or raises")

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.disconnect()
            except Exception:  # pragma: no cover - teardown must not raise
                pass

    def _open(self) -> Any:
        if self._connection is None:
            self._connection = dedicated_connection(self.purpose, self._layer)
            return self._connection
        try:
            stale = self._connection.can_read()
        except (RedisError, OSError):
            stale = True
        if stale:
            self._connection.disconnect()  # redialled by the next send, as connect phase
        return self._connection
