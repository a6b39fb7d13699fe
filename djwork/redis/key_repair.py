"""The key guard: a key of the wrong type is moved aside, not fought with forever.

One ``SET queue:default x`` (a STRING where a LIST belongs) used to stop a
worker's every fetch, on every queue, with a WRONGTYPE naming a Lua script
line; one ``SET retry x`` left each failing job stuck on its in-progress list
until the worker stopped. Redis can't refuse such a write, so djwork repairs
after it: ``quarantine_if_wrong_type`` checks a key's type and, if it is
neither absent nor the type djwork's layout gives it, renames it to
``djwork:quarantine:<key>:<ms>:<random>`` in the same Lua step
(lua/quarantine.lua), kept 30 days, at most five copies per key. djwork
then recreates the key as it needs it, and the content is still there for a
person to look at. Every move is logged at ERROR, naming the key, the type
it held, the type expected and the copy.

``sweep`` checks every fixed key and every key the listing sets name
(``queues``, ``processes``, the in-progress registry) in two pipelined round
trips, and moves the wrong ones. Keys under a prefix (``unique:<digest>``,
``djwork:limiter:<name>``...) can't be listed without scanning the keyspace:
whoever meets a WRONGTYPE on one reports it (djwork.redis.key_reports), and
``repair_reported`` checks the reported keys. The worker runs the sweep at
boot and every minute, and the reported keys every few seconds
(djwork/worker/key_guard.py); client and API code may call any of them.
The table of expected types is in djwork.redis.key_types.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Mapping
from typing import Any

from redis.exceptions import ResponseError

from djwork import redis as redis_layer
from djwork.redis import cluster_quarantine, keys, scripts
from djwork.redis.key_layout import Layout, layout_of
from djwork.redis.key_types import (
    FIXED_TYPES,
    WrongTypeKey,
    expected_type,
    identity_candidates,
    is_wrong_type,
    process_key_types,
)
from djwork.settings.conf import Config

logger = logging.getLogger("djwork.key_guard")

__all__ = ["COPIES_KEPT", "FIXED_TYPES", "INDEX_CAP", "expected_type", "expected_type_in_redis",
           "quarantine_culprits", "quarantine_if_wrong_type", "repair_reported", "sweep"]

COPIES_KEPT = 5  # per original key: enough to compare, too few for a loop to fill memory
INDEX_CAP = 1000  # copies in the index across every key; the oldest beyond are deleted
REDIS_TYPES = frozenset({"string", "list", "set", "zset", "hash", "stream"})


def expected_type_in_redis(key: str) -> str | None:
    """The type ``key`` must hold: from its name (djwork.redis.key_types), else as a process's key.

    A process's keys (``<identity>``, ``<identity>:work``, ``:workers``,
    ``-signals``) are placed only when the identity is a member of
    ``processes`` (one pipelined round trip): a name alone can't tell.
    """
    kind = expected_type(key)
    if kind is not None:
        return kind
    candidates = identity_candidates(key)
    identities = list(candidates)

    def members(conn: Any) -> list[Any]:
        pipe = conn.pipeline(transaction=False)
        for identity in identities:
            pipe.sismember(keys.PROCESSES, identity)
        return pipe.execute(raise_on_error=False)

    for identity, member in zip(identities, redis_layer.run(members, idempotent=True), strict=True):
        if member is True or member == 1:
            return candidates[identity]
    return None


def quarantine_if_wrong_type(key: str, expected: str | None = None) -> str | None:
    """Move ``key`` aside if it holds neither nothing nor ``expected``; returns the copy's name, or None.

    ``expected`` is a type as Redis's TYPE names it (``list``, ``zset``...);
    None looks it up (``expected_type_in_redis``), and a key djwork can't
    place is refused with a ValueError rather than moved on a guess. Each
    move is logged at ERROR here, so callers need not log it again.
    """
    if expected is None:
        expected = expected_type_in_redis(key)
        if expected is None:
            raise ValueError(f"djwork's key table does not place {key!r}; pass the type it must hold as expected=")
    if expected not in REDIS_TYPES:
        raise ValueError(f"expected must be one of {sorted(REDIS_TYPES)}, not {expected!r}")
    if layout_of(redis_layer.client()).cluster:
        # The key, its copy and the index are in different slots: single-slot steps (docs/cluster.md).
        reply: Any = cluster_quarantine.quarantine(key, expected, keys.QUARANTINE_TTL, COPIES_KEPT, INDEX_CAP)
    else:
        args = [expected, keys.QUARANTINE_PREFIX, keys.QUARANTINE_TTL, COPIES_KEPT, INDEX_CAP,
                os.urandom(4).hex(), os.urandom(4).hex()]
        # Replayed after a lost reply: the first run moved the key, so the replay
        # finds it absent (or moves a fresh wrong one), never moves a good one.
        reply = redis_layer.run(
            lambda conn: scripts.evaluate(conn, "quarantine", [key, keys.QUARANTINE_INDEX], args), idempotent=True)
    found, copy, index_type, index_copy = (_text(part) for part in (list(reply) + [None] * 4)[:4])
    if index_copy:
        _log_move(keys.QUARANTINE_INDEX, index_type or "?", "zset", index_copy)
    if copy:
        _log_move(key, found or "?", expected, copy)
    return copy


def quarantine_culprits(error: WrongTypeKey, known: Mapping[str, str] | None = None) -> list[str]:
    """Move aside every key ``error`` names whose type djwork's table fixes; returns the copies' names.

    ``known`` gives the type of keys the caller can place and the table can't
    (a limiter's state: a HASH or a ZSET by the limiter's kind).
    """
    moved = []
    for key in error.keys:
        expected = error.expected.get(key) or (known or {}).get(key)
        if expected is not None:
            copy = quarantine_if_wrong_type(key, expected)
            if copy:
                moved.append(copy)
    return moved


def sweep(config: Config | None = None) -> list[tuple[str, str]]:
    """Check every fixed key and every key the listing sets name; move the wrong ones. Returns (key, copy) pairs.

    Two pipelined round trips however many keys (plus one per key moved):
    the fixed keys' types with the listing sets' members, then the listed
    keys' types. ``config`` adds its queues: a queue key the ``queues`` SET
    doesn't list (its SADD failed) is still one this worker reads.
    """
    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    fixed = {**FIXED_TYPES, keys.stat_processed_day(today): "string", keys.stat_failed_day(today): "string"}
    fixed_keys = list(fixed)
    listings = [keys.QUEUES, keys.PROCESSES, keys.IN_PROGRESS_REGISTRY]

    layouts: list[Layout] = []

    def first(conn: Any) -> list[Any]:
        layouts[:] = [layout_of(conn)]
        pipe = conn.pipeline(transaction=False)
        for key in fixed_keys:
            pipe.type(key)
        for key in listings:
            pipe.smembers(key)
        return pipe.execute(raise_on_error=False)

    replies = redis_layer.run(first, idempotent=True)
    found = dict(zip(fixed_keys, replies[:len(fixed_keys)], strict=True))
    queues, processes, registry = (_members(reply) for reply in replies[len(fixed_keys):])
    listed = _listed_keys(queues | set(config.queue_names if config else ()), processes, registry, layouts[0])
    listed = {key: kind for key, kind in listed.items() if key not in fixed}
    listed_keys = list(listed)
    if listed_keys:
        def second(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for key in listed_keys:
                pipe.type(key)
            return pipe.execute(raise_on_error=False)

        found.update(zip(listed_keys, redis_layer.run(second, idempotent=True), strict=True))
    wanted = {**fixed, **listed}
    moved = []
    for key, kind in found.items():
        kind = _text(kind)
        if isinstance(kind, str) and kind not in ("none", wanted[key]):
            copy = quarantine_if_wrong_type(key, wanted[key])
            if copy:
                moved.append((key, copy))
    return moved


def repair_reported() -> list[tuple[str, str]]:
    """Check every key reported to the guard (djwork.redis.key_reports); move the wrong ones. Returns (key, copy) pairs.

    One round trip when nothing is reported. A reported key is checked by
    the quarantine script itself, which moves it only if it still holds the
    wrong type, so a report of a key repaired (or deleted) since is harmless.
    A key the table doesn't place is dropped from the reports unchecked:
    djwork moves nothing on a guess.
    """
    try:
        reported = [_text(key) for key in redis_layer.run(
            lambda conn: conn.zrange(keys.KEY_GUARD_REPORTED, 0, -1), idempotent=True)]
    except WrongTypeKey as error:
        # The reports key itself the wrong type: moved now, not a failed tick every 2 s until the sweep.
        return [(keys.KEY_GUARD_REPORTED, copy) for copy in quarantine_culprits(error)]
    except ResponseError as error:
        # A cluster's client does not name a command's WRONGTYPE (only scripts' are named there): the
        # one key this ZRANGE reads is the culprit.
        if not is_wrong_type(error):
            raise
        copy = quarantine_if_wrong_type(keys.KEY_GUARD_REPORTED, "zset")
        return [(keys.KEY_GUARD_REPORTED, copy)] if copy else []
    moved = []
    for key in reported:
        expected = expected_type(key)
        copy = quarantine_if_wrong_type(key, expected) if expected is not None else None
        if copy:
            moved.append((key, copy))
    if reported:
        # A report made after the ZRANGE may be dropped here: the caller that made it meets the
        # key again (if it is still wrong) and reports it once more.
        redis_layer.run(lambda conn: conn.zrem(keys.KEY_GUARD_REPORTED, *reported), idempotent=True)
    return moved


def _listed_keys(queues: set[str], processes: set[str], registry: set[str], layout: Layout) -> dict[str, str]:
    # The isolated list by the layout: a cluster's carries its queue's tag (docs/cluster.md, Keys).
    listed = {key: "list" for name in queues for key in (keys.queue(name), layout.isolated(name))}
    for identity in processes:
        # A member that names a key of djwork's own layout (`queues`, `queue:x`) is
        # junk in `processes`, not a process: its "hash" must not move a good key.
        if expected_type(identity) is not None:
            continue
        for key, kind in process_key_types(identity).items():
            if expected_type(key) is None:
                listed[key] = kind
    for member in registry:
        if keys.parse_in_progress(member) is not None:
            listed[member] = "list"
    return listed


def _members(reply: Any) -> set[str]:
    """A listing set's members as text; an error reply (the set is itself the wrong type) lists nothing."""
    if isinstance(reply, Exception) or not reply:
        return set()
    members = set()
    for member in reply:
        try:
            members.add(member.decode("utf-8") if isinstance(member, bytes) else str(member))
        except UnicodeDecodeError:
            continue  # not a name djwork wrote; nothing of ours to check
    return members


def _log_move(key: str, found: str, expected: str, copy: str) -> None:
    logger.error("djwork: key %s held a %s where djwork expects a %s; moved it to %s (kept %d days) so djwork "
                 "can use %s again", key, found, expected, copy, keys.QUARANTINE_TTL // 86400, key,
                 extra={"key": key, "found_type": found, "expected_type": expected, "quarantined_as": copy})


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
