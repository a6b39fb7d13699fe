"""Batches (docs/batches.md): the listing, newest first, filterable by description, and one batch's status.

The listing is the ``batches`` ZSET (bid -> created_at). A batch's keys
expire (24 h after success, 30 days after its last add) while its entry
stays: entries whose hash is gone are dropped when a page meets them.
"""

from __future__ import annotations

import time
from typing import Any

from djwork import keys
from djwork.api import access
from djwork.api.records import Page
from djwork.batches.batch import LISTING_TTL
from djwork.batches.status import BatchStatus, parse, read_status

FILTER_SCAN_LIMIT = 5_000  # entries a description filter looks through, newest first


def _statuses(conn: Any, bids: list[str]) -> list[BatchStatus | None]:
    pipe = conn.pipeline(transaction=False)
    for bid in bids:
        pipe.hgetall(keys.batch(bid))
        pipe.scard(keys.batch_jids(bid))
        pipe.scard(keys.batch_failed(bid))
        pipe.scard(keys.batch_died(bid))
        pipe.ttl(keys.batch(bid))
    replies = pipe.execute()
    found: list[BatchStatus | None] = []
    for index, bid in enumerate(bids):
        fields, pending, failures, dead, ttl = replies[index * 5:index * 5 + 5]
        found.append(parse(bid, fields, pending, failures, dead, ttl) if fields else None)
    return found


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Batches:
    """Every batch still in Redis, newest first; ``description`` keeps those whose description contains it."""

    def __init__(self, description: str = "") -> None:
        self.description = description.strip().lower()

    def _forget_expired(self, conn: Any, gone: list[str]) -> None:
        # Safe to replay: removing a bid whose keys are gone twice removes nothing more.
        conn.zremrangebyscore(keys.BATCHES, "-inf", time.time() - LISTING_TTL)
        if gone:
            conn.zrem(keys.BATCHES, *gone)

    def size(self) -> int:
        if self.description:
            return len(self._matching())
        return int(access.read(lambda conn: conn.zcard(keys.BATCHES)))

    def _matching(self) -> list[str]:
        def read(conn: Any) -> list[str]:
            bids = [_text(bid) for bid in conn.zrevrange(keys.BATCHES, 0, FILTER_SCAN_LIMIT - 1)]
            pipe = conn.pipeline(transaction=False)
            for bid in bids:
                pipe.hget(keys.batch(bid), "description")
            return [bid for bid, description in zip(bids, pipe.execute(), strict=True)
                    if description is not None and self.description in _text(description).lower()]

        return access.read(read)

    def page(self, page: int = 1, per_page: int = 25) -> Page[BatchStatus]:
        page, per_page = max(1, page), max(1, min(per_page, 500))
        start = (page - 1) * per_page
        for _attempt in range(3):
            if self.description:
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
        return access.read(lambda conn: read_status(self.bid, jids_up_to=jids_up_to, conn=conn))

    def invalidate(self) -> None:
        access.write(lambda conn: conn.hset(keys.batch(self.bid), "invalidated", repr(time.time())), replay=True)
