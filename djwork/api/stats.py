"""Cluster totals (Sidekiq::Stats), per-day history (Stats::History) and the Redis server's INFO."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import ResponseError

from djwork.api import access
from djwork.api.records import JobRecord, text, to_int
from djwork.redis import keys
from djwork.redis import risks as redis_risks
from djwork.redis.cluster import servers

INFO_FIELDS = ("redis_version", "uptime_in_days", "connected_clients", "used_memory_human",
               "used_memory_peak_human", "maxmemory_human", "role")


def _size(reply: Any) -> int:
    return reply if isinstance(reply, int) else 0


def _members(reply: Any) -> list[str]:
    return sorted(text(name) for name in reply) if isinstance(reply, (set, list)) else []


@dataclass(frozen=True)
class DayStat:
    date: dt.date
    processed: int
    failed: int


@dataclass(frozen=True)
class Stats:
    """One consistent-enough snapshot of the cluster's counters (three pipelined round trips)."""

    processed: int
    failed: int
    scheduled: int
    retries: int
    dead: int
    processes: int
    queues: dict[str, int]
    busy: int = 0
    default_queue_latency: float = 0.0
    expired: int = 0  # jobs dropped unrun past their expires_at (djwork's own counter; Sidekiq has none)
    problems: tuple[str, ...] = field(default=())

    @property
    def enqueued(self) -> int:
        return sum(self.queues.values())

    # Sidekiq's names, for code ported from Ruby.
    scheduled_size = property(lambda self: self.scheduled)
    retry_size = property(lambda self: self.retries)
    dead_size = property(lambda self: self.dead)
    processes_size = property(lambda self: self.processes)
    workers_size = property(lambda self: self.busy)

    def as_json(self) -> dict[str, Any]:
        return {
            "processed": self.processed, "failed": self.failed, "busy": self.busy, "enqueued": self.enqueued,
            "scheduled": self.scheduled, "retries": self.retries, "dead": self.dead,
            "processes": self.processes, "default_latency": round(self.default_queue_latency, 3),
            "expired": self.expired,
        }

    @classmethod
    def fetch(cls) -> Stats:
        return access.read(cls._read)

    @classmethod
    def _read(cls, conn: Any) -> Stats:
        problems: list[str] = []
        pipe = conn.pipeline(transaction=False)
        pipe.get(keys.STAT_PROCESSED)
        pipe.get(keys.STAT_FAILED)
        pipe.zcard(keys.SCHEDULE)
        pipe.zcard(keys.RETRY)
        pipe.zcard(keys.DEAD)
        pipe.smembers(keys.PROCESSES)
        pipe.smembers(keys.QUEUES)
        pipe.lindex(keys.queue("default"), -1)
        pipe.get(keys.STAT_EXPIRED)
        replies = pipe.execute(raise_on_error=False)
        labels = (keys.STAT_PROCESSED, keys.STAT_FAILED, keys.SCHEDULE, keys.RETRY, keys.DEAD, keys.PROCESSES,
                  keys.QUEUES, keys.queue("default"), keys.STAT_EXPIRED)
        for label, reply in zip(labels, replies, strict=True):
            if isinstance(reply, Exception):
                problems.append(f"{label}: {reply}")
        processed, failed, scheduled, retries, dead, processes, names, oldest, expired = replies
        process_ids = _members(processes)
        queue_names = _members(names)
        pipe = conn.pipeline(transaction=False)
        for name in queue_names:
            pipe.llen(keys.queue(name))
        for identity in process_ids:
            pipe.hget(keys.process(identity), "busy")
        tail = pipe.execute(raise_on_error=False)
        sizes, busy = tail[:len(queue_names)], tail[len(queue_names):]
        latency = 0.0
        if oldest is not None and not isinstance(oldest, Exception):
            latency = JobRecord.parse(oldest).latency
        return cls(
            processed=to_int(processed), failed=to_int(failed), scheduled=_size(scheduled),
            retries=_size(retries), dead=_size(dead), processes=len(process_ids),
            queues={name: _size(size) for name, size in zip(queue_names, sizes, strict=True)},
            busy=sum(to_int(value) for value in busy if not isinstance(value, Exception)),
            default_queue_latency=latency, problems=tuple(problems), expired=to_int(expired),
        )

    @staticmethod
    def history(days: int = 30, start: dt.date | None = None) -> list[DayStat]:
        """Per-day processed/failed from ``stat:{processed,failed}:YYYY-MM-DD`` (UTC), newest first."""
        start = start or dt.datetime.now(dt.UTC).date()
        dates = [start - dt.timedelta(days=offset) for offset in range(max(1, days))]

        def read(conn: Any) -> list[Any]:
            # One GET per key, not MGET: on a Redis Cluster the days' keys hash to different slots,
            # and a pipeline of GETs is still one round trip (per node).
            pipe = conn.pipeline(transaction=False)
            for day in dates:
                pipe.get(keys.stat_processed_day(day.isoformat()))
                pipe.get(keys.stat_failed_day(day.isoformat()))
            return pipe.execute(raise_on_error=False)

        replies = [None if isinstance(reply, Exception) else reply for reply in access.read(read)]
        return [DayStat(day, to_int(replies[2 * index]), to_int(replies[2 * index + 1]))
                for index, day in enumerate(dates)]


def redis_info() -> dict[str, str]:
    """The INFO fields the overview shows; {} when INFO is unavailable (renamed on managed Redis).

    A cluster's primaries are asked one by one; a field they differ on shows each one's value, in
    the order of their addresses ("1.2M / 1.1M / 1.3M").
    """

    def read(conn: Any) -> list[dict[str, Any]]:
        try:
            return [server.info() for _name, server in servers(conn)]
        except ResponseError:
            return []

    infos = access.read(read)
    shown = {}
    for name in INFO_FIELDS:
        values = list(dict.fromkeys(text(info[name]) for info in infos if name in info))
        if values:
            shown[name] = " / ".join(values)
    return shown


def redis_settings_risks() -> list[redis_risks.RedisRisk]:
    """Redis settings that lose jobs (evicting policy, memory near maxmemory) and the no-persistence note."""
    return access.read(redis_risks.read)
