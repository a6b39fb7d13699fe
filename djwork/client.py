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

from djwork import keys
from djwork import redis as redis_layer
from djwork.conf import Config, get_config
from djwork.middleware import resolve_all, run_client_chain
from djwork.payload import dumps

logger = logging.getLogger("djwork.client")


@functools.lru_cache(maxsize=4)
def client_chain(config: Config) -> tuple[Any, ...]:
    return resolve_all(config.client_middleware)


def _check_listing_replies(replies: list[Any], what: str) -> None:
    for reply in replies:
        if isinstance(reply, Exception):
            logger.error("djwork: %s failed (the job itself is queued): %s", what, reply)


def _raise_push_error(reply: Any) -> None:
    if isinstance(reply, Exception):
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
        replies = redis_layer.run(lambda conn: _pipelined(conn, [("ZADD", keys.SCHEDULE, repr(float(at)), raw)]))
        _raise_push_error(replies[0])
        return payload["jid"]
    payload["enqueued_at"] = time.time()
    raw = dumps(payload)
    commands = [("LPUSH", keys.queue(queue), raw), ("SADD", keys.QUEUES, queue)]
    replies = redis_layer.run(lambda conn: _pipelined(conn, commands))
    _raise_push_error(replies[0])
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
    replies = redis_layer.run(lambda conn: _pipelined(conn, commands))
    writes = len(by_queue) + (1 if scheduled else 0)
    for reply in replies[:writes]:
        _raise_push_error(reply)
    _check_listing_replies(replies[writes:], "SADD queues")
    return jids
