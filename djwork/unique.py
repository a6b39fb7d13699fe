"""Unique jobs: what "the same job" means, the lock a unique job carries, and its options.

A unique job's payload names its lock in ``djwork_locks`` (``unique:<digest>``,
whose value is the owner's jid) and carries ``unique_for`` (seconds) and, for
``unique_until="start"``, ``unique_until``. The client takes the lock and pushes
the job in one Lua step (lua/unique_push.lua, ``UniquePush`` below, a hook of
every push: djwork/client/push_hooks.py); the worker
releases it, owner-checked, in the step that ends the job (djwork/job_locks.py).
docs/unique.md has the semantics.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from djwork import job_locks
from djwork.client.cluster_unique import take_then_push
from djwork.client.push_hooks import Pushed, PushHook, Write
from djwork.options import OptionError
from djwork.payload import check_json_native, dumps
from djwork.redis import keys, lanes, scripts
from djwork.redis.cluster import is_cluster

UNTIL = ("success", "start")
# Far beyond any sensible lock, and below the epoch threshold: a millisecond
# value passed as seconds (unique_for=600_000_000) is a mistake, not a plan.
MAX_UNIQUE_FOR = 1_000_000_000
FOR_FIELD = "unique_for"
UNTIL_FIELD = "unique_until"


@dataclass(frozen=True)
class Uniqueness:
    """A job's (or one call's) uniqueness: lock TTL in seconds, when it ends, and what "the same job" means."""

    unique_for: float
    until: str = "success"
    args: Callable[..., Any] | None = None

    @property
    def wire_for(self) -> int | float:
        """``unique_for`` as the payload carries it: whole seconds as an Integer, as Sidekiq's option is."""
        return int(self.unique_for) if self.unique_for.is_integer() else self.unique_for


