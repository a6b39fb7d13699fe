"""Unique jobs' locks (``unique:<digest>``, docs/unique.md): a paged read model, an owner-checked release,
and the script calls that release a job's locks with the API's Delete and Kill.

Each lock's value is the jid of the job holding it. Where that job is now
(queued, scheduled, running, retry, dead) is looked up with bounded work per
page: the in-progress lists and work hashes of live processes in full, each
queue's (and each of its priority lanes') first and last ``LOCATE_BUDGET // 2`` jobs, the first ``LOCATE_BUDGET``
entries of ``schedule``, ``retry`` and ``dead`` (soonest, newest dead). A job
found nowhere is "gone" when every place was read in full, else "unknown":
a page never scans a million-job set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from djwork import job_locks
from djwork.api import access
from djwork.api.cluster_actions import release_each
from djwork.api.cluster_entries import ByMode, RemoveSteps, by_mode
from djwork.api.records import JobRecord, text
from djwork.dead import ScriptCall
from djwork.redis import key_layout, keys, lanes
from djwork.redis.cluster import scan_page

# A digest as the key holds it after "unique:": djwork's are SHA-256 hex; other writers' may differ,
# but nothing with spaces, newlines or glob characters reaches a key, a URL or a script argument.
DIGEST = re.compile(r"\A[A-Za-z0-9_.:\-]{1,200}\Z")
LOCATE_BUDGET = 1000  # entries read per place (queue, set) when looking for the owners of one page
MAX_QUEUES = 100  # queues looked in per page; more make the rest "unknown"
SCAN_CALLS = 20  # SCAN calls per page at most (a sparse keyspace returns few matches per call)
# SCAN's cursor, or on a cluster "<primary's index>:<its cursor>" (djwork.redis.cluster.scan_page).
PAGE_CURSOR = re.compile(r"\A[0-9]{1,4}:[0-9]{1,20}\Z|\A[0-9]{1,20}\Z")
JID_IN = re.compile(rb'\\?"jid\\?"\s*:\s*\\?"([A-Za-z0-9_.:\-]{1,128})')
PLACES = ("running", "queued", "scheduled", "retry", "dead")


def remove_call(key: str, kind: str, record: JobRecord) -> ByMode:
    """remove_entry.lua: delete ``record`` from ``key`` (a "zset" or a "list") and release its locks, one step
    (on a cluster, steps: djwork/api/cluster_entries.py)."""
    locks = job_locks.encode(job_locks.locks_of(record.item))
    return by_mode(ScriptCall("remove_entry", [key], [kind, record.member, record.jid, locks]),
                   RemoveSteps(key, kind, record.member, record.jid, locks))


def check_digest(digest: str) -> str:
    if not isinstance(digest, str) or not DIGEST.match(digest):
        raise ValueError(f"{str(digest)[:80]!r} is not a unique lock digest")
    return digest


@dataclass(frozen=True)
class UniqueLock:
    """One ``unique:<digest>`` key: who holds it, for how long, and where that job is now."""

    digest: str
    owner: str  # the holder's jid; "" when the key holds no readable string
    ttl: float | None  # seconds left; None when the key has no TTL (written by hand)
    where: str = "unknown"  # running | queued | scheduled | retry | dead | gone | unknown
    problems: tuple[str, ...] = ()
    job: JobRecord | None = None  # the holder's payload where it was found (its class and arguments)

    @property
    def key(self) -> str:
        return keys.unique(self.digest)

    @property
    def valid(self) -> bool:
        """Whether the digest can be named in a URL and released (a hand-written key may not be)."""
        return bool(DIGEST.match(self.digest))


@dataclass(frozen=True)
class LockPage:
    locks: list[UniqueLock]
    next_cursor: str | None  # pass to page() for the next page; None at the end
    partial_search: bool = False  # some place was too large to read in full: "unknown" may be anywhere


@dataclass
class Places:
    """Where each looked-for jid was found (``found``: jid -> place) and its payload there; ``complete`` is
    False when some place was too large to read in full, so a jid not found may still be there."""

    found: dict[str, str] = field(default_factory=dict)  # jid -> place
    payloads: dict[str, Any] = field(default_factory=dict)  # jid -> its payload as found there
    complete: bool = True


class UniqueLocks:
    """Every unique job's lock, paged by SCAN cursor (``unique:*``), with its owner's whereabouts."""

    def page(self, cursor: str = "0", per_page: int = 50) -> LockPage:
        """Up to about ``per_page`` locks from SCAN position ``cursor`` ("0" = the start); ValueError for junk."""
        if not isinstance(cursor, str) or not PAGE_CURSOR.match(cursor):
            raise ValueError(f"{str(cursor)[:40]!r} is not a page cursor")
        names, next_cursor = access.read(lambda conn: _scan(conn, cursor, per_page))
        locks = self._read([text(name)[len(keys.UNIQUE_PREFIX):] for name in names])
        located = locate({lock.owner for lock in locks if lock.owner})
        placed = [_placed(lock, located) for lock in locks]
        return LockPage(placed, next_cursor, not located.complete)

    def get(self, digest: str) -> UniqueLock | None:
        """One lock by digest, with its owner's whereabouts; None when the key is gone."""
        (lock,) = self._read([check_digest(digest)])
        if not lock.owner and not lock.problems:
            return None
        return _placed(lock, locate({lock.owner} if lock.owner else set()))

    def for_job(self, record: JobRecord) -> tuple[str, UniqueLock | None] | None:
        """(digest, its lock or None when released) for a unique job's payload; None for a job without one."""
        lock_key = next((key for key in job_locks.locks_of(record.item) if key.startswith(keys.UNIQUE_PREFIX)), None)
        if lock_key is None:
            return None
        digest = lock_key[len(keys.UNIQUE_PREFIX):]
        (lock,) = self._read([digest])
        return digest, (lock if lock.owner or lock.problems else None)

    def release(self, digest: str, owner: str | None = None) -> bool:
        """Delete the lock (only if ``owner`` still holds it, when given); whether a lock was deleted.

        Owner-checked from the dashboard: a lock that expired and was taken by a new job
        since the page was read is that job's, and stays.
        """
        key = keys.unique(check_digest(digest))
        if owner:
            # Replayed: compare-and-delete run twice deletes at most the one lock it compared.
            return bool(access.write(release_each([(owner, [key])]).evaluate, replay=True))
        return bool(access.write(lambda conn: conn.delete(key), replay=True))

    @staticmethod
    def _read(digests: list[str]) -> list[UniqueLock]:
        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for digest in digests:
                pipe.get(keys.unique(digest))
                pipe.pttl(keys.unique(digest))
            return pipe.execute(raise_on_error=False)

        replies = access.read(read) if digests else []
        locks = []
        for index, digest in enumerate(digests):
            value, pttl = replies[2 * index], replies[2 * index + 1]
            problems: tuple[str, ...] = ()
            if isinstance(value, Exception):
                problems, value = (f"{keys.unique(digest)} is not a string ({value})",), None
            ttl = pttl / 1000 if isinstance(pttl, int) and pttl >= 0 else None
            locks.append(UniqueLock(digest, text(value) if value is not None else "", ttl, "unknown", problems))
        return locks


