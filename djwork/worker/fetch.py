"""Fetching jobs: reliable (the default) or basic, through one Lua round trip per batch.

Reliable fetch LMOVEs each job from ``queue:<name>`` into this process's
in-progress list for that queue; an ack removes it. Acks are buffered and
ride on the next fetch (``fetch.lua`` settles them before it takes more), so
a busy worker makes well under one round trip per job. A process killed
mid-job leaves its jobs on its in-progress lists, where orphan recovery
(reaper.py) finds them once its heartbeat stops.

Basic fetch RPOPs instead (Sidekiq OSS's BRPOP semantics): no in-progress
list, so a crash loses what was running. Kept for parity, not recommended.

When the queues are empty, ``QueueTaker``s block on them and take the job
that lands, straight into the in-progress list (BLMOVE), as atomically as
fetch.lua does. A blocking *peek* would not do: on a queue shared with Ruby
Sidekiq, whose idle threads wait in BRPOP, every arriving job would go to
Ruby before djwork's fetch could take it.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Any

from djwork import keys, scripts
from djwork import redis as redis_layer
from djwork.conf import Capsule


@dataclass(slots=True)
class UnitOfWork:
    """One fetched job: its raw payload exactly as stored, and where it came from."""

    queue: str
    queue_index: int
    raw: str
    in_progress_key: str | None
    # Filled in by the processor and settled by Manager._release under one
    # lock acquisition: one contended lock per job instead of three.
    ack_jid: str | None = None
    processed: int = 0
    failed: int = 0


@dataclass(slots=True)
class Ack:
    queue_index: int
    raw: str
    jid: str


class Fetcher:
    """Builds the key layout for one capsule and runs fetch/requeue against it."""

    def __init__(self, identity: str, capsule: Capsule, reliable: bool) -> None:
        self.identity = identity
        self.capsule = capsule
        self.reliable = reliable
        self.queue_names = capsule.queue_names
        self.queue_keys = [keys.queue(name) for name in self.queue_names]
        self.in_progress_keys = [keys.in_progress(identity, name) for name in self.queue_names]
        self.weights = [max(weight, 1) for _name, weight in capsule.queues]
        self.paused: set[str] = set()
        # Fetches run one at a time (Manager.fetching), so one connection of their
        # own serves them all: no pool checkout and release around every batch.
        self._connection = redis_layer.DedicatedConnection("fetch")

    def order(self) -> list[int]:
        """Queue indexes (1-based, as fetch.lua numbers them) in this fetch's order.

        Strict order without weights; with weights, a weighted random order per
        fetch, as Sidekiq shuffles its queue list weighted by repetition.
        """
        count = len(self.queue_names)
        if not self.capsule.weighted or count == 1:
            return list(range(1, count + 1))
        remaining = list(range(count))
        weights = list(self.weights)
        ordered = []
        while remaining:
            pick = random.choices(range(len(remaining)), weights=weights)[0]
            ordered.append(remaining.pop(pick) + 1)
            weights.pop(pick)
        return ordered

    def script_keys(self, order: list[int]) -> list[str]:
        layout = [keys.PAUSED, keys.ORPHAN_COUNTS]
        for index in order:
            layout.append(self.queue_keys[index - 1])
            layout.append(self.in_progress_keys[index - 1])
        return layout

    def fetch(self, limit: int, acks: list[Ack]) -> list[UnitOfWork]:
        """Settle ``acks`` and take up to ``limit`` jobs, in one round trip.

        Never replayed: a lost reply may hide jobs it already moved, which the
        caller recovers by reconciling (see Manager), not by fetching again.
        """
        order = self.order()
        position_of = {index: position for position, index in enumerate(order, start=1)}
        args: list[Any] = [limit, "reliable" if self.reliable else "basic", len(acks)]
        for ack in acks:
            args.extend((position_of[ack.queue_index], ack.raw, ack.jid))
        script_keys = self.script_keys(order)
        fetched, paused = self._connection.run(
            lambda connection: scripts.evaluate_on_connection(connection, "fetch", script_keys, args))
        self.paused = {name.decode() if isinstance(name, bytes) else name for name in paused}
        work = []
        for offset in range(0, len(fetched), 2):
            queue_index = order[int(fetched[offset]) - 1]
            raw = fetched[offset + 1]
            work.append(UnitOfWork(
                queue=self.queue_names[queue_index - 1],
                queue_index=queue_index,
                raw=raw.decode() if isinstance(raw, bytes) else raw,
                in_progress_key=self.in_progress_keys[queue_index - 1] if self.reliable else None,
            ))
        return work

    def close(self) -> None:
        """Drop the fetch connection (shutdown)."""
        self._connection.close()

    def requeue(self, pending_acks: list[Ack]) -> int:
        """Shutdown: drop the jobs whose ack is pending, push the rest back, per queue, atomically."""
        if not self.reliable:
            return 0
        total = 0
        by_queue: dict[int, list[str]] = {}
        for ack in pending_acks:
            by_queue.setdefault(ack.queue_index, []).append(ack.raw)

        def run(conn: Any) -> int:
            count = 0
            for index in range(1, len(self.queue_names) + 1):
                count += int(scripts.evaluate(
                    conn, "requeue",
                    [self.in_progress_keys[index - 1], self.queue_keys[index - 1]],
                    by_queue.get(index, []),
                ))
            return count

        # Idempotent: a replay finds the acked jobs already gone and the list
        # already moved, so it pushes nothing twice.
        total = redis_layer.run(run, idempotent=True)
        return total

    def in_progress(self) -> dict[int, list[str]]:
        """What Redis holds on this capsule's in-progress lists (for reconciling after a lost reply)."""
        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for key in self.in_progress_keys:
                pipe.lrange(key, 0, -1)
            return pipe.execute()

        lists = redis_layer.run(read, idempotent=True)
        return {
            index: [raw.decode() for raw in items]
            for index, items in enumerate(lists, start=1)
        }


