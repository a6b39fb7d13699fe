"""Queues: the ``queues`` SET, each ``queue:<name>`` LIST (newest at the left) and the ``paused`` SET."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from djwork.api import access
from djwork.api.clearing import clear_releasing_locks
from djwork.api.errors import StaleEntry
from djwork.api.records import JobRecord, Page, text
from djwork.api.unique_locks import remove_call
from djwork.redis import key_layout, keys

SCAN_BATCH = 500



@dataclass(frozen=True)
class QueueSummary:
    name: str
    size: int
    latency: float
    paused: bool
    isolated: int = 0  # jobs recovered twice or more, waiting on djwork:isolated:<name> (not in `size`)


class Queue:
    """One queue. Reads never raise on bad data: a wrong-type key reads as empty."""

    def __init__(self, name: str = "default") -> None:
        self.name = name
        self.key = keys.queue(name)

    def __repr__(self) -> str:
        return f"Queue({self.name!r})"

    @staticmethod
    def names() -> list[str]:
        reply = access.read(lambda conn: conn.pipeline(transaction=False).smembers(keys.QUEUES)
                            .execute(raise_on_error=False)[0])
        return sorted(text(name) for name in reply) if isinstance(reply, set) else []

    @classmethod
    def all(cls) -> list[QueueSummary]:
        """Every queue in ``queues`` with size, latency and paused state, in two round trips."""
        names = cls.names()

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            pipe.smembers(keys.PAUSED)
            layout = key_layout.layout_of(conn)
            for name in names:
                pipe.llen(keys.queue(name))
                pipe.lindex(keys.queue(name), -1)
                pipe.llen(layout.isolated(name))
            return pipe.execute(raise_on_error=False)

        replies = access.read(read)
        paused = _paused_names(replies[0])
        out = []
        for index, name in enumerate(names):
            size, oldest, isolated = replies[1 + 3 * index:4 + 3 * index]
            out.append(QueueSummary(name, size if isinstance(size, int) else 0, _latency(oldest), name in paused,
                                    isolated if isinstance(isolated, int) else 0))
        return out

    def size(self) -> int:
        reply = access.read(lambda conn: conn.pipeline(transaction=False).llen(self.key)
                            .execute(raise_on_error=False)[0])
        return reply if isinstance(reply, int) else 0

    def isolated_size(self) -> int:
        """Jobs of this queue recovered from dead processes twice or more, waiting to run one per process."""
        reply = access.read(lambda conn: conn.pipeline(transaction=False).llen(
            key_layout.layout_of(conn).isolated(self.name))
                            .execute(raise_on_error=False)[0])
        return reply if isinstance(reply, int) else 0

    def latency(self) -> float:
        """Seconds since the oldest job (the LIST's right end) was enqueued; 0 if empty or unreadable."""
        return _latency(access.read(lambda conn: conn.pipeline(transaction=False).lindex(self.key, -1)
                                    .execute(raise_on_error=False)[0]))

    def paused(self) -> bool:
        reply = access.read(lambda conn: conn.pipeline(transaction=False).sismember(keys.PAUSED, self.name)
                            .execute(raise_on_error=False)[0])
        return reply is True or reply == 1

    def pause(self) -> None:
        """Workers stop fetching from this queue within a few seconds (the ``paused`` SET, Sidekiq Pro's)."""
        # Replayed: adding a name twice changes nothing.
        access.write(lambda conn: conn.sadd(keys.PAUSED, self.name), replay=True)

    def resume(self) -> None:
        access.write(lambda conn: conn.srem(keys.PAUSED, self.name), replay=True)

    def jobs(self, page: int = 1, per_page: int = 25, oldest_first: bool = False) -> Page[JobRecord]:
        """One page of jobs, newest first by default (LRANGE from the left, where pushes land)."""
        start = (page - 1) * per_page

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            pipe.llen(self.key)
            if oldest_first:
                pipe.lrange(self.key, -(start + per_page), -(start + 1))
            else:
                pipe.lrange(self.key, start, start + per_page - 1)
            return pipe.execute(raise_on_error=False)

        size, members = access.read(read)
        members = members if isinstance(members, list) else []
        if oldest_first:
            members = list(reversed(members))
        return Page([JobRecord.parse(raw, self.name) for raw in members],
                    size if isinstance(size, int) else 0, page, per_page)

    def find_job(self, ident: str) -> JobRecord | None:
        """Linear scan, as Sidekiq's Queue#find_job; ``ident`` is a jid or JobRecord.ident."""
        start = 0
        while True:
            batch = access.read(lambda conn, s=start: conn.pipeline(transaction=False)
                                .lrange(self.key, s, s + SCAN_BATCH - 1).execute(raise_on_error=False)[0])
            if not isinstance(batch, list) or not batch:
                return None
            for raw in batch:
                record = JobRecord.parse(raw, self.name)
                if record.matches(ident):
                    return record
            start += SCAN_BATCH

    def delete_job(self, ident: str) -> JobRecord:
        """LREM the exact member, releasing its locks in the same step; StaleEntry if it left the queue."""
        record = self.find_job(ident)
        if record is None:
            raise StaleEntry(f"job {ident} is no longer in queue {self.name} (it may have run already)")
        # Not replayed: LREM 1 run twice could remove a second, identical copy of the job.
        removed = access.write(remove_call(self.key, "list", record).evaluate, replay=False)
        if not removed:
            raise StaleEntry(f"job {ident} left queue {self.name} before it could be deleted")
        return record

    def clear(self) -> int:
        """Delete the LIST and drop the name from ``queues`` (Sidekiq's Queue#clear); returns jobs removed.

        The jobs' unique locks are released too (clearing.py), so their copies can be queued again.
        """
        return clear_releasing_locks(self.key, self.name)


def _paused_names(reply: Any) -> set[str]:
    return {text(name) for name in reply} if isinstance(reply, set) else set()


def _latency(oldest: Any) -> float:
    if oldest is None or isinstance(oldest, Exception):
        return 0.0
    return JobRecord.parse(oldest).latency
