"""Queues: the ``queues`` SET, each ``queue:<name>`` LIST (newest at the left) and the ``paused`` SET.

A queue's size and latency count the jobs waiting in its priority lanes too (docs/priority.md): the
lanes its ``djwork:lanes:<name>`` SET registers, read only when it registers any.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from djwork.api import access
from djwork.api.clearing import clear_releasing_locks
from djwork.api.errors import StaleEntry
from djwork.api.records import JobRecord, Page, text
from djwork.api.unique_locks import remove_call
from djwork.redis import key_layout, keys, lanes

SCAN_BATCH = 500



@dataclass(frozen=True)
class QueueSummary:
    name: str
    size: int
    latency: float
    paused: bool
    isolated: int = 0  # jobs recovered twice or more, waiting on djwork:isolated:<name> (not in `size`)
    prioritised: int = 0  # of `size`, the jobs waiting in the queue's priority lanes (docs/priority.md)


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
                pipe.smembers(layout.lanes(name))
            return pipe.execute(raise_on_error=False)

        replies = access.read(read)
        paused = _paused_names(replies[0])
        layout = _layout()
        registered = {name: _lane_keys(name, replies[4 + 4 * index], layout) for index, name in enumerate(names)}
        # A third round trip only when some queue has lanes registered.
        in_lanes = access.read(lambda conn: _read_lists(conn, registered)) if any(registered.values()) else {}
        out = []
        for index, name in enumerate(names):
            size, oldest, isolated = replies[1 + 4 * index:4 + 4 * index]
            size = size if isinstance(size, int) else 0
            lane_size, lane_oldest = in_lanes.get(name, (0, 0.0))
            out.append(QueueSummary(name, size + lane_size, max(_latency(oldest), lane_oldest), name in paused,
                                    isolated if isinstance(isolated, int) else 0, lane_size))
        return out

    def lane_keys(self) -> list[str]:
        """The LIST keys of this queue's registered priority lanes, highest lane first (docs/priority.md)."""
        layout = _layout()
        reply = access.read(lambda conn: conn.pipeline(transaction=False).smembers(layout.lanes(self.name))
                            .execute(raise_on_error=False)[0])
        return _lane_keys(self.name, reply, layout)

    def size(self) -> int:
        """Jobs waiting: the queue's own list and its priority lanes."""
        reply = access.read(lambda conn: conn.pipeline(transaction=False).llen(self.key)
                            .execute(raise_on_error=False)[0])
        registered = {self.name: self.lane_keys()}
        lane_size = access.read(lambda conn: _read_lists(conn, registered))[self.name][0] if registered[
            self.name] else 0
        return (reply if isinstance(reply, int) else 0) + lane_size

    def isolated_size(self) -> int:
        """Jobs of this queue recovered from dead processes twice or more, waiting to run one per process."""
        reply = access.read(lambda conn: conn.pipeline(transaction=False).llen(
            key_layout.layout_of(conn).isolated(self.name))
                            .execute(raise_on_error=False)[0])
        return reply if isinstance(reply, int) else 0

    def latency(self) -> float:
        """Seconds since the oldest job (a LIST's right end: the queue's own or a lane's) was enqueued; 0 if
        empty or unreadable."""
        own = _latency(access.read(lambda conn: conn.pipeline(transaction=False).lindex(self.key, -1)
                                   .execute(raise_on_error=False)[0]))
        registered = {self.name: self.lane_keys()}
        if not registered[self.name]:
            return own
        return max(own, access.read(lambda conn: _read_lists(conn, registered))[self.name][1])

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

    def lists(self) -> list[tuple[int, str]]:
        """(lane, LIST key) of each list this queue's jobs wait on, in the order a worker takes from them: the
        registered lanes above the queue's own list (highest first), the list (lane 0), the lanes below."""
        layout = _layout()
        reply = access.read(lambda conn: conn.pipeline(transaction=False).smembers(layout.lanes(self.name))
                            .execute(raise_on_error=False)[0])
        return _lists(self.name, reply, layout)

    def jobs(self, page: int = 1, per_page: int = 25, oldest_first: bool = False) -> Page[JobRecord]:
        """One page of the jobs waiting, list by list in the order a worker takes them (``lists``); within each
        list newest first by default (LRANGE from the left, where pushes land). Oldest first is exactly the
        order of taking. Each record's ``lane`` says which list it was read from."""
        start = (page - 1) * per_page
        layout = _layout()

        def first_read(conn: Any) -> list[Any]:
            # The queue's own list read as if it were alone: a queue without lanes costs one round trip.
            pipe = conn.pipeline(transaction=False)
            pipe.smembers(layout.lanes(self.name))
            pipe.llen(self.key)
            _range(pipe, self.key, start, start + per_page, oldest_first)
            return pipe.execute(raise_on_error=False)

        registered, size, members = access.read(first_read)
        lists = _lists(self.name, registered, layout)
        if len(lists) == 1:
            return Page(_records(self.name, 0, members, oldest_first), size if isinstance(size, int) else 0,
                        page, per_page)

        def lengths(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for _lane, key in lists:
                pipe.llen(key)
            return pipe.execute(raise_on_error=False)

        sizes = [length if isinstance(length, int) else 0 for length in access.read(lengths)]
        # A page may span several lists: each list's part of [start, start + per_page) in the lists' order.
        slices, offset = [], 0
        for (lane, key), length in zip(lists, sizes, strict=True):
            first, stop = max(start - offset, 0), min(start + per_page - offset, length)
            if first < stop:
                slices.append((lane, key, first, stop))
            offset += length

        def ranges(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for _lane, key, first, stop in slices:
                _range(pipe, key, first, stop, oldest_first)
            return pipe.execute(raise_on_error=False)

        replies = access.read(ranges) if slices else []
        items = [record for (lane, _key, _first, _stop), reply in zip(slices, replies, strict=True)
                 for record in _records(self.name, lane, reply, oldest_first)]
        return Page(items, sum(sizes), page, per_page)

    def find_job(self, ident: str) -> JobRecord | None:
        """Linear scan, as Sidekiq's Queue#find_job, of each of ``lists`` in turn; ``ident`` is a jid or
        JobRecord.ident. The record's ``lane`` is the list it was found in."""
        for lane, key in self.lists():
            start = 0
            while True:
                batch = access.read(lambda conn, k=key, s=start: conn.pipeline(transaction=False)
                                    .lrange(k, s, s + SCAN_BATCH - 1).execute(raise_on_error=False)[0])
                if not isinstance(batch, list) or not batch:
                    break
                for raw in batch:
                    record = JobRecord.parse(raw, self.name, lane)
                    if record.matches(ident):
                        return record
                start += SCAN_BATCH
        return None

    def delete_job(self, ident: str) -> JobRecord:
        """LREM the exact member from the list it waits on (its lane's or the queue's own), releasing its locks
        in the same step; StaleEntry if it left the queue."""
        record = self.find_job(ident)
        if record is None:
            raise StaleEntry(f"job {ident} is no longer in queue {self.name} (it may have run already)")
        # Not replayed: LREM 1 run twice could remove a second, identical copy of the job.
        removed = access.write(remove_call(lanes.list_key(self.name, record.lane, _layout()), "list", record).evaluate,
                               replay=False)
        if not removed:
            raise StaleEntry(f"job {ident} left queue {self.name} before it could be deleted")
        return record

    def clear(self) -> int:
        """Delete the LIST and drop the name from ``queues`` (Sidekiq's Queue#clear); returns jobs removed.

        The jobs' unique locks are released too (clearing.py), so their copies can be queued again. The
        jobs in the queue's priority lanes go too; the lanes stay registered until a fetch finds them empty
        (dropping the registration here could drop that of a job pushed meanwhile).
        """
        return clear_releasing_locks(self.key, self.name) + sum(
            clear_releasing_locks(key) for key in self.lane_keys())


def _layout() -> key_layout.Layout:
    """The key layout of the Redis the API reads: a cluster's lanes carry their queue's hash tag."""
    return access.read(key_layout.layout_of)


def _lists(name: str, members: Any, layout: key_layout.Layout) -> list[tuple[int, str]]:
    """``Queue.lists`` from the queue's lanes SET ``members``."""
    return [(lane, lanes.list_key(name, lane, layout))
            for lane in sorted([*lanes.registered(members), 0], reverse=True)]


def _range(pipe: Any, key: str, first: int, stop: int, oldest_first: bool) -> None:
    """Queue the LRANGE of positions [first, stop) of ``key``, counted from the newest (left) or oldest end."""
    if oldest_first:
        pipe.lrange(key, -stop, -(first + 1))
    else:
        pipe.lrange(key, first, stop - 1)


def _records(name: str, lane: int, members: Any, oldest_first: bool) -> list[JobRecord]:
    members = members if isinstance(members, list) else []
    return [JobRecord.parse(raw, name, lane) for raw in (reversed(members) if oldest_first else members)]


def _lane_keys(name: str, members: Any, layout: key_layout.Layout) -> list[str]:
    """The lane LIST keys a lanes SET's ``members`` name, highest lane first (djwork/redis/lanes.py)."""
    return [lanes.list_key(name, lane, layout) for lane in lanes.registered(members)]


def _read_lists(conn: Any, registered: dict[str, list[str]]) -> dict[str, tuple[int, float]]:
    """Per queue: the jobs waiting in its lanes ``registered`` and the latency of the oldest one."""
    pipe = conn.pipeline(transaction=False)
    for lane_keys in registered.values():
        for key in lane_keys:
            pipe.llen(key)
            pipe.lindex(key, -1)
    replies = iter(pipe.execute(raise_on_error=False))
    out = {}
    for name, lane_keys in registered.items():
        size, latency = 0, 0.0
        for _key in lane_keys:
            length, oldest = next(replies), next(replies)
            size += length if isinstance(length, int) else 0
            latency = max(latency, _latency(oldest))
        out[name] = (size, latency)
    return out


def _paused_names(reply: Any) -> set[str]:
    return {text(name) for name in reply} if isinstance(reply, set) else set()


def _latency(oldest: Any) -> float:
    if oldest is None or isinstance(oldest, Exception):
        return 0.0
    return JobRecord.parse(oldest).latency
