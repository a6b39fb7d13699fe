"""Rate limiters (docs/limiters.md): the registry, each limiter's status and stats, reset and delete.

Status reads never write. Nothing here trims a window, drains a level or
reclaims a lapsed lease: a read that trimmed a window would free it for a
second full charge. What the next acquisition would find is computed from a
snapshot on Redis's clock (djwork.limiter.usage). Listing reads the registry
(names still live), then the page's limiters: three pipelined round trips.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from djwork.api import access
from djwork.api.records import Page, text, to_datetime, to_float
from djwork.limiter import admin, usage
from djwork.limiter.names import validate_name
from djwork.limiter.stats import LimiterStats, parse_stats
from djwork.redis import keys
from djwork.redis.cluster import pipeline_with_time
from djwork.redis.key_layout import layout_of

KINDS = ("concurrent", "bucket", "window", "leaky", "points")


@dataclass(frozen=True)
class LimiterHolder:
    token: str
    identity: str
    jid: str
    acquired_at: dt.datetime | None
    lease_ends_at: dt.datetime | None
    lapsed: bool  # past lock_timeout: the next acquisition reclaims it


@dataclass(frozen=True)
class LimiterWaiter:
    token: str
    identity: str
    jid: str
    since: dt.datetime | None
    deadline: dt.datetime | None


@dataclass(frozen=True)
class LimiterSummary:
    name: str
    kind: str
    size: int
    interval: float  # seconds; 0 for concurrent
    lock_timeout: float | None
    wait_timeout: float | None
    ttl: float | None
    used: float
    available: float
    waiting: int
    reset_at: dt.datetime | None  # when wholly free again (None: it is, or it frees on release)
    expires_at: dt.datetime | None  # when the registry forgets it unless it is used
    stats: LimiterStats
    problems: tuple[str, ...] = field(default=())

    @property
    def used_fraction(self) -> float:
        return min(1.0, self.used / self.size) if self.size else 0.0


@dataclass(frozen=True)
class LimiterDetail:
    summary: LimiterSummary
    holders: list[LimiterHolder]
    waiters: list[LimiterWaiter]


def _now(reply: Any) -> float:
    seconds, micros = reply
    return int(seconds) + int(micros) / 1e6


def _hash(reply: Any) -> dict[str, str]:
    return {text(key): text(value) for key, value in reply.items()} if isinstance(reply, dict) else {}


def _pairs(reply: Any) -> list[tuple[str, float]]:
    return [(text(member), float(score)) for member, score in reply] if isinstance(reply, list) else []


class _Snapshot:
    """Reads of a set of limiters at one Redis time: metadata, stats, waiters, then each kind's state."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def read(self, conn: Any, now: float) -> list[tuple[str, dict[str, str], list[Any]]]:
        layout = layout_of(conn)
        pipe = conn.pipeline(transaction=False)
        for name in self.names:
            limiter_keys = layout.limiter(name)
            pipe.hgetall(limiter_keys.meta)
            pipe.hgetall(limiter_keys.stats)
            pipe.hgetall(limiter_keys.waiting)
        first = pipe.execute(raise_on_error=False)
        metas = [_hash(first[3 * index]) for index in range(len(self.names))]
        pipe = conn.pipeline(transaction=False)
        with_owners = []
        for name, meta in zip(self.names, metas, strict=True):
            kind, interval = meta.get("kind", ""), to_float(meta.get("interval")) or 0.0
            limiter_keys = layout.limiter(name)
            with_owners.append(kind == "concurrent")
            if kind == "concurrent":
                pipe.zrange(limiter_keys.holders, 0, -1, withscores=True)
                pipe.hgetall(limiter_keys.owners)
            elif kind == "window" and interval > 0:
                # Only the scores inside the window: entries not yet trimmed are left where they are.
                pipe.zrangebyscore(limiter_keys.state, f"({now - interval!r}", "+inf", withscores=True)
            else:
                pipe.hgetall(limiter_keys.state)
            pipe.zrange(limiter_keys.waiters, 0, -1, withscores=True)
        second = iter(pipe.execute(raise_on_error=False))
        snapshot = []
        for index, (name, owners) in enumerate(zip(self.names, with_owners, strict=True)):
            # Only a concurrent limiter has owners: no filler command stands in for the others' (a cluster
            # refuses a keyless command such as ECHO in a pipeline).
            state = next(second)
            owned = next(second) if owners else b""
            snapshot.append((name, metas[index], [first[3 * index + 1], first[3 * index + 2], state, owned,
                                                  next(second)]))
        return snapshot


