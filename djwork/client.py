"""Writing jobs to Redis: push now, schedule for later, push many in one round trip.

A push is ``LPUSH queue:<name>`` plus ``SADD queues <name>`` in one pipeline.
The LPUSH is the write that matters; the SADD only feeds listings, so its
failure (the ``queues`` key holding the wrong type, say) is logged, never
raised — raising would make the caller push the job a second time. Neither
is replayed after a lost reply: only a connect-phase failure, which proves
nothing was sent, re-sends the pipeline.

A unique job (djwork/unique.py) is pushed by lua/unique_push.lua instead:
the lock's SET NX and the push in one step, still one round trip, and a
duplicate is answered with the jid holding the lock (``Pushed.duplicate_of``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from djwork import key_reports, keys, push_intercept, scripts, signals
from djwork import redis as redis_layer
from djwork.batches import collect as batch_collect
from djwork.conf import Config, get_config
from djwork.errors import RedisUnavailable
from djwork.key_types import WrongTypeKey, command_keys, is_wrong_type, name_culprits
from djwork.middleware import resolve_all, run_client_chain
from djwork.payload import dumps
from djwork.redis_url import public_location
from djwork.unique import lock_of, lock_ttl_ms

logger = logging.getLogger("djwork.client")


class EnqueueError(RedisUnavailable, RedisConnectionError):
    """Writing jobs failed on the connection; ``written`` says what the caller may assume.

    A ``djwork.RedisUnavailable`` (what djwork raises whenever Redis can't be
    reached), its message naming the Redis without its password.

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
        raise EnqueueError(f"{_jobs(jids)} not written: Redis at {public_location()} is unreachable ({error})",
                           jids, written=False) from error
    except (RedisConnectionError, RedisTimeoutError) as error:
        kind = EnqueueTimeoutError if isinstance(error, RedisTimeoutError) else EnqueueError
        raise kind(f"{_jobs(jids)} may or may not have been written (the connection to Redis at "
                   f"{public_location()} failed after the "
                           f"write was sent; enqueueing again may run it twice): {error}", jids,
                           written=None) from error


