"""djwork's way to Redis: the replay (apply-safety) policy over one process's pools.

Nothing outside this module and the two it is split into
(djwork.redis.policy, djwork.redis.connections) makes a connection.

A Redis call that fails on the network leaves the server state unknown: the
command may have run and only its reply been lost. Replaying it then doubles a
push, re-zeroes a counter, or discards what a destructive read took. So a
block of Redis work is re-run only when that is provably safe:

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

With a ``redis+sentinel://`` REDIS_URL every connection goes to the master
Sentinel names, and leaves a server Sentinel stopped naming before its next
command (djwork.redis.connections.MasterWatch); READONLY from a demoted
master is a failover reply like the others, never a ConnectionError.

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

This module is the entry point: one ``RedisLayer`` per process (the policy
is in djwork.redis.policy, what a connection records for it in
djwork.redis.connections), plus the two ways to talk to Redis outside a
pool: ``exchange`` (a pipeline's round trip without the Pipeline object) and
``DedicatedConnection`` (one caller's own connection).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import redis as redis_py
from django.core.signals import setting_changed
from redis.exceptions import RedisError, ResponseError

try:  # redis[hiredis] is a dependency; a build without it still works through redis-py's packer
    from hiredis import pack_command as _pack_command
except ImportError:  # pragma: no cover
    _pack_command = None

from djwork.redis.cluster_exchange import exchange_by_node
from djwork.redis.connections import (
    FAILOVER_PREFIXES,
    ConnectPhaseError,
    CountingConnection,
    CountingSSLConnection,
    CountingUnixConnection,
    PoolExhaustedError,
    connection_kwargs_from_cache,
    is_failover_reply,
    round_trips,
)
from djwork.redis.policy import Attempt, RedisEvent, RedisLayer, add_listener, remove_listener
from djwork.settings.conf import Config, get_config

__all__ = [
    "FAILOVER_PREFIXES", "Attempt", "ConnectPhaseError", "CountingConnection", "CountingSSLConnection",
    "CountingUnixConnection", "DedicatedConnection", "PoolExhaustedError", "RedisEvent", "RedisLayer",
    "add_listener", "attempts", "client", "connection_kwargs_from_cache", "dedicated_connection", "exchange",
    "exchange_on",
    "get_layer", "remove_listener", "reset", "round_trips", "run", "use_config",
]
T = TypeVar("T")

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
            _layer = RedisLayer(get_config())
        return _layer


def use_config(config: Config) -> None:
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


def _reset_on_setting_changed(*, setting: str, **_kwargs: Any) -> None:
    # Pools built from the old settings would keep dialling the old server
    # (override_settings in tests, a changed CACHES alias) after the config
    # itself was rebuilt; djwork.settings.conf clears its own cache on the same signal.
    if setting in ("DJWORK", "CACHES"):
        reset()


setting_changed.connect(_reset_on_setting_changed, dispatch_uid="djwork.redis.reset")


def run(block: Callable[[redis_py.Redis], T], *, idempotent: bool = False, purpose: str = "default") -> T:
    """Run ``block(conn)`` under the replay policy (see the module docstring)."""
    return get_layer().run(block, idempotent=idempotent, purpose=purpose)


def attempts(*, idempotent: bool = False, purpose: str = "default") -> Iterator[Attempt]:
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
    and propagates to the caller. When *every* reply is a failover refusal
    (READONLY, NOREPLICAS, LOADING, ...) the first is raised instead: nothing
    ran, and raised inside a ``run()`` block it is replayed on the new
    primary, where returned it would reach the caller as a plain error.
    """
    try:
        connection.send_packed_command(pack(connection, commands))
        replies: list[Any] = []
        for _command in commands:
            try:
                replies.append(connection.read_response())
            except ResponseError as error:
                replies.append(error)
    except BaseException:
        connection.disconnect()
        raise
    if replies and all(isinstance(reply, ResponseError) and is_failover_reply(reply) for reply in replies):
        raise replies[0]
    return replies


def exchange_on(client: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """``exchange`` on ``client``: one pooled connection's round trip, or one per node of a cluster.

    A cluster's client has no connection of its own: each command goes to the node that owns its
    key (djwork.redis.cluster_exchange), the nodes' round trips overlapping.
    """
    if isinstance(client, redis_py.RedisCluster):
        return exchange_by_node(client, commands, pack)
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        return exchange(connection, commands)
    finally:
        pool.release(connection)


def pack(connection: Any, commands: list[tuple[Any, ...]]) -> Any:
    """The commands in RESP, packed by hiredis in C when every argument is str, bytes, int or float.

    redis-py's packer runs a Python encode call per argument before handing
    the tuple to hiredis; for a unique push's eleven arguments that was a
    fifth of the enqueue's client CPU. Anything hiredis refuses (a
    memoryview, a bool) takes redis-py's own packer and its checks.
    """
    if _pack_command is not None:
        try:
            return [b"".join([_pack_command(command) for command in commands])]
        except TypeError:
            pass
    return connection.pack_commands(commands)


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
    command never left this host), and so is a failover reply (READONLY,
    NOREPLICAS, ...: the server refused the command) to a block that had no
    other reply yet, on a new connection, which reaches the new primary (or
    asks Sentinel where it is). Any other failure drops the connection and
    propagates, since the command may have run.
    """

    def __init__(self, purpose: str, layer: RedisLayer | None = None) -> None:
        self.purpose = purpose
        self._layer = layer  # None: the settings' layer, looked up at each use (it can be replaced)
        self._connection: Any = None

    def run(self, block: Callable[[Any], T]) -> T:
        for attempt in (1, 2):
            connection = self._open()
            odometer = round_trips()
            try:
                return block(connection)
            except (ConnectPhaseError, ResponseError) as error:
                self.close()
                reason = "connect" if isinstance(error, ConnectPhaseError) else "failover"
                # A refusal after another reply of the block: what that one did may not bear repeating.
                if reason == "failover" and (not is_failover_reply(error) or round_trips() != odometer):
                    raise
                layer = self._layer or get_layer()
                if attempt == 2:
                    layer.notify(RedisEvent("gave_up", reason, error, attempt, self.purpose, False))
                    raise
                layer.notify(RedisEvent("retry", reason, error, attempt, self.purpose, False))
            except BaseException:
                self.close()
                raise
        raise AssertionError("unreachable: the second attempt returns or raises")

    def receive(self, block: Callable[[Any], T], replay: Callable[[Any], T] | None = None) -> T:
        """Read what a ``run`` block sent without waiting (a reply in flight), never checking the socket first.

        The staleness check of ``run`` would take the awaited reply for a
        closed socket's EOF; and a reply lost here may hide what the command
        did, so any failure drops the connection and propagates. Except a
        failover refusal (READONLY, ...): nothing ran, so ``replay`` (send and
        read it again) goes through ``run`` on a new connection, as a refusal
        inside ``run`` would.
        """
        connection = self._connection
        if connection is None:
            raise redis_py.exceptions.ConnectionError("djwork: the fetch connection was closed with a reply in flight")
        try:
            return block(connection)
        except ResponseError as error:
            self.close()
            if replay is None or not is_failover_reply(error):
                raise
            (self._layer or get_layer()).notify(RedisEvent("retry", "failover", error, 1, self.purpose, False))
            return self.run(replay)
        except BaseException:
            self.close()
            raise

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