def _summarize(name: str, meta: dict[str, str], replies: list[Any], now: float,
               expires: float | None) -> tuple[LimiterSummary, list[LimiterHolder], list[LimiterWaiter]]:
    stats_reply, waiting_reply, state_reply, owners_reply, waiters_reply = replies
    problems = [f"{what} is not readable ({text(reply)})" for what, reply in
                (("stats", stats_reply), ("waiting list", waiting_reply), ("state", state_reply),
                 ("owners", owners_reply), ("waiters", waiters_reply)) if isinstance(reply, Exception)]
    kind = meta.get("kind", "")
    size = int(to_float(meta.get("size")) or 0)
    interval = to_float(meta.get("interval")) or 0.0
    lock_timeout = to_float(meta.get("lock_timeout"))
    readable = bool(meta) and kind in KINDS and size >= 1 and (kind == "concurrent" or interval > 0)
    if not meta:
        problems.append("its metadata is gone (expired or deleted); it registers again on its next use")
    elif kind not in KINDS:
        problems.append(f"unknown kind {kind!r}")
    elif not readable:
        problems.append(f"unreadable size {meta.get('size')!r} or interval {meta.get('interval')!r}")
    now_usage = usage.Usage(0.0, float(size), None)
    holders: list[LimiterHolder] = []
    if readable and kind == "concurrent":
        leases = _pairs(state_reply)
        owners = _hash(owners_reply)
        now_usage = usage.concurrent(size, [end for _token, end in leases], now)
        for token, end in leases:
            identity, jid, acquired = (owners.get(token, "").split("\t") + ["", "", ""])[:3]
            holders.append(LimiterHolder(token, identity, jid, to_datetime(to_float(acquired)),
                                         to_datetime(end), end < now))
    elif readable and kind == "window":
        now_usage = usage.window(size, interval, [at for _token, at in _pairs(state_reply)], now)
    elif readable and kind == "bucket":
        now_usage = usage.bucket(size, interval, state_reply, now)
    elif readable:
        now_usage = usage.level(size, interval, state_reply, now)
    waiting = _hash(waiting_reply)
    waiters = []
    for token, since in _pairs(waiters_reply):
        deadline, identity, jid = (waiting.get(token, "").split("\t") + ["", "", ""])[:3]
        deadline_at = to_float(deadline)
        if deadline_at is not None and deadline_at >= now:
            waiters.append(LimiterWaiter(token, identity, jid, to_datetime(since), to_datetime(deadline_at)))
    summary = LimiterSummary(
        name=name, kind=kind, size=size, interval=interval, lock_timeout=lock_timeout,
        wait_timeout=to_float(meta.get("wait_timeout")), ttl=to_float(meta.get("ttl")), used=now_usage.used,
        available=now_usage.available, waiting=len(waiters), reset_at=to_datetime(now_usage.reset_at),
        expires_at=to_datetime(expires), stats=parse_stats(stats_reply), problems=tuple(problems))
    return summary, holders, waiters


class Limiters:
    """The registered limiters still live, sorted by name; ``name_filter`` keeps names containing it (any case)."""

    def __init__(self, name_filter: str = "") -> None:
        self.name_filter = name_filter.strip().lower()

    def _registry(self, conn: Any) -> tuple[float, list[tuple[str, float]]]:
        pipe = pipeline_with_time(conn)  # TIME first (a cluster asks one primary)
        pipe.zrange(keys.LIMITERS, 0, -1, withscores=True)
        now_reply, entries = pipe.execute(raise_on_error=False)
        now = _now(now_reply)
        live = [(name, expires) for name, expires in _pairs(entries) if expires >= now
                and (not self.name_filter or self.name_filter in name.lower())]
        return now, sorted(live)

    def names(self) -> list[str]:
        return [name for name, _expires in access.read(self._registry)[1]]

    def size(self) -> int:
        return len(self.names())

    def page(self, page: int = 1, per_page: int = 25) -> Page[LimiterSummary]:
        page, per_page = max(1, page), max(1, per_page)

        def read(conn: Any) -> Page[LimiterSummary]:
            now, live = self._registry(conn)
            chosen = live[(page - 1) * per_page:page * per_page]
            snapshot = _Snapshot([name for name, _expires in chosen]).read(conn, now)
            items = [_summarize(name, meta, replies, now, expires)[0]
                     for (name, meta, replies), (_name, expires) in zip(snapshot, chosen, strict=True)]
            return Page(items, len(live), page, per_page)

        return access.read(read)

    def all(self) -> list[LimiterSummary]:
        return self.page(1, max(1, self.size())).items


class Limiter:
    """One limiter by name: its status with holders and waiters, and the admin actions."""

    def __init__(self, name: str) -> None:
        self.name = validate_name(name)

    def __repr__(self) -> str:
        return f"Limiter({self.name!r})"

    def detail(self) -> LimiterDetail | None:
        """Status, stats, holders (concurrent) and waiters; None when Redis knows nothing of it."""

        def read(conn: Any) -> LimiterDetail | None:
            pipe = pipeline_with_time(conn)  # TIME first (a cluster asks one primary)
            pipe.zscore(keys.LIMITERS, self.name)
            now_reply, expires = pipe.execute(raise_on_error=False)
            now = _now(now_reply)
            ((name, meta, replies),) = _Snapshot([self.name]).read(conn, now)
            if not meta and to_float(expires) is None:
                return None
            summary, holders, waiters = _summarize(name, meta, replies, now, to_float(expires))
            return LimiterDetail(summary, holders, waiters)

        return access.read(read)

    def summary(self) -> LimiterSummary | None:
        detail = self.detail()
        return detail.summary if detail else None

    def reset(self) -> int:
        """Forget what it used (slots held, counts, the window, the level); stats stay. Returns slots freed.

        Holders of freed slots find them gone at release (logged, not an error) and the freed
        slots go to the waiting list at once.
        """
        # Replayed: a second reset finds nothing more to forget.
        return access.write(lambda conn: admin.reset(conn, self.name), replay=True)

    def delete(self) -> int:
        """Remove it: every key and its registry entry (its next use registers it again). Returns slots freed."""
        # Replayed: deleting what is gone changes nothing.
        return access.write(lambda conn: admin.delete(conn, self.name), replay=True)
