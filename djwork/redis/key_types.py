"""Which Redis type each of djwork's (and Sidekiq's) keys must hold, and the error that names a key that doesn't.

Redis answers a command on a key of the wrong type with a bare ``WRONGTYPE
Operation against a key holding the wrong kind of value``: inside a Lua
script the reply names a script line, not the key, and an operator is left
guessing which of a dozen keys someone overwrote. ``WrongTypeKey`` carries
the culprit's name, the type it holds and the type djwork expects, read off
the table below.

Kept apart from djwork.redis.key_repair (which moves such keys aside through a Lua
script): djwork.redis.scripts needs the table to name a culprit, and the guard
needs djwork.redis.scripts, so the table sits below both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from redis.exceptions import ResponseError

from djwork.redis import keys

WRONGTYPE_PREFIX = "WRONGTYPE"

# The keys with a fixed name, and the type each must hold (docs/keys.md).
FIXED_TYPES: dict[str, str] = {
    keys.QUEUES: "set",
    keys.SCHEDULE: "zset",
    keys.RETRY: "zset",
    keys.DEAD: "zset",
    keys.PROCESSES: "set",
    keys.STAT_PROCESSED: "string",
    keys.STAT_FAILED: "string",
    keys.STAT_EXPIRED: "string",
    keys.PROCESS_CLEANUP: "string",
    keys.PAUSED: "set",
    keys.LEADER: "string",
    keys.IN_PROGRESS_REGISTRY: "set",
    keys.BEATS: "zset",
    keys.ORPHAN_COUNTS: "hash",
    keys.DEAD_BYTES: "string",
    keys.FINISHED_LATE: "hash",
    keys.REVOKED: "zset",
    keys.RESULT_WAITERS: "hash",
    keys.HISTORY: "stream",
    keys.QUARANTINE_INDEX: "zset",
    keys.KEY_GUARD_REPORTED: "zset",
    keys.LIMITERS: "zset",
    keys.LIMITER_HOLDINGS: "zset",
    keys.PERIODIC_ENTRIES: "hash",
    keys.METRICS_TOTALS: "hash",
    keys.METRICS_HISTOGRAM_TOTALS: "hash",
    keys.BATCHES: "zset",
}

# Name patterns that say the type by themselves: (prefix, type).
PREFIX_TYPES: tuple[tuple[str, str], ...] = (
    (keys.queue(""), "list"),
    (keys.stat_processed_day(""), "string"),
    (keys.stat_failed_day(""), "string"),
    (keys.RESULT_PREFIX, "hash"),
    (keys.RESULT_NOTIFY_PREFIX, "list"),
    (keys.RESULT_WAITER_PREFIX, "hash"),
    (keys.ISOLATED_PREFIX, "list"),
    (keys.LANE_PREFIX, "list"),
    (keys.lanes(""), "set"),
    # Limiters' keys (a limiter's state key is a HASH or a ZSET by kind, so it is not placed).
    (keys.LIMITER_PREFIX, "hash"),
    (keys.limiter_stats(""), "hash"),
    (keys.limiter_holders(""), "zset"),
    (keys.limiter_owners(""), "hash"),
    (keys.limiter_waiters(""), "zset"),
    (keys.limiter_waiting(""), "hash"),
    (keys.limiter_lost(""), "zset"),
    # Periodic entries' keys (docs/periodic.md).
    (keys.PERIODIC_STATE_PREFIX, "hash"),
    (keys.PERIODIC_HISTORY_PREFIX, "list"),
    (keys.PERIODIC_LOCK_PREFIX, "string"),
    # Unique jobs' locks (docs/unique.md).
    (keys.UNIQUE_PREFIX, "string"),
    (keys.LIMITER_WAKE_PREFIX, "list"),
    # Execution metrics (docs/metrics.md): per-minute and ten-minute counts, histograms, queue samples.
    (keys.METRICS_MINUTE_PREFIX, "hash"),
    (keys.METRICS_HISTOGRAM_PREFIX, "string"),
    (keys.QUEUE_METRICS_PREFIX, "hash"),
    (keys.DEPLOY_LOCK_PREFIX, "string"),
    (keys.ITERATION_PREFIX, "string"),
)

# Batches' keys: ``b-<bid>`` and its suffixed companions (docs/batches.md).
BATCH_SUFFIX_TYPES: dict[str, str] = {"-jids": "set", "-failed": "set", "-died": "set", "-order": "list",
                                      "-results": "hash"}
DEPLOY_MARKS = re.compile(r"\A[0-9]{8}-marks\Z")


def expected_type(key: str) -> str | None:
    """The type ``key`` must hold, from its name alone; None for a key the name doesn't place.

    A process's own keys (``<identity>``, ``<identity>:work``...) are not
    placed here: only membership of ``processes`` says a name is an identity
    (``process_key_types``).
    """
    if key in FIXED_TYPES:
        return FIXED_TYPES[key]
    if key.startswith(keys.QUARANTINE_PREFIX):
        return None  # a copy already moved aside holds whatever it held
    if keys.parse_in_progress(key) is not None:
        return "list"
    for prefix, kind in PREFIX_TYPES:
        if key.startswith(prefix) and len(key) > len(prefix):
            return kind
    if key.startswith(keys.BATCH_PREFIX) and len(key) > len(keys.BATCH_PREFIX):
        return next((kind for suffix, kind in BATCH_SUFFIX_TYPES.items() if key.endswith(suffix)), "hash")
    if DEPLOY_MARKS.match(key):
        return "hash"
    return None


def process_key_types(identity: str) -> dict[str, str]:
    """The keys a member of ``processes`` owns, and their types (docs/wire.md, Processes, Work, Signals)."""
    return {
        keys.process(identity): "hash",
        keys.work(identity): "hash",
        keys.workers_legacy(identity): "hash",
        keys.signals(identity): "list",
    }


def identity_candidates(key: str) -> dict[str, str]:
    """identity -> the type ``key`` must hold if that identity is a member of ``processes``."""
    candidates = {key: "hash"}
    for suffix, kind in ((keys.work(""), "hash"), (keys.workers_legacy(""), "hash"), (keys.signals(""), "list")):
        if key.endswith(suffix) and len(key) > len(suffix):
            candidates[key[:-len(suffix)]] = kind
    return candidates


def is_wrong_type(error: BaseException) -> bool:
    """A bare WRONGTYPE reply, not yet named (a WrongTypeKey already names its key: never looked up twice)."""
    return (isinstance(error, ResponseError) and not isinstance(error, WrongTypeKey)
            and str(error).startswith(WRONGTYPE_PREFIX))


class WrongTypeKey(ResponseError):
    """A Redis key holds another type than djwork's layout gives it; the message names the key.

    ``keys`` are the culprits found (empty when the lookup could not tell),
    ``found`` their types, ``expected`` the type each should hold (None where
    the table does not know the key). A redis-py ``ResponseError`` still, so
    code written for redis-py's errors keeps catching it.
    """

    def __init__(self, message: str, keys: Sequence[str] = (), found: Mapping[str, str] | None = None,
                 expected: Mapping[str, str | None] | None = None) -> None:
        super().__init__(message)
        self.keys = tuple(keys)
        self.found = dict(found or {})
        self.expected = dict(expected or {})


def command_keys(command: Sequence[Any]) -> list[str]:
    """The keys a command names: a script call's KEYS, else the first argument (LPUSH, ZADD, SADD...)."""
    name = _text(command[0]).upper() if command else ""
    if name in ("EVALSHA", "EVAL") and len(command) >= 3:
        count = int(command[2])
        return [_text(key) for key in command[3:3 + count]]
    return [_text(command[1])] if len(command) >= 2 else []