class Pushed(NamedTuple):
    """What a push did: the jid written (None if middleware stopped it), or the jid already holding the lock."""

    jid: str | None
    duplicate_of: str | None = None


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
        # Redis's reply names no key: say which one, and how to free it. A unique push names two
        # (lock, and queue or schedule): each one's type is looked up.
        candidates = command_keys(command)
        try:
            types: Any = redis_layer.run(lambda conn: [conn.type(key) for key in candidates], idempotent=True)
        except Exception as lookup_error:  # the push error must surface, named or not
            types = lookup_error
        target = candidates[1] if len(candidates) > 1 else candidates[0]
        named = name_culprits(reply, f"the push to {target} (the job was not written)", candidates, types)
        key_reports.report(named, lambda commands: redis_layer.run(lambda conn: key_reports.on_client(conn)(commands),
                                                                   idempotent=True))
        key = named.keys[0] if named.keys else target
        raise WrongTypeKey(f"{named}. djwork.key_guard.quarantine_if_wrong_type({key!r}) moves the key aside "
                           f"(a running worker's key guard does so within seconds: the key is reported to it)",
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
    """Write one job (now, or at epoch ``at``); returns its jid, or None if middleware stopped it.

    For a unique job refused as a duplicate: the jid holding the lock (``push_reporting`` says so).
    """
    return push_reporting(payload, at=at).jid


def push_reporting(payload: dict[str, Any], *, at: float | None = None) -> Pushed:
    """``push``, saying whether a unique job was refused as a duplicate (and which jid holds its lock)."""
    signalled = bool(signals.before_task_publish.receivers or signals.after_task_publish.receivers)
    pushed, written = _push(payload, at, signalled)
    if signalled and pushed.jid is not None and pushed.duplicate_of is None:
        signals.published(written, written.get("queue") or "default")
    return pushed


def _push(payload: dict[str, Any], at: float | None, signalled: bool) -> tuple[Pushed, dict[str, Any]]:
    """The push itself; also the payload as written (client middleware may have replaced it)."""
    config = get_config()
    queue = payload.get("queue") or "default"
    chain = client_chain(config)
    batch = batch_collect.current()  # inside `with batch.jobs():` the batch writes it (djwork/batches)
    if batch is not None:
        batch.stamp(payload)
    if chain:
        payload = run_client_chain(chain, payload, queue)
        if payload is None:
            return Pushed(None), {}
        queue = payload.get("queue") or queue
    if signalled:  # Celery's before_task_publish, after every client middleware (djwork/signals.py)
        signals.publishing(payload, queue, at)
        queue = payload.get("queue") or queue
    payload.pop("at", None)  # a stored "at" re-schedules the job when it comes due (docs/wire.md, Jobs)
    now = time.time()
    later = at if at is not None and at > now else None
    if later is not None:
        payload.pop("enqueued_at", None)
    else:
        payload["enqueued_at"] = now
    if batch is not None:
        return Pushed(batch.take(payload, queue, later)), payload
    divert = push_intercept.divert_for(config.always_eager)
    if divert is not None:  # a testing mode or ALWAYS_EAGER (djwork.testing): collected or run, not written
        return Pushed(divert(payload, later)), payload
    lock = lock_of(payload)
    if lock is not None:
        script = _unique_command(payload, lock, queue, later, now)
        if later is not None:
            (reply,) = _write_scripts([script], [payload["jid"]])
        else:
            reply, listed = _write_scripts([script, ("SADD", keys.QUEUES, queue)], [payload["jid"]])
            _check_listing_replies([listed], f"SADD queues {queue}")
        return _unique_outcome(reply, script), payload
    raw = dumps(payload)
    if later is not None:
        command: tuple[Any, ...] = ("ZADD", keys.SCHEDULE, repr(float(later)), raw)
        replies = _write([command], [payload["jid"]])
        _raise_push_error(replies[0], command)
        return Pushed(payload["jid"]), payload
    commands = [("LPUSH", keys.queue(queue), raw), ("SADD", keys.QUEUES, queue)]
    replies = _write(commands, [payload["jid"]])
    _raise_push_error(replies[0], commands[0])
    _check_listing_replies(replies[1:], f"SADD queues {queue}")
    return Pushed(payload["jid"]), payload


# --- unique jobs: the lock and the push in one Lua step (lua/unique_push.lua) -----------------
UNIQUE_JID = 5  # where a unique_push command carries the job's jid


def _unique_command(payload: dict[str, Any], lock: str, queue: str, at: float | None,
                    now: float) -> tuple[Any, ...]:
    """unique_push.lua's EVALSHA for one payload (its enqueued_at, or its schedule, already settled)."""
    ttl = lock_ttl_ms(payload, (at - now) if at is not None else 0.0)
    target = keys.SCHEDULE if at is not None else keys.queue(queue)
    return ("EVALSHA", scripts.sha("unique_push"), 2, lock, target,
            payload["jid"], ttl, dumps(payload), "" if at is not None else queue,
            repr(float(at)) if at is not None else "0")


def _write_scripts(commands: list[tuple[Any, ...]], jids: list[str]) -> list[Any]:
    """``_write``, then the EVALSHA calls answered NOSCRIPT (which ran nothing) once more as EVAL."""
    replies = _write(commands, jids)
    refused = [index for index, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if refused:
        source = scripts.source("unique_push")
        again = _write([("EVAL", source, *commands[index][2:]) for index in refused], jids)
        for index, reply in zip(refused, again, strict=True):
            replies[index] = reply
    return replies


def _unique_outcome(reply: Any, command: tuple[Any, ...]) -> Pushed:
    """unique_push.lua answers 1 when it pushed, else the holder's jid (a string: never the integer 1)."""
    _raise_push_error(reply, command)
    if reply == 1:
        return Pushed(command[UNIQUE_JID])
    holder = reply.decode() if isinstance(reply, bytes) else str(reply)
    return Pushed(holder, duplicate_of=holder)


def push_bulk(payloads: Iterable[dict[str, Any]], *, at: float | None = None) -> list[str | None]:
    """Write many jobs in one pipelined round trip; one LPUSH per queue keeps FIFO order."""
    return [pushed.jid for pushed in push_bulk_reporting(payloads, at=at)]


def push_bulk_reporting(payloads: Iterable[dict[str, Any]], *, at: float | None = None) -> list[Pushed]:
    """``push_bulk``, saying which unique jobs were refused as duplicates (they ride in the same round trip)."""
    config = get_config()
    chain = client_chain(config)
    batch = batch_collect.current()
    now = time.time()
    by_queue: dict[str, list[str]] = {}
    scheduled: dict[str, float] = {}
    unique_commands: list[tuple[Any, ...]] = []
    unique_queues: set[str] = set()  # listed in `queues` with the plain ones' SADD
    outcomes: list[Pushed | int] = []  # an int is the index of the job's unique_push command
    signalled = bool(signals.before_task_publish.receivers or signals.after_task_publish.receivers)
    written: list[dict[str, Any]] = []  # for after_task_publish, when signalled
    for payload in payloads:
        queue = payload.get("queue") or "default"
        if batch is not None:
            batch.stamp(payload)
        if chain:
            payload = run_client_chain(chain, payload, queue)
            if payload is None:
                outcomes.append(Pushed(None))
                continue
            queue = payload.get("queue") or queue
        if signalled:
            signals.publishing(payload, queue, at)
            queue = payload.get("queue") or queue
            written.append(payload)
        payload.pop("at", None)
        later = at if at is not None and at > now else None
        if later is not None:
            payload.pop("enqueued_at", None)
        else:
            payload["enqueued_at"] = now
        if batch is not None:
            outcomes.append(Pushed(batch.take(payload, queue, later)))
            continue
        divert = push_intercept.divert_for(config.always_eager)
        if divert is not None:
            outcomes.append(Pushed(divert(payload, later)))
            continue
        lock = lock_of(payload)
        if lock is not None:
            outcomes.append(len(unique_commands))
            unique_commands.append(_unique_command(payload, lock, queue, later, now))
            if later is None:
                unique_queues.add(queue)
        else:
            if later is not None:
                scheduled[dumps(payload)] = float(later)
            else:
                by_queue.setdefault(queue, []).append(dumps(payload))
            outcomes.append(Pushed(payload["jid"]))
    if not by_queue and not scheduled and not unique_commands:
        return [outcome for outcome in outcomes if isinstance(outcome, Pushed)]

    commands: list[tuple[Any, ...]] = [("LPUSH", keys.queue(queue), *raws) for queue, raws in by_queue.items()]
    if scheduled:
        commands.append(("ZADD", keys.SCHEDULE, *(part for raw, score in scheduled.items()
                                                   for part in (repr(score), raw))))
    writes = len(commands)
    # Each unique job in a step of its own, in call order: a second copy in the same batch meets the first's lock.
    commands.extend(unique_commands)
    listed = {**dict.fromkeys(by_queue), **dict.fromkeys(sorted(unique_queues))}
    if listed:
        commands.append(("SADD", keys.QUEUES, *listed))
    jids = [outcome.jid for outcome in outcomes if isinstance(outcome, Pushed) and outcome.jid]
    jids += [command[UNIQUE_JID] for command in unique_commands]
    replies = _write_scripts(commands, jids) if unique_commands else _write(commands, jids)
    for reply, command in zip(replies[:writes], commands, strict=False):
        _raise_push_error(reply, command)
    _check_listing_replies(replies[writes + len(unique_commands):], "SADD queues")
    unique_outcomes = [_unique_outcome(reply, command) for reply, command
                       in zip(replies[writes:writes + len(unique_commands)], unique_commands, strict=True)]
    pushed = [unique_outcomes[outcome] if isinstance(outcome, int) else outcome for outcome in outcomes]
    if signalled:
        sent = [outcome for outcome in pushed if outcome.jid is not None]  # the ones middleware let through
        for outcome, payload in zip(sent, written, strict=False):
            if outcome.duplicate_of is None:
                signals.published(payload, payload.get("queue") or "default")
    return pushed
