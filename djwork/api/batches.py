"""Batches (docs/batches.md): the listing, newest first, filterable by description, and one batch's status.

The listing is the ``batches`` ZSET (bid -> created_at). A batch's keys
expire (24 h after success, 30 days after its last add) while its entry
stays: entries whose hash is gone are dropped when a page meets them.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from djwork.api import access
from djwork.api.records import Page
from djwork.batches.batch import LISTING_TTL
from djwork.batches.status import BatchStatus, parse, read_status
from djwork.redis import keys
from djwork.redis.key_layout import layout_of

FILTER_SCAN_LIMIT = 5_000  # entries a description or kind filter looks through, newest first
KINDS = ("all", "batch", "canvas")  # every batch; those of ``djwork.Batch``; those a canvas made for itself


def _statuses(conn: Any, bids: list[str]) -> list[BatchStatus | None]:
    pipe = conn.pipeline(transaction=False)
    layout = layout_of(conn)  # a cluster's companions carry the batch's hash tag
    for bid in bids:
        named = layout.batch(bid)
        pipe.hgetall(named.hash)
        pipe.scard(named.jids)
        pipe.scard(named.failed)
        pipe.scard(named.died)
        pipe.ttl(named.hash)
    replies = pipe.execute()
    found: list[BatchStatus | None] = []
    for index, bid in enumerate(bids):
        fields, pending, failures, dead, ttl = replies[index * 5:index * 5 + 5]
        found.append(parse(bid, fields, pending, failures, dead, ttl) if fields else None)
    return with_after_state(conn, found)


def with_after_state(conn: Any, statuses: list[BatchStatus | None]) -> list[BatchStatus | None]:
    """Each unfinished canvas step told whether its job was pushed yet: a chain's step 2 whose step 1 is
    retrying was shown "running" though its job is queued nowhere."""
    waiting = [status for status in statuses if status is not None and status.after and status.pending]
    if not waiting:
        return statuses
    pipe = conn.pipeline(transaction=False)
    for status in waiting:
        pipe.hmget(keys.batch(str(status.after)), "bid", "success_at", "settled_at")
    states = {}
    for status, (exists, success_at, settled_at) in zip(waiting, pipe.execute(), strict=True):
        if exists is None:
            continue  # the predecessor's keys expired (a day after its success): the job was pushed long ago
        states[status.bid] = "" if success_at is not None else "never" if settled_at is not None else "waiting"
    return [dataclasses.replace(status, after_state=states[status.bid]) if status is not None
            and states.get(status.bid) else status for status in statuses]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Batches:
    """Every batch still in Redis, newest first; ``description`` keeps those whose description contains it,
    ``kind`` those of one kind (KINDS): "batch" leaves out the batches a canvas makes for its steps."""

    def __init__(self, description: str = "", kind: str = "all") -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown batch kind {kind!r}; one of {', '.join(KINDS)}")
        self.description = description.strip().lower()
        self.kind = kind

    @property
    def filtered(self) -> bool:
        return bool(self.description) or self.kind != "all"

    def _forget_expired(self, conn: Any, gone: list[str]) -> None:
        # Safe to replay: removing a bid whose keys are gone twice removes nothing more.
        conn.zremrangebyscore(keys.BATCHES, "-inf", time.time() - LISTING_TTL)
        if gone:
            conn.zrem(keys.BATCHES, *gone)

    def size(self) -> int:
        if self.filtered:
            return len(self._matching())
        return int(access.read(lambda conn: conn.zcard(keys.BATCHES)))

    def _matching(self) -> list[str]:
        def read(conn: Any) -> list[str]:
            bids = [_text(bid) for bid in conn.zrevrange(keys.BATCHES, 0, FILTER_SCAN_LIMIT - 1)]
            pipe = conn.pipeline(transaction=False)
            for bid in bids:
                pipe.hmget(keys.batch(bid), "description", "canvas")
            return [bid for bid, (description, canvas) in zip(bids, pipe.execute(), strict=True)
                    if description is not None and self.description in _text(description).lower()
                    and (self.kind == "all" or (canvas is not None) == (self.kind == "canvas"))]

        return access.read(read)

    def page(self, page: int = 1, per_page: int = 25) -> Page[BatchStatus]:
        page, per_page = max(1, page), max(1, min(per_page, 500))
        start = (page - 1) * per_page
        for _attempt in range(3):
            if self.filtered:
                matching = self._matching()
                total, bids = len(matching), matching[start:start + per_page]
            else:
                total, bids = access.read(lambda conn: (
                    conn.zcard(keys.BATCHES),
                    [_text(bid) for bid in conn.zrevrange(keys.BATCHES, start, start + per_page - 1)]))
            statuses = access.read(lambda conn, bids=bids: _statuses(conn, bids))
            gone = [bid for bid, status in zip(bids, statuses, strict=True) if status is None]
            if not gone:
                break
            access.write(lambda conn, gone=gone: self._forget_expired(conn, gone), replay=True)
        items = [status for status in statuses if status is not None]
        return Page(items, int(total) - len(gone), page, per_page)


class Batch:
    """One batch by bid: its status (with its jids listed when there are few) and the admin action."""

    def __init__(self, bid: str) -> None:
        self.bid = bid

    def __repr__(self) -> str:
        return f"api.Batch({self.bid!r})"

    def status(self, jids_up_to: int = 50) -> BatchStatus | None:
        return access.read(lambda conn: with_after_state(
            conn, [read_status(self.bid, jids_up_to=jids_up_to, conn=conn)])[0])

    def invalidate(self) -> None:
        access.write(lambda conn: conn.hset(keys.batch(self.bid), "invalidated", repr(time.time())), replay=True)
