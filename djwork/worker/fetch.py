"""Fetching jobs: reliable (the default) or basic, through one Lua round trip per batch.

Reliable fetch moves each job from ``queue:<name>`` (or from one of the queue's priority lanes,
docs/priority.md) into this process's in-progress list for that queue; an ack removes it. Acks are
buffered and ride on the next fetch (``fetch.lua`` settles them before it takes more), so a busy worker
makes well under one round trip per job. A process killed mid-job leaves its jobs on its in-progress
lists, where orphan recovery (reaper.py) finds them once its heartbeat stops. Basic fetch RPOPs instead
(Sidekiq OSS's BRPOP semantics): a crash loses what was running; kept for parity, not recommended.
When the queues are empty, queue takers (takers.py) block on them and take the job that lands,
straight into the in-progress list (BLMOVE), as atomically as fetch.lua does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from djwork import redis as redis_layer
from djwork.payload import StoredPayload, stored_payload
from djwork.redis import key_layout, keys, lanes, scripts
from djwork.results import revoke_events
from djwork.settings.conf import Capsule
from djwork.worker.isolation import IsolationGate

logger = logging.getLogger("djwork.worker")

# A job recovered from dead processes this many times is isolated: fetched at
# most one per process at a time (IsolationGate), so that if it is what kills
# its process, the next crash blames it alone and not the jobs beside it.
ISOLATE_AFTER_RECOVERIES = 2
# How long a finished-late mark waits for its copy to be fetched (seconds).
FINISHED_LATE_TTL = 7 * 24 * 3600
BROKEN_KEY_RELOG = 60.0  # seconds between two error lines for the same wrong-type key


@dataclass(slots=True)
class UnitOfWork:
    """One fetched job: its raw payload exactly as stored, and where it came from."""

    queue: str
    queue_index: int
    raw: StoredPayload  # exactly as stored: bytes when not UTF-8 (payload.stored_payload)
    in_progress_key: str | None
    isolated: bool = False  # taken from the queue's isolated list (recovered more than once)
    # Filled in by the processor and settled by Manager._release under one
    # lock acquisition: one contended lock per job instead of three.
    ack_jid: str | None = None
    locks: str = ""  # the job's lock keys, encoded (djwork/job_locks.py): released with its ack
    result: str = ""  # its result spec (djwork/results/record.py): written with its ack ('' = none)
    processed: int = 0
    failed: int = 0
    expired: int = 0
    # Time limits (time_limits.py, TimeLimits): the job ran past its hard limit and the watchdog settled it;
    # the Manager's callback frees its slot then, so the processor thread that ran it settles nothing more.
    timed_out: bool = False
    on_time_out: Callable[[UnitOfWork, int], None] | None = None  # (unit, the abandoned thread's ident)

    def acknowledge(self, jid: str) -> None:
        """The job is done (succeeded, expired, or filed elsewhere): remove it with the next fetch.

        Only recorded here; the ack is buffered when the processor lets go of the unit.
        """
        self.ack_jid = jid


@dataclass(slots=True)
class Ack:
    queue_index: int
    raw: StoredPayload
    jid: str
    locks: str = ""
    result: str = ""  # result spec, written by the same fetch.lua step ('' = the job stores none)

    def result_args(self) -> tuple[str, str]:
        """The result key and spec the job-ending scripts take ('', '' for none)."""
        if not self.result or not self.jid:
            return "", ""
        return keys.result(self.jid), self.result


@dataclass(slots=True)
class SentFetch:
    """A fetch sent and not yet received (Fetcher.send): what its reply is read against."""

    limit: int
    acks: list[Ack]
    order: list[int]  # queue indexes in the order the script took them
    isolated_allowed: int  # the isolation token reserved for it (0 or 1)
    script_keys: list[str]
    args: list[Any]  # the script's arguments: read against, and sent again after a refusal


class Fetcher:
    """Builds the key layout for one capsule and runs fetch/requeue against it."""

    # The QueueTaker class the capsule's takers are made of (takers.py); None: the plain one. A
    # cluster's fetcher names its own (djwork/worker/cluster/): its takers wait on the queue's node.
    taker_class: Any = None

    def __init__(self, identity: str, capsule: Capsule, reliable: bool,
                 isolation: IsolationGate | None = None, layout: key_layout.Layout = key_layout.SINGLE_SERVER) -> None:
        self.identity = identity
        self.layout = layout
        self.capsule = capsule
        self.reliable = reliable
        self.queue_names = capsule.queue_names
        self.queue_keys = [keys.queue(name) for name in self.queue_names]
        self.in_progress_keys = [layout.in_progress(identity, name) for name in self.queue_names]
        self.isolated_keys = [layout.isolated(name) for name in self.queue_names]
        self.orphan_counts_keys = [layout.orphan_counts(name) for name in self.queue_names]
        # Each queue's priority lanes (docs/priority.md): its lanes SET, and the name lane keys are built from.
        self.lanes_keys = [layout.lanes(name) for name in self.queue_names]
        self.lane_names = [layout.lane_name(name) for name in self.queue_names]
        self.isolation = isolation or IsolationGate()
        # Told of a key a fetch found of the wrong type (the key guard moves it aside).
        self.on_broken_key: Callable[[str, str], bool] | None = None
        self.broken_keys: dict[str, float] = {}  # key -> when last logged (monotonic)
        self.weights = [max(weight, 1) for _name, weight in capsule.queues]
        self._total_weight = sum(self.weights)
        self._credit = [0] * len(self.weights)  # the round-robin's running credit per queue (order())
        self.paused: set[str] = set()
        # Fetches run one at a time (Dispatcher.fetching), so one connection of their
        # own serves them all: no pool checkout and release around every batch.
        self._connection = redis_layer.DedicatedConnection("fetch")

    def order(self) -> list[int]:
        """Queue indexes (1-based, as fetch.lua numbers them) in this fetch's order.

        Strict order without weights. With weights, each fetch starts with the
        queue a smooth weighted round-robin picks (nginx's): over every
        ``sum(weights)`` fetches each queue comes first exactly ``weight`` times,
        evenly spread. Sidekiq draws a weighted random order per fetch instead,
        which gives the same shares on average but drifts: over 3,000
        one-job fetches at 3:1 a random draw misses 3:1 by more than 5 % about
        one time in four. The queues after the first follow by the same credit.
        Called by one fetch at a time (the dispatcher's ``fetching`` rule).
        """
        count = len(self.queue_names)
        if not self.capsule.weighted or count == 1:
            return list(range(1, count + 1))
        credit = self._credit
        for position, weight in enumerate(self.weights):
            credit[position] += weight
        ordered = sorted(range(count), key=lambda position: -credit[position])
        credit[ordered[0]] -= self._total_weight
        return [position + 1 for position in ordered]

    def script_keys(self, order: list[int]) -> list[str]:
        layout = [keys.PAUSED, keys.ORPHAN_COUNTS, keys.FINISHED_LATE, keys.REVOKED, keys.RESULT_WAITERS]
        for index in order:
            layout.append(self.queue_keys[index - 1])
            layout.append(self.in_progress_keys[index - 1])
            layout.append(self.isolated_keys[index - 1])
            layout.append(self.lanes_keys[index - 1])
        return layout

    def fetch(self, limit: int, acks: list[Ack]) -> list[UnitOfWork]:
        """Settle ``acks`` and take up to ``limit`` jobs, in one round trip.

        Never replayed: a lost reply may hide jobs it already moved, which the
        caller recovers by reconciling (see Dispatcher), not by fetching again.
        """
        return self.receive(self.send(limit, acks))

    def send(self, limit: int, acks: list[Ack]) -> SentFetch:
        """The first half of ``fetch``: the call leaves, its reply is read by ``receive``.

        The worker's refill sends the next batch's fetch while its last jobs
        still run, so the round trip no longer idles the process between
        batches. Nothing else is sent on the fetch connection in between.
        """
        order = self.order()
        isolated_allowed = self.isolation.reserve() if self.reliable and limit > 0 else 0
        args: list[Any] = [limit, "reliable" if self.reliable else "basic", len(acks), isolated_allowed]
        # Names in ARGV, in the order of their keys: no script derives a name from a key.
        args.extend(self.queue_names[index - 1] for index in order)
        if acks:
            position_of = {index: position for position, index in enumerate(order, start=1)}
            for ack in acks:
                # Two arguments for a job with no locks and no result, six otherwise (fetch.lua).
                if ack.locks or (ack.result and ack.jid):
                    args.extend((-position_of[ack.queue_index], ack.raw, ack.jid, ack.locks, *ack.result_args()))
                else:
                    args.extend((position_of[ack.queue_index], ack.raw))
        script_keys = self.script_keys(order)
        try:
            self._connection.run(lambda connection: scripts.send_on_connection(connection, "fetch", script_keys, args))
        except BaseException:
            self.isolation.settle(isolated_allowed, 0)
            raise
        return SentFetch(limit, acks, order, isolated_allowed, script_keys, args)

    def receive(self, sent: SentFetch) -> list[UnitOfWork]:
        """The jobs a ``send`` took (its acks settled); raises if the reply is lost (the caller reconciles)."""
        try:
            fetched, paused, broken, skipped, revoked = self._connection.receive(
                lambda connection: scripts.receive_on_connection(connection, "fetch", sent.script_keys, sent.args),
                # Refused (a replica, a primary failing over): nothing ran, so it is sent again.
                replay=lambda connection: scripts.evaluate_on_connection(connection, "fetch", sent.script_keys,
                                                                         sent.args))
        except BaseException:
            # Unknown whether an isolated job was taken; a reconcile adopts it unflagged.
            self.isolation.settle(sent.isolated_allowed, 0)
            raise
        order = sent.order
        self.paused = {name.decode() if isinstance(name, bytes) else name for name in paused} if paused else set()
        self.report_drops(broken, skipped, revoked)
        work = []
        isolated_taken = 0
        reliable = self.reliable
        for offset in range(0, len(fetched), 2):
            position = int(fetched[offset])
            queue_index = order[abs(position) - 1]
            isolated = position < 0
            isolated_taken += isolated
            work.append(UnitOfWork(
                queue=self.queue_names[queue_index - 1],
                queue_index=queue_index,
                raw=stored_payload(fetched[offset + 1]),
                in_progress_key=self.in_progress_keys[queue_index - 1] if reliable else None,
                isolated=isolated,
            ))
        self.isolation.settle(sent.isolated_allowed, isolated_taken)
        return work

    def report_drops(self, broken: list[Any], skipped: list[Any], revoked: list[Any]) -> None:
        """Say what a fetch.lua call found broken or dropped (a finished-late copy, a revoked job)."""
        if broken:
            self._report_broken(broken)
        for jid in skipped:
            logger.warning("djwork: dropped a copy of job %s: it already finished after its process's "
                           "shutdown deadline had pushed it back", _text(jid))
        if revoked:  # payloads: a log line and task_revoked each
            revoke_events.dropped(revoked, self.identity)

    def _report_broken(self, broken: list[Any]) -> None:
        """Log a key a fetch found of the wrong type (at most once a minute) and hand it to the key guard."""
        now = time.monotonic()
        for offset in range(0, len(broken), 2):
            key, error = _text(broken[offset]), _text(broken[offset + 1])
            if now - self.broken_keys.get(key, -BROKEN_KEY_RELOG) >= BROKEN_KEY_RELOG:
                self.broken_keys[key] = now
                logger.error("djwork: key %r: %s; its queue is skipped until the key guard moves the key aside",
                             key, error)
            if self.on_broken_key is not None:
                try:
                    if self.on_broken_key(key, error):
                        self.broken_keys.pop(key, None)  # moved aside: a new streak logs again
                except Exception:
                    logger.exception("djwork: key guard could not repair %r", key)

    def close(self) -> None:
        """Drop the fetch connection (shutdown)."""
        self._connection.close()

    def requeue(self, pending_acks: list[Ack], unfinished: Sequence[UnitOfWork] = ()) -> int:
        """Shutdown: drop the jobs whose ack is pending, push the rest back, per queue, atomically.

        Basic fetch has no in-progress list: the jobs still running (``unfinished``)
        are pushed back from memory to the end their queue pops from, so they run
        first, as Sidekiq's basic fetch does at shutdown.
        """
        self.store_results(pending_acks)
        if not self.reliable:
            return self._push_back(unfinished)
        by_queue: dict[int, list[str]] = {}
        for ack in pending_acks:
            by_queue.setdefault(ack.queue_index, []).append(ack.raw)

        def run(conn: Any) -> int:
            count = 0
            for index in range(1, len(self.queue_names) + 1):
                count += int(scripts.evaluate(
                    conn, "requeue",
                    [self.in_progress_keys[index - 1], self.queue_keys[index - 1],
                     self.orphan_counts_keys[index - 1], self.isolated_keys[index - 1], self.lanes_keys[index - 1]],
                    [ISOLATE_AFTER_RECOVERIES, self.lane_names[index - 1], *by_queue.get(index, [])],
                ))
            return count

        # Idempotent: a replay finds the acked jobs already gone and the list
        # already moved, so it pushes nothing twice.
        return int(redis_layer.run(run, idempotent=True))

    def store_results(self, acks: Sequence[Ack]) -> None:
        """Write the results of acks no fetch will carry (the shutdown requeue drops them), in one step."""
        store_results([(ack.jid, ack.result) for ack in acks if ack.result and ack.jid])

    def take_isolated(self, queue_index: int) -> StoredPayload | None:
        """An idle taker's look at its queue's isolated list; None when not due or empty.

        Not replayed: a lost reply may hide a job already moved to the
        in-progress list, which the caller's reconcile adopts.
        """
        if not self.reliable or not self.isolation.due(self.isolated_keys[queue_index - 1]):
            return None
        reserved = self.isolation.reserve()
        if not reserved:
            return None
        source, target = self.isolated_keys[queue_index - 1], self.in_progress_keys[queue_index - 1]
        raw = None
        try:
            raw = redis_layer.run(lambda conn: conn.lmove(source, target, "RIGHT", "LEFT"), purpose="fetch")
        finally:
            self.isolation.settle(reserved, raw is not None)
        return None if raw is None else stored_payload(raw)

    def drop_if_finished_late(self, queue_index: int, raw: StoredPayload) -> bool:
        """A taken copy of a job that already finished late (settle_late): drop it rather than run it twice.

        Asked only when the take saw djwork:finished-late non-empty, so it costs
        nothing per job otherwise.
        """
        dropped = redis_layer.run(lambda conn: scripts.evaluate(conn, "drop_finished_late", [
            self.layout.finished_late(self.queue_names[queue_index - 1]), self.in_progress_keys[queue_index - 1],
            self.orphan_counts_keys[queue_index - 1]], [raw]),
            idempotent=True, purpose="fetch")
        if dropped:
            logger.warning("djwork: dropped a copy of job %s: it already finished after its process's "
                           "shutdown deadline had pushed it back", _text(dropped))
        return bool(dropped)

    def drop_if_revoked(self, queue_index: int, raw: StoredPayload) -> bool:
        """A taken job that was revoked (docs/celery.md): dropped, not run.

        Asked only when the take saw djwork:revoked non-empty, so it costs nothing per job otherwise.
        """
        in_progress = self.in_progress_keys[queue_index - 1] if self.reliable else ""
        dropped = redis_layer.run(lambda conn: scripts.evaluate(conn, "drop_revoked", [
            keys.REVOKED, in_progress, keys.ORPHAN_COUNTS], [raw]), idempotent=True, purpose="fetch")
        if dropped:
            revoke_events.dropped([raw], self.identity)
        return bool(dropped)

    def settle_late(self, unit: UnitOfWork) -> str:
        """Remove the pushed-back copy of a job that finished after the shutdown deadline, in one step.

        Returns "removed" (taken off its queue or isolated list), "acked" (the
        requeue had not run yet: removed from the in-progress list instead) or
        "marked" (the copy already left: fetch.lua drops it when it meets it).
        Not replayed blindly: a replay after "removed" would mark a job that
        no one will fetch, which only costs a hash field until it expires.
        """
        lane = lanes.lane_of_raw(unit.raw)  # its copy went back to its lane
        script_keys = [lanes.list_key(unit.queue, lane, self.layout), self.isolated_keys[unit.queue_index - 1],
                       unit.in_progress_key or "", self.layout.finished_late(unit.queue),
                       self.orphan_counts_keys[unit.queue_index - 1]]
        outcome = redis_layer.run(lambda conn: scripts.evaluate(
            conn, "settle_late", script_keys, [unit.raw, unit.ack_jid or "", FINISHED_LATE_TTL, unit.locks]),
            idempotent=True)
        if unit.ack_jid:
            self.store_results([Ack(unit.queue_index, unit.raw, unit.ack_jid, unit.locks, unit.result)])
        return _text(outcome)

    def _push_back(self, unfinished: Sequence[UnitOfWork]) -> int:
        if not unfinished:
            return 0

        def run(conn: Any) -> int:
            pipe = conn.pipeline(transaction=True)
            for unit in unfinished:
                for command in lanes.push_commands(unit.queue, lanes.lane_of_raw(unit.raw), [unit.raw], "RPUSH"):
                    pipe.execute_command(*command)
            pipe.execute()
            return len(unfinished)

        # Not replayed: a lost reply may hide pushes that landed, and a replay would
        # run those jobs twice; basic fetch accepts the loss instead.
        return int(redis_layer.run(run))

    def in_progress(self) -> dict[int, list[str]]:
        """What Redis holds on this capsule's in-progress lists (for reconciling after a lost reply)."""
        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for key in self.in_progress_keys:
                pipe.lrange(key, 0, -1)
            return pipe.execute()

        lists = redis_layer.run(read, idempotent=True)
        return {
            index: [stored_payload(raw) for raw in items]
            for index, items in enumerate(lists, start=1)
        }


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def store_results(records: Sequence[tuple[str, str]]) -> None:
    """Write each (jid, result spec) in one ``store_results.lua`` step (one server; a cluster's is
    djwork/worker/cluster/results.py)."""
    args = [arg for jid, spec in records if jid and spec for arg in (jid, keys.result(jid), spec)]
    if args:
        # Idempotent: the write is a HSET of the same fields (a REVOKED record stays either way).
        redis_layer.run(lambda conn: scripts.evaluate(conn, "store_results", [keys.REVOKED, keys.RESULT_WAITERS],
                                                      args), idempotent=True)