def _scan(conn: Any, cursor: str, per_page: int) -> tuple[list[Any], str | None]:
    names: list[Any] = []
    position = cursor or "0"
    for _ in range(SCAN_CALLS):
        # scan_page: SCAN on one server; on a cluster, each primary's key space in turn.
        batch, position = scan_page(conn, position, f"{keys.UNIQUE_PREFIX}*", max(per_page, 100))
        names.extend(batch)
        if position == "0" or len(names) >= per_page:
            break
    return sorted(set(names)), (None if position == "0" else position)


def _placed(lock: UniqueLock, located: Places) -> UniqueLock:
    if not lock.owner:
        return lock
    where = located.found.get(lock.owner) or ("gone" if located.complete else "unknown")
    payload = located.payloads.get(lock.owner)
    return UniqueLock(lock.digest, lock.owner, lock.ttl, where, lock.problems,
                      JobRecord.parse(payload) if payload is not None else None)


def locate(jids: set[str]) -> Places:
    """Where each of ``jids`` is now, reading at most LOCATE_BUDGET entries per place (module docstring).

    Also what ``djwork.api.job_lookup`` asks first for one job: running or queued, in bounded work."""
    places = Places()
    if not jids:
        return places
    half = LOCATE_BUDGET // 2

    def listing(conn: Any) -> list[Any]:
        pipe = conn.pipeline(transaction=False)
        pipe.smembers(keys.IN_PROGRESS_REGISTRY)
        pipe.smembers(keys.PROCESSES)
        pipe.smembers(keys.QUEUES)
        return pipe.execute(raise_on_error=False)

    registry, processes, queue_names = (_members(reply) for reply in access.read(listing))
    queue_names = sorted(queue_names)
    if len(queue_names) > MAX_QUEUES:
        places.complete, queue_names = False, queue_names[:MAX_QUEUES]

    def contents(conn: Any) -> list[Any]:
        pipe = conn.pipeline(transaction=False)
        for key in registry:
            pipe.lrange(key, 0, LOCATE_BUDGET - 1)
        for identity in processes:
            pipe.hvals(keys.work(identity))
        for name in queue_names:
            for key in (keys.queue(name), key_layout.layout_of(conn).isolated(name)):
                pipe.llen(key)
                pipe.lrange(key, 0, half - 1)
                pipe.lrange(key, -half, -1)
        for key in (keys.SCHEDULE, keys.RETRY, keys.DEAD):
            pipe.zcard(key)
            pipe.zrange(key, 0, LOCATE_BUDGET - 1, desc=key == keys.DEAD)
        for name in queue_names:
            pipe.smembers(key_layout.layout_of(conn).lanes(name))
        return pipe.execute(raise_on_error=False)

    replies = iter(access.read(contents))
    running: list[Any] = []
    for _ in range(len(registry) + len(processes)):
        running.extend(_items(next(replies)))
    _note(places, jids, running, "running")
    queued: list[Any] = []
    for _ in range(2 * len(queue_names)):
        queued += _ends(places, next(replies), next(replies), next(replies))
    in_sets = [(place, next(replies), next(replies)) for place in ("scheduled", "retry", "dead")]
    # A job waiting in a priority lane (docs/priority.md) is queued too: its lanes are read, in a third round
    # trip, only for queues that register any.
    layout = access.read(key_layout.layout_of)  # a cluster's lanes carry their queue's hash tag
    lane_keys = [lanes.list_key(name, lane, layout) for name in queue_names
                 for lane in lanes.registered(next(replies))]
    if lane_keys:
        lane_replies = iter(access.read(lambda conn: _read_ends(conn, lane_keys, half)))
        for _key in lane_keys:
            queued += _ends(places, next(lane_replies), next(lane_replies), next(lane_replies))
    _note(places, jids, queued, "queued")
    for place, size, members in in_sets:
        places.complete &= not isinstance(size, int) or size <= LOCATE_BUDGET
        _note(places, jids, _items(members), place)
    return places


