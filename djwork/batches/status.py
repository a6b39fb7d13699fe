"""Reading a batch: counts, times and callback state, in one pipelined round trip."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from djwork import redis as redis_layer
from djwork.redis.key_layout import layout_of

EVENTS = ("complete", "success", "death", "settled")


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _time(value: Any) -> float | None:
    try:
        return float(_text(value)) if value is not None else None
    except ValueError:
        return None


def _int(value: Any) -> int:
    try:
        return int(_text(value)) if value is not None else 0
    except ValueError:
        return 0


@dataclass(frozen=True)
class BatchStatus:
    """One batch as Redis holds it now. ``pending`` counts jobs neither succeeded nor dead."""

    bid: str
    description: str
    total: int
    pending: int
    failures: int  # pending jobs that failed at least once (waiting for a retry)
    dead: int
    created_at: float | None
    callback_queue: str
    callbacks: dict[str, str]  # event -> callback class
    fired_at: dict[str, float]  # event -> when it was claimed (and its callback pushed)
    callback_errors: dict[str, str] = field(default_factory=dict)
    invalidated_at: float | None = None
    keeps_results: bool = False
    parent: str | None = None  # the batch this one is a child of (its events wait for this one)
    kids: int = 0  # child batches opened by its jobs; each is a pending member `b-<bid>` until it settles
    ttl: int | None = None  # seconds until the keys expire
    pending_jids: list[str] | None = None  # listed only when few (``jids_up_to``)
    failed_jids: list[str] | None = None
    dead_jids: list[str] | None = None
    callback_jids: dict[str, str] = field(default_factory=dict)  # event -> the jid its callback runs as
    canvas: bool = False  # made by a canvas (group, chord, chain, link), not by ``djwork.Batch``
    after: str | None = None  # a canvas batch whose one job is the success callback of this batch
    # For a batch with ``after``: "waiting" until that batch's success pushes this one's job, "never"
    # when that batch settled without success (its job will never be pushed), "" otherwise (djwork.api).
    after_state: str = ""

    @property
    def kind(self) -> str:
        """What made it: "batch" (``djwork.Batch``) or the canvas primitive its description names."""
        if not self.canvas:
            return "batch"
        for kind in ("chain", "chord", "group"):
            if self.description.startswith(f"canvas: {kind} "):
                return kind
        return "link" if self.description.endswith(" with links") else "canvas"

    @property
    def succeeded(self) -> int:
        return max(0, self.total - self.pending - self.dead)

    @property
    def complete_at(self) -> float | None:
        return self.fired_at.get("complete")

    @property
    def success_at(self) -> float | None:
        return self.fired_at.get("success")

    @property
    def death_at(self) -> float | None:
        return self.fired_at.get("death")

    @property
    def settled_at(self) -> float | None:
        return self.fired_at.get("settled")

    @property
    def complete(self) -> bool:
        return "complete" in self.fired_at

    @property
    def success(self) -> bool:
        return "success" in self.fired_at

    @property
    def settled(self) -> bool:
        return "settled" in self.fired_at

    @property
    def invalidated(self) -> bool:
        return self.invalidated_at is not None


def _callback_field(head: Any, name: str) -> str:
    try:
        return str(orjson.loads(_text(head) + "}").get(name, "?"))
    except (orjson.JSONDecodeError, AttributeError):
        return "?"


def parse(bid: str, fields: dict[Any, Any], pending: int, failures: int, dead: int, ttl: int | None,
          lists: tuple[list[str] | None, list[str] | None, list[str] | None] = (None, None, None)) -> BatchStatus:
    """A BatchStatus from the hash's fields and the sets' sizes."""
    text = {_text(name): value for name, value in fields.items()}
    fired = {event: at for event in EVENTS if (at := _time(text.get(f"{event}_at"))) is not None}
    total = _int(text.get("total"))
    return BatchStatus(
        bid=bid, description=_text(text.get("description", b"")), total=total, pending=pending,
        failures=failures, dead=dead, created_at=_time(text.get("created_at")),
        callback_queue=_text(text.get("cbq", b"default")),
        callbacks={event: _callback_field(text[f"cb-{event}"], "class") for event in EVENTS if f"cb-{event}" in text},
        callback_jids={event: _callback_field(text[f"cb-{event}"], "jid") for event in EVENTS if f"cb-{event}" in text},
        canvas="canvas" in text, after=_text(text["after"]) if "after" in text else None,
        fired_at=fired,
        callback_errors={event: _text(text[f"{event}_error"]) for event in EVENTS if f"{event}_error" in text},
        invalidated_at=_time(text.get("invalidated")), keeps_results="keep_results" in text,
        parent=_text(text["parent"]) if "parent" in text else None, kids=_int(text.get("kids")),
        ttl=ttl if ttl is not None and ttl >= 0 else None,
        pending_jids=lists[0], failed_jids=lists[1], dead_jids=lists[2])


def read_status(bid: str, *, jids_up_to: int = 0, conn: Any = None) -> BatchStatus | None:
    """The batch ``bid`` now, or None when its keys are gone (on ``conn``, else on the default pool)."""
    if conn is None:
        return redis_layer.run(lambda conn: read_status(bid, jids_up_to=jids_up_to, conn=conn), idempotent=True)
    named = layout_of(conn).batch(bid)  # a cluster's companions carry the batch's hash tag
    pipe = conn.pipeline(transaction=False)
    pipe.hgetall(named.hash)
    pipe.scard(named.jids)
    pipe.scard(named.failed)
    pipe.scard(named.died)
    pipe.ttl(named.hash)
    fields, pending, failures, dead, ttl = pipe.execute()
    if not fields:
        return None
    lists: list[list[str] | None] = [None, None, None]
    if jids_up_to > 0:
        sizes = (pending, failures, dead)
        pipe = conn.pipeline(transaction=False)
        for key in (named.jids, named.failed, named.died):
            pipe.srandmember(key, jids_up_to)
        for index, (got, size) in enumerate(zip(pipe.execute(), sizes, strict=True)):
            if size <= jids_up_to:
                lists[index] = sorted(_text(jid) for jid in got)
    return parse(bid, fields, pending, failures, dead, ttl, (lists[0], lists[1], lists[2]))
