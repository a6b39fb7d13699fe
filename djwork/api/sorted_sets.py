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
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from djwork import keys, scripts
from djwork import redis as redis_layer
from djwork.api.records import JobRecord, NotRetryable, Page, StaleEntry, text, to_datetime

ADDRESS = re.compile(r"\A(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)-(.+)\Z", re.DOTALL)
SEARCH_LIMIT = 500
BULK_BATCH = 100


def _admin_read(block: Any) -> Any:
    return redis_layer.run(block, idempotent=True, purpose="admin")


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
        reply = _admin_read(lambda conn: conn.pipeline(transaction=False).zcard(self.key)
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

        size, pairs = _admin_read(read)
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

        hits = [entry for entry in self._entries(_admin_read(read))
                if needle in entry.job.jid.lower() or needle in entry.job.klass.lower()
                or needle in entry.job.display_class.lower()]
        hits.sort(key=lambda entry: entry.score, reverse=newest_first)
        return hits[:limit]

    def find_job(self, jid: str) -> SortedEntry | None:
        for entry in self.search(jid):
            if entry.job.jid == jid:
                return entry
        return None

    def fetch(self, score: float, ident: str) -> SortedEntry | None:
        """The entry with this exact score and jid (or JobRecord.ident), else None."""

        def read(conn: Any) -> Any:
            return conn.pipeline(transaction=False).zrangebyscore(self.key, score, score, withscores=True) \
                .execute(raise_on_error=False)[0]

        for entry in self._entries(_admin_read(read)):
            if entry.job.matches(ident):
                return entry
        return None

    def get(self, address: str) -> SortedEntry | None:
        """By ``<score>-<jid>`` address; ValueError for a malformed address."""
        score, ident = parse_address(address)
        return self.fetch(score, ident)

    # --- actions ----------------------------------------------------------------------
    def _remove(self, entry: SortedEntry) -> bool:
        # Not replayed: the reply says whether *we* took it, which decides if it is pushed.
        return bool(redis_layer.run(lambda conn: conn.zrem(self.key, entry.job.raw), purpose="admin"))

    def delete(self, entry: SortedEntry) -> None:
        if not self._remove(entry):
            raise StaleEntry(f"job {entry.job.ident} is no longer in {self.key}")

    def retry(self, entry: SortedEntry) -> str:
        """Push the job to its queue now; ``retry_count`` is decremented first, as Sidekiq's API does."""
        return self._requeue(entry, decrement=True)

    def add_to_queue(self, entry: SortedEntry) -> str:
        """Push the job to its queue now, unchanged (the Scheduled page's "Enqueue now")."""
        return self._requeue(entry, decrement=False)

    def _requeue(self, entry: SortedEntry, decrement: bool) -> str:
        from djwork import client
        from djwork.payload import new_jid

        if not entry.job.valid:
            raise NotRetryable(f"job {entry.job.ident} can't be queued: {'; '.join(entry.job.problems)}")
        if not self._remove(entry):
            raise StaleEntry(f"job {entry.job.ident} is no longer in {self.key}")
        payload = dict(entry.job.item)
        payload.setdefault("jid", new_jid())
        count = payload.get("retry_count")
        if decrement and isinstance(count, int) and not isinstance(count, bool):
            payload["retry_count"] = count - 1
        try:
            client.push(payload)
        except Exception:
            # Removed but not pushed: put it back rather than lose it.
            redis_layer.run(lambda conn: conn.zadd(self.key, {entry.job.raw: entry.score}), idempotent=True,
                            purpose="admin")
            raise
        return text(payload.get("queue") or "default")

    def kill(self, entry: SortedEntry) -> None:
        """Move to ``dead`` with score now, trimming it as the worker does (one atomic script)."""
        from djwork.conf import get_config

        config = get_config()
        now = time.time()
        args = ["zset", entry.job.raw, entry.job.raw, repr(now), "1", repr(now - config.dead_timeout),
                config.dead_max_jobs, ""]
        moved = redis_layer.run(
            lambda conn: scripts.evaluate(conn, "move_entry", [self.key, keys.DEAD, keys.ORPHAN_COUNTS], args),
            purpose="admin")
        if not moved:
            raise StaleEntry(f"job {entry.job.ident} is no longer in {self.key}")

    def clear(self) -> int:
        """Delete every entry; returns how many there were."""

        def write(conn: Any) -> int:
            pipe = conn.pipeline(transaction=True)
            pipe.zcard(self.key)
            pipe.unlink(self.key)
            size = pipe.execute(raise_on_error=False)[0]
            return size if isinstance(size, int) else 0

        return redis_layer.run(write, idempotent=True, purpose="admin")

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
        return self._entries(_admin_read(lambda conn: conn.pipeline(transaction=False)
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