def check_for(value: Any, where: str) -> float:
    if isinstance(value, dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value < MAX_UNIQUE_FOR:
        raise OptionError(f"{where}: unique_for must be a positive number of seconds (or a timedelta) below 1e9, "
                          f"got {value!r}; a lock TTL is mandatory, so a crash can't hold a lock for good")
    return float(value)


def check_until(value: Any, where: str) -> str:
    if value not in UNTIL:
        raise OptionError(f"{where}: unique_until must be \"success\" or \"start\", got {value!r}")
    return str(value)


def check(where: str, unique_for: Any = None, unique_until: Any = None,
          unique_args: Any = None) -> Uniqueness | None:
    """The decorator's options as a Uniqueness, None when the job is not unique; OptionError naming the job."""
    if unique_for is None:
        if unique_until is not None or unique_args is not None:
            raise OptionError(f"{where}: unique_until and unique_args need unique_for (the lock's TTL in seconds)")
        return None
    if unique_args is not None and not callable(unique_args):
        raise OptionError(f"{where}: unique_args must be a callable taking the job's arguments, got {unique_args!r}")
    return Uniqueness(check_for(unique_for, where), check_until(unique_until or "success", where), unique_args)


def for_call(job_default: Uniqueness | None, where: str, unique_for: Any = None,
             unique_until: Any = None) -> Uniqueness | None:
    """One call's uniqueness: the job's, with ``unique_for``/``unique_until`` given to set()/apply_async() on top."""
    if unique_for is None and unique_until is None:
        return job_default
    if unique_for is not None:
        seconds = check_for(unique_for, where)
    elif job_default is not None:
        seconds = job_default.unique_for
    else:
        raise OptionError(f"{where}: unique_until needs unique_for (the job is not unique)")
    until = check_until(unique_until, where) if unique_until is not None else (
        job_default.until if job_default else "success")
    return Uniqueness(seconds, until, job_default.args if job_default else None)


def _canonical(value: Any) -> bytes:
    # Sorted keys: {"a": 1, "b": 2} and {"b": 2, "a": 1} are the same arguments.
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        # Only with STRICT_ARGS off: the same str() fallback the payload itself gets.
        return orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def digest(class_name: str, queue: str, args: list[Any], kwargs: dict[str, Any],
           uniqueness: Uniqueness, where: str) -> str:
    """SHA-256 (hex) of the job's class, queue and arguments, or of what ``unique_args`` returns for them."""
    if uniqueness.args is not None:
        try:
            chosen = uniqueness.args(*args, **kwargs)
        except Exception as error:
            raise OptionError(f"{where}: unique_args failed on this call's arguments: {error!r}") from error
        check_json_native(chosen, f"{where}: what unique_args returned")
        identity: list[Any] = [class_name, queue, chosen]
    else:
        identity = [class_name, queue, args, kwargs or {}]
    return hashlib.sha256(_canonical(identity)).hexdigest()


def mark(payload: dict[str, Any], uniqueness: Uniqueness, where: str) -> None:
    """Give ``payload`` its lock: the key in ``djwork_locks``, ``unique_for``, ``unique_until`` when "start"."""
    found = digest(payload["class"], payload["queue"], payload["args"], payload.get("kwargs") or {}, uniqueness,
                   where)
    payload[job_locks.FIELD] = [keys.UNIQUE_PREFIX + found]
    payload[FOR_FIELD] = uniqueness.wire_for
    if uniqueness.until == "start":
        payload[UNTIL_FIELD] = "start"


def lock_of(payload: dict[str, Any]) -> str | None:
    """The ``unique:<digest>`` key a payload owns, if it is a unique job's (its unique_for readable).

    Asked of every push: a plain job's answer is one dict lookup.
    """
    seconds = payload.get(FOR_FIELD)
    if seconds is None or type(seconds) not in (int, float):
        return None
    locks = payload.get(job_locks.FIELD)
    if type(locks) is not list:
        return None
    # The checks job_locks.locks_of makes, for the one key that matters here.
    for key in locks:
        if (type(key) is str and key.startswith(keys.UNIQUE_PREFIX) and job_locks.SEPARATOR not in key
                and len(key) < 512):
            return key
    return None


def lock_ttl_ms(payload: dict[str, Any], delay: float = 0.0) -> int:
    """The lock's TTL: unique_for, plus the wait of a scheduled job (its lock covers the delay too)."""
    return max(1, math.ceil((float(payload[FOR_FIELD]) + max(0.0, delay)) * 1000))


class UniquePush(PushHook):
    """A unique job's push: the lock's SET NX and the push in one Lua step (lua/unique_push.lua).

    Routed after client middleware: the lock is taken only by a push that really happens. On a Redis
    Cluster the lock and the push are two single-slot steps (djwork/client/cluster_unique.py), chosen once.
    """

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        if is_cluster(config):
            self.route = self._route_on_cluster

    @staticmethod
    def _route_on_cluster(payload: dict[str, Any], queue: str, later: float | None,
                          now: float) -> Pushed | Write | None:
        lock = lock_of(payload)
        if lock is None:
            return None
        return take_then_push(lock, lock_ttl_ms(payload, (later - now) if later is not None else 0.0), payload,
                              queue, later)

    def route(self, payload: dict[str, Any], queue: str, later: float | None, now: float) -> Write | None:
        lock = lock_of(payload)
        if lock is None:
            return None
        jid = payload["jid"]
        ttl = lock_ttl_ms(payload, (later - now) if later is not None else 0.0)
        lane = lanes.lane_of(payload)
        target = keys.SCHEDULE if later is not None else lanes.list_key(queue, lane)
        command = ("EVALSHA", scripts.sha("unique_push"), 2, lock, target, jid, ttl, dumps(payload),
                   "" if later is not None else queue, repr(float(later)) if later is not None else "0")
        # Positional: a NamedTuple built with keywords costs a microsecond more, on every unique push.
        return Write(command, jid, _outcome, "unique_push", queue if later is None else None, lane)


def _outcome(jid: str, reply: Any) -> Pushed:
    """unique_push.lua answers 1 when it pushed, else the holder's jid (a string: never the integer 1)."""
    if reply == 1:
        return Pushed(jid)
    holder = reply.decode() if isinstance(reply, bytes) else str(reply)
    return Pushed(holder, duplicate_of=holder)