def _read_ends(conn: Any, list_keys: list[str], count: int) -> list[Any]:
    """Each LIST's length and its ``count`` newest and oldest members."""
    pipe = conn.pipeline(transaction=False)
    for key in list_keys:
        pipe.llen(key)
        pipe.lrange(key, 0, count - 1)
        pipe.lrange(key, -count, -1)
    return pipe.execute(raise_on_error=False)


def _ends(places: Places, size: Any, head: Any, tail: Any) -> list[Any]:
    """A LIST's ends as read; ``places`` is no longer complete when the middle was not read."""
    places.complete &= not isinstance(size, int) or size <= LOCATE_BUDGET
    return _items(head) + _items(tail)


def _note(places: Places, jids: set[str], members: Iterable[Any], place: str) -> None:
    """Record ``place`` for each wanted jid that is some member's own jid (not one named in its arguments)."""
    for member in members:
        raw = member if isinstance(member, bytes) else text(member).encode()
        candidates = {match.decode() for match in JID_IN.findall(raw)} & jids
        if candidates and (own := _own_jid(raw)) in candidates:
            places.found.setdefault(own, place)
            places.payloads.setdefault(own, _payload(raw))


def _own_jid(raw: bytes) -> str | None:
    try:
        item = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if isinstance(item, dict) and "payload" in item and "jid" not in item:
        # A work hash value: {"queue", "payload", "run_at"}, the payload as JSON text (Sidekiq 7) or an object.
        item = item["payload"]
        if isinstance(item, str):
            return _own_jid(item.encode())
    jid = item.get("jid") if isinstance(item, dict) else None
    return jid if isinstance(jid, str) else None


def _payload(raw: bytes) -> Any:
    """The job itself: a work hash value wraps it as {"queue", "payload", "run_at"}."""
    try:
        item = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
    if isinstance(item, dict) and "payload" in item and "jid" not in item:
        return item["payload"]
    return raw


def _members(reply: Any) -> list[str]:
    return [text(member) for member in reply] if isinstance(reply, (set, list)) else []


def _items(reply: Any) -> list[Any]:
    return reply if isinstance(reply, list) else []
