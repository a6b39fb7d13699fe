"""Collecting the pushes made inside ``with batch.jobs():``, to write them with the batch in one step.

``CollectInBatch`` is a hook of every push (djwork/client/push_hooks.py): one
ContextVar lookup, nothing more when no block is open. Inside a block the
payload gets the batch's ``bid`` (Sidekiq Pro's field, before client
middleware runs, so middleware sees it) and, after the middleware (which may
still change or stop the push), is kept here instead of written; ``Batch`` writes them all with
the batch's own keys in one MULTI when the block exits, or drops them when
it raises: no half batch, and no job that runs before its batch exists.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from djwork.client.push_hooks import Pushed, PushHook
from djwork.payload import dumps
from djwork.redis import lanes

_current: ContextVar[Collector | None] = ContextVar("djwork_batch_collector", default=None)


class Collector:
    """The jobs one ``batch.jobs()`` block pushed, in push order."""

    def __init__(self, bid: str) -> None:
        self.bid = bid
        self.jids: list[str] = []
        # (queue name, lane) -> raw payloads, LPUSH order (djwork/redis/lanes.py)
        self.queued: dict[tuple[str, int], list[str]] = {}
        self.scheduled: list[tuple[float, str]] = []  # (run-at epoch, raw payload)

    def stamp(self, payload: dict[str, Any]) -> None:
        payload["bid"] = self.bid

    def take(self, payload: dict[str, Any], queue: str, later: float | None) -> str:
        """Keep a payload the client was about to write; returns its jid."""
        if payload.get("djwork_locks"):
            # Its lock's SET NX would be decided at the block's exit: a refused duplicate would stay
            # pending in the batch for ever, holding back every event.
            raise ValueError(f"job {payload.get('class')}: unique jobs and no-overlap periodic jobs can't join a "
                             "batch (a duplicate refused by its lock would never finish in the batch)")
        payload["bid"] = self.bid  # again: a middleware may have rebuilt the payload
        raw = dumps(payload)
        if later is not None:
            self.scheduled.append((float(later), raw))
        else:
            self.queued.setdefault((queue, lanes.lane_of(payload)), []).append(raw)
        self.jids.append(payload["jid"])
        return payload["jid"]


def current() -> Collector | None:
    """The collector of the innermost open ``batch.jobs()`` block of this context, if any."""
    return _current.get()


def open_block(collector: Collector) -> Any:
    return _current.set(collector)


def close_block(token: Any) -> None:
    _current.reset(token)


class CollectInBatch(PushHook):
    """Inside ``with batch.jobs():``, a push's ``bid`` before client middleware, and its payload kept after it."""

    def stamp(self, payload: dict[str, Any]) -> None:
        collector = _current.get()
        if collector is not None:
            collector.stamp(payload)

    def route(self, payload: dict[str, Any], queue: str, later: float | None, now: float) -> Pushed | None:
        collector = _current.get()
        return None if collector is None else Pushed(collector.take(payload, queue, later))
