"""The ``schedule``, ``retry`` and ``dead`` ZSETs: paged reads, search, and the per-entry actions.

Entries are addressed by (score, jid) as Sidekiq's Web UI does (``<score>-<jid>``
in URLs); an entry without a readable jid gets a stand-in (JobRecord.ident)
so junk can still be looked at and deleted. Every action removes the exact
member it read (ZREM of the stored string), so an entry that moved meanwhile
is reported stale instead of being acted on twice.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from redis.exceptions import ResponseError

from djwork import job_locks, unique
from djwork.api import access
from djwork.api.clearing import clear_releasing_locks
from djwork.api.cluster_entries import BurySteps, PromoteSteps, by_mode
from djwork.api.errors import NotRetryable, StaleEntry
from djwork.api.records import JobRecord, Page, text, to_datetime
from djwork.api.unique_locks import remove_call
from djwork.client import client_chain
from djwork.dead import INVALID_PAYLOAD_CLASS, ScriptCall, move_to_dead
from djwork.middleware import run_client_chain
from djwork.payload import dumps, new_jid
from djwork.redis import keys, lanes
from djwork.settings.conf import get_config

ADDRESS = re.compile(r"\A(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)-(.+)\Z", re.DOTALL)
SEARCH_LIMIT = 500
SEARCH_SCAN_MAX = 10_000  # entries a text search reads before it stops (the dead set's default cap)
SEARCH_BATCH = 500
BULK_BATCH = 100
T = TypeVar("T")


@dataclass(frozen=True)
class SearchResult(Generic[T]):
    """What a bounded search found, and how far it looked: ``scanned`` of ``total`` entries.

    Entries are ``SortedEntry``s for a set, ``JobRecord``s for a queue (djwork.api.selection)."""

    entries: list[T]
    scanned: int
    total: int
    limit_reached: bool = False

    @property
    def complete(self) -> bool:
        return self.scanned >= self.total and not self.limit_reached


def parse_address(address: str) -> tuple[float, str]:
    """``"<score>-<jid>"`` -> (score, jid); ValueError when it is not one."""
    match = ADDRESS.match(address or "")
    if not match:
        raise ValueError(f"{address!r} is not a <score>-<jid> job address")
    return float(match.group(1)), match.group(2)


def _glob_insensitive(term: str) -> str:
    """A Redis MATCH pattern for ``*term*`` that ignores case (MATCH itself is case-sensitive)."""
    out = []
    for char in term:
        if char.lower() != char.upper():
            out.append(f"[{char.lower()}{char.upper()}]")
        elif char in "*?[]\\":
            out.append("\\" + char)
        else:
            out.append(char)
    return "*" + "".join(out) + "*"


@dataclass
class SortedEntry:
    """One member of a sorted set and its score (run-at, next retry, or time of death)."""

    set_key: str
    score: float
    job: JobRecord

    @property
    def address(self) -> str:
        return f"{self.score!r}-{self.job.ident}"

    @property
    def at(self) -> dt.datetime | None:
        return to_datetime(self.score)

    @property
    def jid(self) -> str:
        return self.job.jid


class JobSet:
    """A sorted set of jobs. ``ScheduledSet``, ``RetrySet`` and ``DeadSet`` fix the key."""

    key = ""
    newest_first_default = False

    def __init__(self, key: str | None = None) -> None:
        if key:
            self.key = key

    def _entries(self, pairs: Any) -> list[SortedEntry]:
        if not isinstance(pairs, list):
            return []
        return [SortedEntry(self.key, float(score), JobRecord.parse(member)) for member, score in pairs]

    def size(self) -> int:
        reply = access.read(lambda conn: conn.pipeline(transaction=False).zcard(self.key)
                            .execute(raise_on_error=False)[0])
        return reply if isinstance(reply, int) else 0

    def page(self, page: int = 1, per_page: int = 25, newest_first: bool | None = None) -> Page[SortedEntry]:
        newest_first = self.newest_first_default if newest_first is None else newest_first
        start = (page - 1) * per_page

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            pipe.zcard(self.key)
            pipe.zrange(self.key, start, start + per_page - 1, desc=newest_first, withscores=True)
            return pipe.execute(raise_on_error=False)

        size, pairs = access.read(read)
        return Page(self._entries(pairs), size if isinstance(size, int) else 0, page, per_page)

    def search(self, term: str, newest_first: bool | None = None, limit: int = SEARCH_LIMIT) -> list[SortedEntry]:
        """Entries whose class (or displayed class) or jid contains ``term``, case-insensitively."""
        newest_first = self.newest_first_default if newest_first is None else newest_first
        needle = term.strip().lower()
        if not needle:
            return []

        def read(conn: Any) -> list[tuple[bytes, float]]:
            try:
                found = []
                for pair in conn.zscan_iter(self.key, match=_glob_insensitive(needle), count=1000):
                    found.append(pair)
                return found
            except ResponseError:
                return []  # not a ZSET: nothing to find

        hits = [entry for entry in self._entries(access.read(read))
                if needle in entry.job.jid.lower() or needle in entry.job.klass.lower()
                or needle in entry.job.display_class.lower()]
        hits.sort(key=lambda entry: entry.score, reverse=newest_first)
        return hits[:limit]

    def search_text(self, term: str, newest_first: bool | None = None, limit: int = SEARCH_LIMIT,
                    scan_max: int | None = None) -> SearchResult:
        """Entries whose class, jid, error class, error message or arguments contain ``term`` (any case).

        Walks the set in display order, ``SEARCH_BATCH`` entries a round trip,
        and stops after ``scan_max`` entries or ``limit`` matches, whichever
        comes first; the result says how far it got, so a page can say the
        search was not exhaustive instead of implying there is nothing more.
        """
        needle = term.strip().lower()
        if not needle:
            return SearchResult([], 0, self.size())
        return self.select(lambda entry: entry.job.contains(needle), newest_first, limit, scan_max)

    def select(self, keep: Callable[[SortedEntry], bool], newest_first: bool | None = None,
               limit: int = SEARCH_LIMIT, scan_max: int | None = None) -> SearchResult[SortedEntry]:
        """The entries ``keep`` accepts, walking the set as ``search_text`` does (and as bounded)."""
        newest_first = self.newest_first_default if newest_first is None else newest_first
        scan_max = SEARCH_SCAN_MAX if scan_max is None else scan_max
        hits: list[SortedEntry] = []
        scanned = 0
        total = self.size()
        while scanned < min(total, scan_max) and len(hits) < limit:
            count = min(SEARCH_BATCH, scan_max - scanned)
            pairs = access.read(lambda conn, start=scanned, count=count: conn.pipeline(transaction=False)
                                .zrange(self.key, start, start + count - 1, desc=newest_first, withscores=True)
                                .execute(raise_on_error=False)[0])
            batch = self._entries(pairs)
            if not batch:
                break
            scanned += len(batch)
            hits.extend(entry for entry in batch if keep(entry))
        return SearchResult(hits[:limit], scanned, total, limit_reached=len(hits) >= limit)

    def find_job(self, jid: str) -> SortedEntry | None:
        for entry in self.search(jid):
            if entry.job.jid == jid:
                return entry
        return None

    def find_jobs(self, jids: list[str], scan_max: int = SEARCH_SCAN_MAX) -> dict[str, SortedEntry]:
        """The entries of these jids (a batch's failing jobs), in one walk of the set: jid -> entry.

        Stops once each is found or after ``scan_max`` entries; a jid not found is left out.
        """
        wanted = set(jids)
        needles = [jid.encode() for jid in wanted]
        found: dict[str, SortedEntry] = {}
        scanned = 0
        while wanted - found.keys() and scanned < scan_max:
            pairs = access.read(lambda conn, start=scanned: conn.pipeline(transaction=False)
                                .zrange(self.key, start, start + SEARCH_BATCH - 1, withscores=True)
                                .execute(raise_on_error=False)[0])
            if not isinstance(pairs, list) or not pairs:
                break
            scanned += len(pairs)
            # Only members holding one of the jids are parsed: most of a big set is other jobs.
            candidates = [(member, score) for member, score in pairs
                          if isinstance(member, bytes) and any(needle in member for needle in needles)]
            for entry in self._entries(candidates):
                if entry.job.jid in wanted:
                    found.setdefault(entry.job.jid, entry)
        return found

    def fetch(self, score: float, ident: str) -> SortedEntry | None:
        """The entry with this exact score and jid (or JobRecord.ident), else None."""

        def read(conn: Any) -> Any:
            return conn.pipeline(transaction=False).zrangebyscore(self.key, score, score, withscores=True) \
                .execute(raise_on_error=False)[0]

        for entry in self._entries(access.read(read)):
            if entry.job.matches(ident):
                return entry
        return None

    def get(self, address: str) -> SortedEntry | None:
        """By ``<score>-<jid>`` address; ValueError for a malformed address."""
        score, ident = parse_address(address)
        return self.fetch(score, ident)

    # --- actions ----------------------------------------------------------------------
    def delete(self, entry: SortedEntry) -> None:
        """Remove the entry, and release the locks it owns (a unique job's) in the same step."""
        # Not replayed: the reply says whether *this* call took the entry; a
        # replay after a lost reply would report our own delete as stale.
        if not access.write(remove_call(self.key, "zset", entry.job).evaluate, replay=False):
            raise StaleEntry(f"job {entry.job.ident} is no longer in {self.key}")

    def retry(self, entry: SortedEntry) -> str:
        """Push the job to its queue now; ``retry_count`` is decremented first, as Sidekiq's API does."""
        return self._requeue(entry, decrement=True)

    def add_to_queue(self, entry: SortedEntry) -> str:
        """Push the job to its queue now, unchanged (the Scheduled page's "Enqueue now")."""
        return self._requeue(entry, decrement=False)

    def _requeue(self, entry: SortedEntry, decrement: bool) -> str:
        """Move the entry onto its queue with promote.lua, as the scheduled poller does.

        The script pushes before it removes and does nothing once the entry is
        gone: removing first and pushing second lost the job whenever the
        connection broke between the two. For the same reason the call is
        replayed after a lost reply; the replay then finds the entry gone and
        reports it stale, though the job is on its queue exactly once.
        """
        if entry.job.item.get("class") == INVALID_PAYLOAD_CLASS:
            # Queued, it would come straight back to dead as an unknown class: the
            # wrapper only carries the unreadable text (raw_payload) for a person to read.
            raise NotRetryable(f"job {entry.job.ident} wraps an unreadable payload (its raw text is in raw_payload); "
                               "it can't run: fix and enqueue the job by hand, or delete it")
        if not entry.job.valid:
            raise NotRetryable(f"job {entry.job.ident} can't be queued: {'; '.join(entry.job.problems)}")
        payload = dict(entry.job.item)
        payload.setdefault("jid", new_jid())
        count = payload.get("retry_count")
        if decrement and isinstance(count, int) and not isinstance(count, bool):
            payload["retry_count"] = count - 1
        queue = text(payload.get("queue") or "default")
        chain = client_chain(get_config())
        if chain:
            # Client middleware sees this push as it sees any other (Sidekiq's API pushes through its Client).
            payload = run_client_chain(chain, payload, queue)
            if payload is None:
                # Stopped by a middleware: the job is dropped, as a stopped push drops it.
                self.delete(entry)
                return queue
            queue = text(payload.get("queue") or queue)
        payload.pop("at", None)  # a stored "at" would schedule the job again (docs/wire.md, check J8)
        payload["enqueued_at"] = time.time()
        target, lane = lanes.promote_target(queue, payload)  # a prioritised job to its lane (docs/priority.md)
        promote_keys = [self.key, *target]
        promote_args = [entry.job.member, dumps(payload), queue, lane]
        lock = unique.lock_of(payload)
        if lock is not None:
            # A dead job gave its lock up: queued again it takes it back, or a second copy would be accepted.
            promote_keys.append(lock)
            promote_args += [text(payload["jid"]), unique.lock_ttl_ms(payload)]
        steps = PromoteSteps(self.key, entry.job.member, dumps(payload), queue, lock,
                             text(payload["jid"]) if lock else "", unique.lock_ttl_ms(payload) if lock else 0)
        reply = access.write(by_mode(ScriptCall("promote", promote_keys, promote_args), steps).evaluate, replay=True)
        if isinstance(reply, bytes):
            raise NotRetryable(f"job {entry.job.ident} is a unique job and job {reply.decode(errors='replace')} "
                               f"holds its lock ({lock}): a copy is already queued or running. Delete this one, "
                               "or release the lock on the Locks page first")
        if not reply:
            raise StaleEntry(f"job {entry.job.ident} is no longer in {self.key}")
        return queue

    def kill(self, entry: SortedEntry) -> None:
        """Move to ``dead`` with score now, trimming it as the worker does (one atomic script).

        Replayed after a lost reply: move_entry.lua adds before it removes and
        does nothing once the entry is gone, so a second run can't bury it twice.
        The job's locks (a unique job's) are released in the same step: dead ends it.
        """
        locks = job_locks.encode(job_locks.locks_of(entry.job.item))
        bury = by_mode(move_to_dead(self.key, "zset", entry.job.member, entry.job.raw, entry.job.jid, locks=locks),
                       BurySteps(self.key, "zset", entry.job.member, entry.job.raw, entry.job.jid, locks))
        if not access.write(bury.evaluate, replay=True):
            raise StaleEntry(f"job {entry.job.ident} is no longer in {self.key}")

    def clear(self) -> int:
        """Delete every entry, releasing the locks the jobs own (clearing.py); returns how many there were."""
        return clear_releasing_locks(self.key)

    delete_all = clear

    def _each_bulk(self, action: Any) -> tuple[int, int]:
        """Apply ``action`` to every entry, oldest first, in batches; returns (done, skipped)."""
        done = skipped = 0
        budget = self.size()
        while budget > 0:
            # Entries acted on leave the set, so the ones still ahead of us are exactly the skipped ones.
            batch = self._slice(skipped, BULK_BATCH)
            if not batch:
                break
            for entry in batch:
                budget -= 1
                try:
                    action(entry)
                    done += 1
                except (NotRetryable, StaleEntry):
                    skipped += 1
        return done, skipped

    def _slice(self, offset: int, count: int) -> list[SortedEntry]:
        return self._entries(access.read(lambda conn: conn.pipeline(transaction=False)
                                         .zrange(self.key, offset, offset + count - 1, withscores=True)
                                         .execute(raise_on_error=False)[0]))

    def retry_all(self) -> tuple[int, int]:
        return self._each_bulk(self.retry)

    def add_all_to_queue(self) -> tuple[int, int]:
        return self._each_bulk(self.add_to_queue)

    def kill_all(self) -> tuple[int, int]:
        return self._each_bulk(self.kill)


class ScheduledSet(JobSet):
    key = keys.SCHEDULE


class RetrySet(JobSet):
    key = keys.RETRY


class DeadSet(JobSet):
    key = keys.DEAD
    newest_first_default = True

    def kill(self, entry: SortedEntry) -> None:
        raise NotRetryable("the job is already dead")
