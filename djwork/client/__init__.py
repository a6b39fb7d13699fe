"""Writing jobs to Redis: push now, schedule for later, push many in one round trip.

A push is ``LPUSH queue:<name>`` plus ``SADD queues <name>`` in one pipeline.
The LPUSH is the write that matters; the SADD only feeds listings, so its
failure (the ``queues`` key holding the wrong type, say) is logged, never
raised — raising would make the caller push the job a second time. Neither
is replayed after a lost reply: only a connect-phase failure, which proves
nothing was sent, re-sends the pipeline.

Features take part in a push through the hooks djwork/client/push_hooks.py lists,
in the order it documents, around the user's client middleware: this module
names none of them. A hook may keep a push (a batch, a testing mode) or
write it its own way in the same round trip (a unique job's lock and push in
one Lua step, a duplicate answered with ``Pushed.duplicate_of``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from djwork import redis as redis_layer
from djwork.client.push_hooks import HookSteps, Pushed, Write, steps_for
from djwork.exceptions import RedisUnavailable
from djwork.middleware import resolve_all, run_client_chain
from djwork.payload import dumps
from djwork.redis import key_reports, keys, lanes, scripts
from djwork.redis.key_types import WrongTypeKey, command_keys, is_wrong_type, name_culprits
from djwork.redis.url import public_location
from djwork.settings.conf import Config, get_config

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


def _jobs(jids: list[str]) -> str:
    return f"job {jids[0]}" if len(jids) == 1 else f"{len(jids)} jobs ({jids[0]}, ...)"


@functools.lru_cache(maxsize=4)
def client_chain(config: Config) -> tuple[Any, ...]:
    return resolve_all(config.client_middleware)


@functools.lru_cache(maxsize=4)
def push_plan(config: Config) -> tuple[HookSteps, tuple[Any, ...]]:
    """The features' hook steps and the user's middleware chain: one cache lookup per push, not two."""
    return steps_for(config), client_chain(config)


def _layout() -> lanes.Layout:
    # A cluster's lanes carry the queue's hash tag (djwork/redis/key_layout.py): one server's names would put a
    # prioritised job where no cluster fetch looks.
    return lanes.layout_for(get_config())


def _check_listing_replies(replies: list[Any], what: str) -> None:
    for reply in replies:
        if isinstance(reply, Exception):
            logger.error("djwork: %s failed (the job itself is queued): %s", what, reply)


def _raise_push_error(reply: Any, command: tuple[Any, ...]) -> None:
    if not isinstance(reply, Exception):
        return
    if is_wrong_type(reply):
        # Redis's reply names no key: say which one, and how to free it. A feature's write may name
        # several (a unique push: its lock, then the queue or schedule): each one's type is looked up.
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
        raise WrongTypeKey(f"{named}. djwork.redis.key_repair.quarantine_if_wrong_type({key!r}) moves the key aside "
                           f"(a running worker's key guard does so within seconds: the key is reported to it)",
                           named.keys, named.found, named.expected) from reply
    raise reply


def _pipelined(conn: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """``commands`` in one round trip per server (djwork.redis.exchange_on: a cluster's per node).

    Failures propagate unchanged to the replay policy in djwork.redis, whose
    connection class also counts the replies and marks dial failures as
    connect phase.
    """
    return redis_layer.exchange_on(conn, commands)


def push(payload: dict[str, Any], *, at: float | None = None) -> str | None:
    """Write one job (now, or at epoch ``at``); returns its jid, or None if middleware stopped it.

    For a unique job refused as a duplicate: the jid holding the lock (``push_reporting`` says so).
    """
    return push_reporting(payload, at=at).jid


def push_reporting(payload: dict[str, Any], *, at: float | None = None) -> Pushed:
    """``push``, saying whether a unique job was refused as a duplicate (and which jid holds its lock)."""
    config = get_config()
    steps, chain = push_plan(config)
    passed = _through_middleware(payload, at, steps, chain)
    if passed is None:
        return Pushed(None)
    payload, queue = passed
    now = time.time()
    later = _settle_time(payload, at, now)
    routed = _route(steps, payload, queue, later, now)
    if isinstance(routed, Pushed):
        pushed = routed
    elif routed is not None:
        pushed = _send_write(routed)
    else:
        pushed = _send_plain(payload, queue, later)
    for hook in steps.pushed:
        hook(payload, pushed)
    return pushed


def _through_middleware(payload: dict[str, Any], at: float | None, steps: HookSteps,
                        chain: tuple[Any, ...]) -> tuple[dict[str, Any], str] | None:
    """Steps 1-3 of a push (djwork/client/push_hooks.py): the payload as it will be written and its queue, or
    None when a client middleware stopped the push (it may also have replaced the payload)."""
    for stamp in steps.stamp:
        stamp(payload)
    queue = payload.get("queue") or "default"
    if chain:
        payload = run_client_chain(chain, payload, queue)
        if payload is None:
            return None
        queue = payload.get("queue") or queue
    if steps.publishing:
        for publishing in steps.publishing:
            publishing(payload, queue, at)
        queue = payload.get("queue") or queue  # a before_task_publish receiver may move the job
    return payload, queue


def _settle_time(payload: dict[str, Any], at: float | None, now: float) -> float | None:
    """The run-at epoch a push writes (None: now), with the payload's time fields set to match."""
    payload.pop("at", None)  # a stored "at" re-schedules the job when it comes due (docs/wire.md, Jobs)
    later = at if at is not None and at > now else None
    if later is not None:
        payload.pop("enqueued_at", None)
    else:
        payload["enqueued_at"] = now
    return later


def _route(steps: HookSteps, payload: dict[str, Any], queue: str, later: float | None,
           now: float) -> Pushed | Write | None:
    """Step 4: the first feature that keeps the push or writes it its own way; None for the plain write."""
    for route in steps.route:
        routed = route(payload, queue, later, now)
        if routed is not None:
            return routed
    return None


def _send_plain(payload: dict[str, Any], queue: str, later: float | None) -> Pushed:
    raw = dumps(payload)
    if later is not None:
        command: tuple[Any, ...] = ("ZADD", keys.SCHEDULE, repr(float(later)), raw)
        replies = _write([command], [payload["jid"]])
        _raise_push_error(replies[0], command)
        return Pushed(payload["jid"])
    # A prioritised job goes to its lane, registered after the push (djwork/redis/lanes.py).
    commands = [*lanes.push_commands(queue, lanes.lane_of(payload), [raw], layout=_layout()),
                ("SADD", keys.QUEUES, queue)]
    replies = _write(commands, [payload["jid"]])
    _raise_push_error(replies[0], commands[0])
    _check_listing_replies(replies[1:], f"SADD queues {queue}")
    return Pushed(payload["jid"])


def _send_write(write: Write) -> Pushed:
    """A feature's own write of one push, its queue listed in the same round trip."""
    commands = [write.command]
    if write.listed is not None:
        commands.extend(lanes.push_commands(write.listed, write.lane, [], layout=_layout())[1:])
        commands.append(("SADD", keys.QUEUES, write.listed))
    replies = _write_scripts(commands, [write.jid], {0: write.script} if write.script else {})
    _raise_push_error(replies[0], write.command)
    _check_listing_replies(replies[1:], f"SADD queues {write.listed}")
    return write.outcome(write.jid, replies[0])


def _write_scripts(commands: list[tuple[Any, ...]], jids: list[str], script_of: dict[int, str]) -> list[Any]:
    """``_write``, then the EVALSHA calls answered NOSCRIPT (which ran nothing) once more as EVAL.

    ``script_of`` names the script of each EVALSHA command by its index in ``commands``.
    """
    replies = _write(commands, jids)
    refused = [index for index, reply in enumerate(replies)
               if isinstance(reply, NoScriptError) and index in script_of]
    if refused:
        again = _write([("EVAL", scripts.source(script_of[index]), *commands[index][2:]) for index in refused],
                       jids)
        for index, reply in zip(refused, again, strict=True):
            replies[index] = reply
    return replies


def push_bulk(payloads: Iterable[dict[str, Any]], *, at: float | None = None) -> list[str | None]:
    """Write many jobs in one pipelined round trip; one LPUSH per queue keeps FIFO order."""
    return [pushed.jid for pushed in push_bulk_reporting(payloads, at=at)]


def push_bulk_reporting(payloads: Iterable[dict[str, Any]], *, at: float | None = None) -> list[Pushed]:
    """``push_bulk``, saying which unique jobs were refused as duplicates (they ride in the same round trip)."""
    config = get_config()
    steps, chain = push_plan(config)
    now = time.time()
    by_queue: dict[tuple[str, int], list[str]] = {}  # (queue, lane) -> payloads
    scheduled: dict[str, float] = {}
    writes: list[Write] = []
    outcomes: list[Pushed | Write] = []  # a Write's outcome comes with the round trip's reply
    passed: list[tuple[dict[str, Any], int]] = []  # (payload, its outcome's index) for the `pushed` step
    plain_jids: list[str] = []
    for payload in payloads:
        through = _through_middleware(payload, at, steps, chain)
        if through is None:
            outcomes.append(Pushed(None))
            continue
        payload, queue = through
        later = _settle_time(payload, at, now)
        passed.append((payload, len(outcomes)))
        routed = _route(steps, payload, queue, later, now)
        if routed is not None:
            outcomes.append(routed)
            if isinstance(routed, Write):
                writes.append(routed)
            continue
        if later is not None:
            scheduled[dumps(payload)] = float(later)
        else:
            by_queue.setdefault((queue, lanes.lane_of(payload)), []).append(dumps(payload))
        plain_jids.append(payload["jid"])
        outcomes.append(Pushed(payload["jid"]))
    written = iter(_send_bulk(by_queue, scheduled, writes, plain_jids) if by_queue or scheduled or writes else ())
    pushed = [next(written) if isinstance(outcome, Write) else outcome for outcome in outcomes]
    for hook in steps.pushed:
        for payload, index in passed:
            hook(payload, pushed[index])
    return pushed


def _send_bulk(by_queue: dict[tuple[str, int], list[str]], scheduled: dict[str, float], writes: list[Write],
               plain_jids: list[str]) -> list[Pushed]:
    """One round trip for a push_bulk: one LPUSH per queue, one ZADD, the features' writes, one SADD.

    Returns the features' writes' outcomes, in order.
    """
    layout = _layout()
    commands: list[tuple[Any, ...]] = [("LPUSH", lanes.list_key(queue, lane, layout), *raws)
                                       for (queue, lane), raws in by_queue.items()]
    if scheduled:
        commands.append(("ZADD", keys.SCHEDULE, *(part for raw, score in scheduled.items()
                                                   for part in (repr(score), raw))))
    plain = len(commands)
    # Each feature write in a step of its own, in call order: a unique job's second copy in the same call
    # meets the first one's lock.
    commands.extend(write.command for write in writes)
    # Each lane registered after its push (djwork/redis/lanes.py): with the listings, after every write.
    registered = [command for queue, lane in [*by_queue, *((write.listed, write.lane) for write in writes)]
                  if lane and queue is not None for command in lanes.push_commands(queue, lane, [], layout=layout)[1:]]
    listed = {**dict.fromkeys(queue for queue, _lane in by_queue),
              **dict.fromkeys(sorted({write.listed for write in writes if write.listed is not None}))}
    commands.extend(registered)
    if listed:
        commands.append(("SADD", keys.QUEUES, *listed))
    script_of = {plain + index: write.script for index, write in enumerate(writes) if write.script}
    replies = _write_scripts(commands, [*plain_jids, *(write.jid for write in writes)], script_of)
    for reply, command in zip(replies[:plain], commands, strict=False):
        _raise_push_error(reply, command)
    _check_listing_replies(replies[plain + len(writes):], "SADD queues")
    outcomes = []
    for write, reply in zip(writes, replies[plain:plain + len(writes)], strict=True):
        _raise_push_error(reply, write.command)
        outcomes.append(write.outcome(write.jid, reply))
    return outcomes
