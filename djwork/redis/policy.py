"""The replay (apply-safety) policy: when a failed block of Redis work may run again.

The rules are described in djwork.redis's docstring, which is where callers
look; this module holds ``RedisLayer`` (one process's pools, one per purpose)
and the attempt loop that applies the rules, and reports every retry,
refusal and give-up to the log and the telemetry hooks.
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

import redis as redis_py
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from djwork.redis.cluster import close_client, drop_idle_connections, make_cluster_client
from djwork.redis.cluster_url import cluster_url, is_cluster_url
from djwork.redis.connections import (
    ConnectPhaseError,
    PoolExhaustedError,
    is_failover_reply,
    make_pool,
    pool_size,
    round_trips,
    url_and_options,
)
from djwork.redis.naming import NamingRedis
from djwork.redis.outage import tracker as outage
from djwork.settings.conf import Config

logger = logging.getLogger("djwork.redis")
T = TypeVar("T")


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


class RedisLayer:
    """One process's pools, one per purpose, built lazily; rebuilt after fork."""

    PURPOSES = ("default", "fetch", "heartbeat", "admin")

    def __init__(self, config: Config) -> None:
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
        return url_and_options(self.config)

    def pool_size(self, purpose: str) -> int:
        return pool_size(self.config, purpose)

    def client(self, purpose: str = "default") -> redis_py.Redis:
        client = self._clients.get(purpose)
        if client is not None:
            return client
        with self._lock:
            client = self._clients.get(purpose)
            if client is None:
                client = self._make_client(purpose)
                self._clients[purpose] = client
        return client

    def _make_client(self, purpose: str) -> redis_py.Redis:
        url, options = url_and_options(self.config)
        if is_cluster_url(url):
            return make_cluster_client(cluster_url(url), options, self.config, purpose)
        # NamingRedis: a WRONGTYPE reply names its key and reports it to the key guard.
        return NamingRedis(connection_pool=make_pool(self.config, purpose))

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, {}
        for client in clients.values():
            try:
                close_client(client)
            except Exception:  # pragma: no cover - teardown must not raise
                logger.debug("pool disconnect failed", exc_info=True)

    def run(self, block: Callable[[redis_py.Redis], T], *, idempotent: bool = False,
            purpose: str = "default") -> T:
        for attempt in self.attempts(idempotent=idempotent, purpose=purpose):
            with attempt as conn:
                return block(conn)
        raise AssertionError("unreachable: attempts() raises on its final failure")

    def attempts(self, *, idempotent: bool = False, purpose: str = "default") -> Iterator[Attempt]:
        state = _AttemptState(self, idempotent, purpose)
        while not state.done:
            state.number += 1
            yield Attempt(state)

    def notify(self, event: RedisEvent) -> None:
        level = logging.ERROR if event.kind == "gave_up" else logging.WARNING
        if outage.declared:
            level = logging.DEBUG  # the outage's own lines say it; listeners still get every event
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
        self.retried_once: set[str] = set()  # "pool", "failover": the reasons retried once at most


class Attempt:
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
            outage.succeeded("redis")  # no lock unless something was failing
            return False
        if not isinstance(error, RedisError):
            state.done = True
            return False
        dirty = round_trips() != self.odometer
        reason = self.classify(error)
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
        if reason in ("pool", "failover"):
            if reason in state.retried_once:
                layer.notify(make_event("gave_up", reason))
                state.done = True
                return False
            state.retried_once.add(reason)
            layer.notify(make_event("retry", reason))
            if reason == "pool":
                time.sleep(random.uniform(0.01, 0.05))
            else:
                # Idle connections only (ours was released before we got here):
                # closing sockets other threads are mid-command on would fail their
                # commands after they may have applied (and cut blocking fetches).
                drop_idle_connections(layer.client(state.purpose))
            return True
        if state.number >= layer.config.redis_max_attempts:
            layer.notify(make_event("gave_up", "idempotent" if state.idempotent else "connect"))
            state.done = True
            return False
        if isinstance(error, ConnectPhaseError):
            outage.dial_failed(error)
        layer.notify(make_event("retry", "idempotent" if state.idempotent else "connect"))
        time.sleep(layer.backoff_delay(state.number))
        return True

    @staticmethod
    def classify(error: BaseException) -> str | None:
        """The policy's name for a failure: pool, failover, connect, unknown (may have run), or None (not ours)."""
        if isinstance(error, PoolExhaustedError):
            return "pool"
        if is_failover_reply(error):
            return "failover"
        if isinstance(error, ConnectPhaseError):
            return "connect"
        if isinstance(error, (RedisConnectionError, redis_py.TimeoutError)):
            return "unknown"
        return None