def name_culprits(original: ResponseError, where: str, candidates: Iterable[str],
                  types: Sequence[Any] | BaseException) -> WrongTypeKey:
    """The WrongTypeKey for ``original``, given the TYPE reply of each candidate key (or the lookup's failure).

    A culprit is a key holding neither nothing nor the type the table gives
    it. When no known key is wrong, the existing keys the table doesn't
    know are named as suspects, without an expected type.
    """
    candidates = [_text(key) for key in candidates]
    said = str(original)
    if isinstance(types, BaseException) or len(types) != len(candidates):
        named = ", ".join(dict.fromkeys(candidates)) or "its keys"
        return WrongTypeKey(f"{WRONGTYPE_PREFIX} in {where}: one of {named} holds the wrong type (the lookup of "
                            f"their types failed: {types!r}); Redis said: {said}")
    found = {key: _text(kind) for key, kind in zip(candidates, types, strict=True) if not isinstance(kind, Exception)}
    candidates = list(dict.fromkeys(candidates))
    expected = {key: expected_type(key) for key in candidates}
    culprits = [key for key in candidates if expected[key] is not None and found.get(key) not in (None, "none",
                                                                                                  expected[key])]
    if not culprits:
        culprits = [key for key in candidates if expected[key] is None and found.get(key) not in (None, "none")]
    if not culprits:
        return WrongTypeKey(f"{WRONGTYPE_PREFIX} in {where}: none of {', '.join(candidates)} holds a wrong type "
                            f"now (changed since?); Redis said: {said}")
    parts = [f"{key} holds a {found[key]}, not the {expected[key]} djwork expects" if expected[key] else
             f"{key} holds a {found[key]} (a type djwork's table does not fix)" for key in culprits]
    return WrongTypeKey(f"{WRONGTYPE_PREFIX} in {where}: {'; '.join(parts)}. Redis said: {said}",
                        culprits, {key: found[key] for key in culprits}, {key: expected[key] for key in culprits})


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)