class QueueTaker:
    """A dedicated connection that blocks on one queue and takes the job that lands on it.

    Reliable fetch moves the job into the in-progress list (BLMOVE), so a lost
    reply or a crash leaves it where reconciling or orphan recovery finds it;
    basic fetch pops it (BRPOP), as Sidekiq OSS does. The connection is its
    own so that another thread can cut the wait short with CLIENT UNBLOCK.
    """

    def __init__(self, fetcher: Fetcher, queue_index: int) -> None:
        self.fetcher = fetcher
        self.queue_index = queue_index
        self.queue = fetcher.queue_names[queue_index - 1]
        self.queue_key = fetcher.queue_keys[queue_index - 1]
        self.in_progress_key = fetcher.in_progress_keys[queue_index - 1]
        self.connection: Any = None
        self.client_id: int | None = None
        self._lock = threading.Lock()

    def connect(self) -> int:
        """Open the connection if needed and learn its id (for CLIENT UNBLOCK)."""
        with self._lock:
            if self.connection is None:
                self.connection = redis_layer.dedicated_connection("fetch")
            if self.client_id is None:
                try:
                    self.connection.send_command("CLIENT", "ID")
                    self.client_id = int(self.connection.read_response())
                except BaseException:
                    self._drop()
                    raise
            return self.client_id

    def take(self, timeout: float) -> tuple[str | None, bool]:
        """Block up to ``timeout`` seconds for a job; returns (raw payload or None, queue paused?).

        The paused check rides in the same round trip and runs after the take,
        so it sees a pause that began while we were blocked.
        """
        connection = self.connection
        if self.fetcher.reliable:
            take = ("BLMOVE", self.queue_key, self.in_progress_key, "RIGHT", "LEFT", timeout)
        else:
            take = ("BRPOP", self.queue_key, timeout)
        try:
            taken, paused = redis_layer.exchange(connection, [take, ("SISMEMBER", keys.PAUSED, self.queue)])
        except BaseException:
            with self._lock:
                self._drop()
            raise
        for reply in (taken, paused):
            if isinstance(reply, Exception):
                raise reply  # e.g. WRONGTYPE: queue:<name> is not a list
        if taken is not None and not self.fetcher.reliable:
            taken = taken[1]
        if isinstance(taken, bytes):
            taken = taken.decode()
        return taken, bool(paused)

    def is_paused(self) -> bool:
        return bool(redis_layer.run(lambda conn: conn.sismember(keys.PAUSED, self.queue), idempotent=True))

    def give_back(self, raw: str) -> None:
        """Return a job taken but not run to the pop end of its queue, where it was taken from."""
        if self.fetcher.reliable:
            redis_layer.run(lambda conn: scripts.evaluate(conn, "return_job", [self.in_progress_key, self.queue_key],
                                                          [raw]), idempotent=True, purpose="fetch")
        else:
            # Basic fetch already popped it: a lost reply here loses it, as basic fetch accepts.
            redis_layer.run(lambda conn: conn.rpush(self.queue_key, raw), purpose="fetch")

    def unit(self, raw: str) -> UnitOfWork:
        return UnitOfWork(queue=self.queue, queue_index=self.queue_index, raw=raw,
                          in_progress_key=self.in_progress_key if self.fetcher.reliable else None)

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        # After any error the reply stream is unknown: start over on a new socket, with a new id.
        if self.connection is not None:
            try:
                self.connection.disconnect()
            except Exception:  # pragma: no cover - teardown must not raise
                pass
        self.client_id = None
