"""``djwork.Batch``: a group of jobs tracked as one, with callbacks when it completes, succeeds, dies, settles.

Creating: ``with batch.jobs():`` collects every push made inside the block
(collect.py) and writes them, the batch's hash and its pending-jid set in
one MULTI when the block exits. Nothing is written if the block raises, and
no job of the batch can finish before the batch knows it.

Counting happens in the worker, in the Lua step that ends each job
(lua/batch_lib.lua, by set membership); the callbacks are ordinary djwork
jobs pushed by that step, each event claimed once. docs/batches.md.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from djwork import redis as redis_layer
from djwork.batches import cluster_write, collect, runtime
from djwork.batches.status import BatchStatus, read_status
from djwork.payload import build, check_json_native, dumps
from djwork.redis import keys, lanes
from djwork.redis.key_layout import layout_of

PENDING_TTL = 30 * 24 * 3600  # a batch that never succeeds is forgotten 30 days after its last add
LISTING_TTL = PENDING_TTL + 86400  # an entry of the `batches` listing older than this names expired keys
MAX_KEPT_RESULTS = 10_000  # results ride in the success callback's payload: bounded
CHUNK = 10_000  # members per SADD / LPUSH command


def list_batch(pipe: Any, bid: str, now: float) -> None:
    """Add ``bid`` to the ``batches`` listing and drop the entries of batches whose keys have expired.

    The reader (djwork.api.Batches) drops them too, but a deployment that never
    opens the Batches page kept one member per batch ever made, for good.
    """
    pipe.zadd(keys.BATCHES, {bid: now})
    pipe.zremrangebyscore(keys.BATCHES, "-inf", now - LISTING_TTL)

def _listed(conn: Any, bid: str, now: float) -> None:
    """The listing written alone (a cluster's write: ``batches`` is a slot of its own)."""
    pipe = conn.pipeline(transaction=False)
    list_batch(pipe, bid, now)
    pipe.execute()


class BatchError(RuntimeError):
    """A batch can't be written or added to (gone, invalid, or a bad callback)."""


def _callback_name(callback: Any) -> str:
    name = getattr(callback, "name", callback)
    if not isinstance(name, str) or not name:
        raise BatchError(f"a batch callback is a djwork job or its dotted name, not {callback!r}")
    return name


class Batch:
    """A batch of jobs. ``Batch(...)`` starts a new one; ``Batch(bid="...")`` adds to an existing one."""

    def __init__(self, bid: str | None = None, *, description: str = "", on_success: Any = None,
                 on_complete: Any = None, on_death: Any = None, on_settled: Any = None,
                 callback_queue: str = "default", callback_args: dict[str, Any] | None = None,
                 keep_results: bool = False, parent: str | None = None) -> None:
        self._new = bid is None
        # Opened inside a job of a batch: a child of that batch, whose events wait for this one.
        self.parent = (parent or runtime.running_bid()) if self._new else None
        self.bid = bid or secrets.token_urlsafe(10)
        self.description = str(description)
        self.callback_queue = callback_queue
        self.callback_args = dict(callback_args or {})
        check_json_native(self.callback_args, "Batch callback_args")
        self.callbacks = {event: _callback_name(callback) for event, callback in
                          (("complete", on_complete), ("success", on_success), ("death", on_death),
                           ("settled", on_settled)) if callback is not None}
        if not self._new and (self.callbacks or description or keep_results):
            raise BatchError("an existing batch (bid given) takes jobs only; its callbacks were set when it was made")
        self.keep_results = bool(keep_results)
        self.jids: list[str] = []

    def __repr__(self) -> str:
        return f"<djwork.Batch {self.bid} {self.description!r}>"

    @contextmanager
    def jobs(self) -> Iterator[Batch]:
        """Collect the pushes made in the block; write them with the batch when it exits without raising."""
        collector = collect.Collector(self.bid)
        token = collect.open_block(collector)
        try:
            yield self
        finally:
            collect.close_block(token)
        self._write(collector)

    def _write(self, collector: collect.Collector) -> None:
        count = len(collector.jids)
        if self.keep_results and count + len(self.jids) > MAX_KEPT_RESULTS:
            raise BatchError(f"a batch keeps at most {MAX_KEPT_RESULTS} results; this one would have "
                             f"{count + len(self.jids)}")
        first = self._new
        now = time.time()
        if not first and not redis_layer.run(lambda conn: conn.exists(keys.batch(self.bid)), idempotent=True):
            raise BatchError(f"batch {self.bid} does not exist (expired, or never made): its jobs were not written")
        parent = self.parent if first else None
        if parent and not redis_layer.run(lambda conn: conn.exists(keys.batch(parent)), idempotent=True):
            parent = None  # its parent is gone: nothing waits for this batch

        def write(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=True)
            head = keys.batch(self.bid)
            if first:
                pipe.hset(head, mapping={**self._fields(now), **({"parent": parent} if parent else {})})
                list_batch(pipe, self.bid, now)
            if parent:
                # A pending member of its parent (as `b-<bid>`) from the same transaction on; the parent's
                # job that opens it is pending too, so the parent can't finish in between.
                pipe.sadd(keys.batch_jids(parent), head)
                pipe.hincrby(keys.batch(parent), "kids", 1)
            pipe.hincrby(head, "total", count)
            for start in range(0, count, CHUNK):
                pipe.sadd(keys.batch_jids(self.bid), *collector.jids[start:start + CHUNK])
                if self.keep_results:
                    pipe.rpush(keys.batch_order(self.bid), *collector.jids[start:start + CHUNK])
            for (queue, lane), raws in collector.queued.items():
                for start in range(0, len(raws), CHUNK):
                    for command in lanes.push_commands(queue, lane, raws[start:start + CHUNK]):
                        pipe.execute_command(*command)
            if collector.scheduled:
                pipe.zadd(keys.SCHEDULE, {raw: score for score, raw in collector.scheduled})
            if collector.queued:
                pipe.sadd(keys.QUEUES, *dict.fromkeys(queue for queue, _lane in collector.queued))
            for key in (head, keys.batch_jids(self.bid), keys.batch_order(self.bid)):
                pipe.expire(key, PENDING_TTL)
            if first and count == 0:
                # Nothing will ever end in it: its events are decided now, in the same transaction.
                from djwork.redis import scripts

                pipe.execute_command("EVAL", scripts.source("batch_check"), 1, head)
            return pipe.execute()

        def write_in_steps(conn: Any) -> None:
            cluster_write.write(conn, self.bid, self._fields(now) if first else None, parent, collector,
                                self.keep_results, PENDING_TTL, CHUNK, lambda conn: _listed(conn, self.bid, now))

        # Not replayed after a send (a second MULTI would push every job twice); a failed dial is.
        redis_layer.run(lambda conn: (write_in_steps if layout_of(conn).cluster else write)(conn))
        self._new = False
        self.jids.extend(collector.jids)

    def _fields(self, now: float) -> dict[str, Any]:
        fields: dict[str, Any] = {"bid": self.bid, "description": self.description, "created_at": repr(now),
                                  "cbq": self.callback_queue}
        if self.keep_results:
            fields["keep_results"] = "1"
        for event, name in self.callbacks.items():
            payload = build(name, [], self.callback_args, queue=self.callback_queue,
                            extra={"callback_bid": self.bid})
            for late in ("args", "created_at"):  # written by the Lua step that fires the event
                payload.pop(late, None)
            fields[f"cb-{event}"] = dumps(payload)[:-1]  # the head, closed with args and times later
        return fields

    def invalidate(self) -> None:
        """Stop the batch: its jobs not started yet are skipped (within a second) and no callback fires."""
        Batch.invalidate_bid(self.bid)

    @staticmethod
    def invalidate_bid(bid: str) -> None:
        redis_layer.run(lambda conn: conn.hset(keys.batch(bid), "invalidated", repr(time.time())),
                        idempotent=True)

    @staticmethod
    def status(bid: str, *, jids_up_to: int = 0) -> BatchStatus | None:
        """The batch's counts, times and callback state (None when it is gone); ``jids_up_to`` lists
        the pending, failing and dead jids when there are at most that many of each."""
        return read_status(bid, jids_up_to=jids_up_to)
