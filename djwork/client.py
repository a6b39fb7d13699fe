"""Writing jobs to Redis: push now, schedule for later, push many in one round trip.

A push is ``LPUSH queue:<name>`` plus ``SADD queues <name>`` in one pipeline.
The LPUSH is the write that matters; the SADD only feeds listings, so its
failure (the ``queues`` key holding the wrong type, say) is logged, never
raised — raising would make the caller push the job a second time. Neither
is replayed after a lost reply: only a connect-phase failure, which proves
nothing was sent, re-sends the pipeline.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from djwork import keys
from djwork import redis as redis_layer
from djwork.conf import Config, get_config
from djwork.key_types import WrongTypeKey, command_keys, is_wrong_type, name_culprits
from djwork.middleware import resolve_all, run_client_chain
from djwork.payload import dumps

logger = logging.getLogger("djwork.client")


class EnqueueError(RedisConnectionError):
    """Writing jobs failed on the connection; ``written`` says what the caller may assume.

    ``written`` is False when the error proves nothing reached Redis (the
    dial failed, no pooled connection was free): enqueueing again is safe.
    It is None when the command may have run and only its reply was lost:
    enqueueing again may run the job twice. A redis-py ``ConnectionError``
    still, so code written for redis-py's errors keeps catching it.
    """

    def __init__(self, message: str, jids: list[str], written: bool | None) -> None:
        super().__init__(message)
        self.jids = jids
        self.written = written


class EnqueueTimeoutError(EnqueueError, RedisTimeoutError):
    """The write was sent and no reply came in time (``written`` is None); a redis-py ``TimeoutError`` too."""


def _write(commands: list[tuple[Any, ...]], jids: list[str]) -> list[Any]:
    """One pipelined round trip (never replayed after a send), its connection failure told as an EnqueueError."""
    try:
        return redis_layer.run(lambda conn: _pipelined(conn, commands))
    except (redis_layer.ConnectPhaseError, redis_layer.PoolExhaustedError) as error:
        raise EnqueueError(f"{_jobs(jids)} not written: {error}", jids, written=False) from error
    except (RedisConnectionError, RedisTimeoutError) as error:
        kind = EnqueueTimeoutError if isinstance(error, RedisTimeoutError) else EnqueueError
        raise kind(f"{_jobs(jids)} may or may not have been written (the connection failed after the "
                           f"write was sent; enqueueing again may run it twice): {error}", jids,
                           written=None) from error


def _jobs(jids: list[str]) -> str:
    return f"job {jids[0]}" if len(jids) == 1 else f"{len(jids)} jobs ({jids[0]}, ...)"


@functools.lru_cache(maxsize=4)
def client_chain(config: Config) -> tuple[Any, ...]:
    return resolve_all(config.client_middleware)


def _check_listing_replies(replies: list[Any], what: str) -> None:
    for reply in replies:
        if isinstance(reply, Exception):
            logger.error("djwork: %s failed (the job itself is queued): %s", what, reply)


def _raise_push_error(reply: Any, command: tuple[Any, ...]) -> None:
    if not isinstance(reply, Exception):
        return
    if is_wrong_type(reply):
        # Redis's reply names no key: say which one, and how to free it.
        key = command_keys(command)[0]
        try:
            types: Any = [redis_layer.run(lambda conn: conn.type(key), idempotent=True)]
        except Exception as lookup_error:  # the push error must surface, named or not
            types = lookup_error
        named = name_culprits(reply, f"the push to {key} (the job was not written)", [key], types)
        raise WrongTypeKey(f"{named}. djwork.key_guard.quarantine_if_wrong_type({key!r}) moves the key aside "
                           f"(a running worker's key guard does so within a minute)",
                           named.keys, named.found, named.expected) from reply
    raise reply


def _pipelined(conn: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """``commands`` in one round trip on a pooled connection (djwork.redis.exchange).

    Failures propagate unchanged to the replay policy in djwork.redis, whose
    connection class also counts the replies and marks dial failures as
    connect phase.
    """
    pool = conn.connection_pool
    connection = pool.get_connection()
    try:
        return redis_layer.exchange(connection, commands)
    finally:
        pool.release(connection)


def push(payload: dict[str, Any], *, at: float | None = None) -> str | None:
    """Write one job (now, or at epoch ``at``); returns its jid, or None if middleware stopped it."""
    config = get_config()
    queue = payload.get("queue") or "default"
    chain = client_chain(config)
    if chain:
        payload = run_client_chain(chain, payload, queue)
        if payload is None:
            return None
        queue = payload.get("queue") or queue
    payload.pop("at", None)  # a stored "at" re-schedules the job when it comes due (docs/wire.md, Jobs)
    if at is not None and at > time.time():
        payload.pop("enqueued_at", None)
        raw = dumps(payload)
        command: tuple[Any, ...] = ("ZADD", keys.SCHEDULE, repr(float(at)), raw)
        replies = _write([command], [payload["jid"]])
        _raise_push_error(replies[0], command)
        return payload["jid"]
    payload["enqueued_at"] = time.time()
    raw = dumps(payload)
    commands = [("LPUSH", keys.queue(queue), raw), ("SADD", keys.QUEUES, queue)]
    replies = _write(commands, [payload["jid"]])
    _raise_push_error(replies[0], commands[0])
    _check_listing_replies(replies[1:], f"SADD queues {queue}")
    return payload["jid"]


def push_bulk(payloads: Iterable[dict[str, Any]], *, at: float | None = None) -> list[str | None]:
    """Write many jobs in one pipelined round trip; one LPUSH per queue keeps FIFO order."""
    config = get_config()
    chain = client_chain(config)
    now = time.time()
    by_queue: dict[str, list[str]] = {}
    scheduled: dict[str, float] = {}
    jids: list[str | None] = []
    for payload in payloads:
        queue = payload.get("queue") or "default"
        if chain:
            payload = run_client_chain(chain, payload, queue)
            if payload is None:
                jids.append(None)
                continue
            queue = payload.get("queue") or queue
        payload.pop("at", None)
        if at is not None and at > now:
            payload.pop("enqueued_at", None)
            scheduled[dumps(payload)] = float(at)
        else:
            payload["enqueued_at"] = now
            by_queue.setdefault(queue, []).append(dumps(payload))
        jids.append(payload["jid"])
    if not by_queue and not scheduled:
        return jids

    commands: list[tuple[Any, ...]] = [("LPUSH", keys.queue(queue), *raws) for queue, raws in by_queue.items()]
    if scheduled:
        commands.append(("ZADD", keys.SCHEDULE, *(part for raw, score in scheduled.items()
                                                   for part in (repr(score), raw))))
    if by_queue:
        commands.append(("SADD", keys.QUEUES, *by_queue))
    replies = _write(commands, [jid for jid in jids if jid is not None])
    writes = len(by_queue) + (1 if scheduled else 0)
    for reply, command in zip(replies[:writes], commands, strict=False):
        _raise_push_error(reply, command)
    _check_listing_replies(replies[writes:], "SADD queues")
    return jids
