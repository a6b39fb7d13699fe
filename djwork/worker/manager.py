"""Manager: one capsule's processor threads, the dispatcher that feeds them, and the queue takers.

The dispatcher fetches only when a processor slot is free, and never more
jobs than free slots: no prefetch, so a long job can't hold short ones
hostage behind it (Celery's prefetch starvation). Finished jobs' acks are
buffered and ride on the next fetch. When every queue is empty, taker
threads block on the queues, one per free slot (at least one per queue),
and take the job that lands straight into the in-progress list: an idle
worker notices new work at once, without polling, and competes for it on
equal terms with Ruby Sidekiq's idle threads on a shared queue (takers.py).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from djwork.worker.component import JOIN_TIMEOUT, safe_thread
from djwork.worker.fetch import Ack, Fetcher, UnitOfWork
from djwork.worker.handoff import HandOff
from djwork.worker.takers import FETCH_ERROR_PAUSE, TakersMixin

if TYPE_CHECKING:
    from djwork.conf import Capsule
    from djwork.worker.launcher import Launcher

logger = logging.getLogger("djwork.worker")

# Processor threads kept awake for a stream of short jobs (handoff.py says why
# few), and how late a waiting job may start before every waiting job gets one.
HOT_PROCESSORS = 2
ESCALATE_AFTER = 0.003


class Manager(TakersMixin):
    def __init__(self, launcher: Launcher, capsule: Capsule, fetcher: Fetcher,
                 run_job: Callable[[Manager, UnitOfWork], None],
                 request_shutdown: Callable[[], None]) -> None:
        self.launcher = launcher
        self.capsule = capsule
        self.fetcher = fetcher
        self.run_job = run_job
        self.request_shutdown = request_shutdown
        self.concurrency = capsule.concurrency
        self.condition = threading.Condition()
        self.free = capsule.concurrency  # slots neither running nor handed out
        # Per queue index: takers blocked on it (or settling what they took), each holding a slot.
        self.reserved_by_queue: collections.Counter[int] = collections.Counter()
        self.recalling = 0  # >0: takers must not block (reconcile or shutdown needs them out of Redis)
        self.blocked: dict[int, int] = {}  # taker thread ident -> its connection's client id, while blocked
        self.pending_acks: list[Ack] = []
        self.running: collections.Counter[str] = collections.Counter()
        self.work: HandOff[UnitOfWork] = HandOff(capsule.concurrency, HOT_PROCESSORS, ESCALATE_AFTER)
        self.job_arrived = threading.Event()
        self.quiet_event = threading.Event()
        self.want_jobs = threading.Event()
        self.quieted = False
        self.stopping = False
        self.abandoned = False  # set at the deadline: late finishers must not ack requeued jobs
        self.needs_reconcile = False
        self.processed = 0
        self.failed = 0
        self.idle = False  # the dispatcher is waiting for a job to arrive, not for a free slot
        # The last fetch filled every free slot, so more jobs are likely waiting:
        # processors then fetch for themselves (_refill) and the dispatcher stands by.
        self.backlog = False
        self.fetching = False  # a fetch is in flight (dispatcher's or a processor's): one at a time
        self.processors: set[threading.Thread] = set()
        self.dispatcher: threading.Thread | None = None
        self.takers: list[threading.Thread] = []
        self._started = False

    # --- lifecycle ------------------------------------------------------------
    def start(self) -> None:
        with self.condition:
            if self._started:
                return
            self._started = True
        for _ in range(self.concurrency):
            self._spawn_processor()
        self.dispatcher = safe_thread(f"dispatcher-{self.capsule.name}", self._dispatch_loop)
        queue_count = len(self.fetcher.queue_names)
        per_queue = max(1, -(-self.concurrency // queue_count))
        for index in range(1, queue_count + 1):
            for number in range(per_queue):
                self.takers.append(safe_thread(
                    f"taker-{self.fetcher.queue_names[index - 1]}-{number}",
                    lambda index=index, first=number == 0: self._take_loop(index, first)))

    def quiet(self) -> None:
        """Stop fetching; running jobs finish. Idempotent."""
        with self.condition:
            first = not self.quieted
            self.quieted = True
            self.condition.notify_all()
        self.quiet_event.set()
        self.job_arrived.set()
        self.want_jobs.set()
        if first and self.takers:
            # On a thread of its own: the caller may be a signal handler's or the
            # heartbeat's, and a Redis outage must not hold either up.
            safe_thread(f"recall-{self.capsule.name}",
                        lambda: self._recall_takers(time.monotonic() + self._taker_bound()))

    def stop(self, deadline: Callable[[], float]) -> None:
        """Quiet, wait for running jobs until ``deadline()`` (monotonic), then requeue the rest.

        A callable, so a second TERM can pull the deadline in while we wait.
        """
        with self.condition:
            if not self._started:
                # Stopped during boot (Redis unreachable): nothing was fetched,
                # and a requeue would only fail against the same dead Redis.
                return
        self.quiet()
        with self.condition:
            # From here on acks stay in memory: the requeue below drops them in
            # the same atomic step that returns the unfinished jobs.
            self.stopping = True
            self.condition.notify_all()
        if self.dispatcher is not None and self.dispatcher is not threading.current_thread():
            self.dispatcher.join(JOIN_TIMEOUT)
        with self.condition:
            while self.free < self.concurrency and time.monotonic() < deadline():
                self.condition.wait(min(0.1, max(0.0, deadline() - time.monotonic())))
            unfinished = self.concurrency - self.free
            if unfinished:
                # Past the deadline: whatever is still running is requeued
                # below, so its eventual finish must not ack or retry it.
                self.abandoned = True
            acks, self.pending_acks = self.pending_acks, []
        self.work.close()
        # A taker still blocked could move one more job into our in-progress
        # list after the requeue below emptied it: wait for every taker first.
        taker_deadline = time.monotonic() + self._taker_bound() + JOIN_TIMEOUT
        for thread in self.takers:
            thread.join(max(0.0, taker_deadline - time.monotonic()))
        if any(thread.is_alive() for thread in self.takers):
            logger.warning("djwork: a queue taker did not stop in time; a job it takes late stays on the "
                           "in-progress list, where orphan recovery returns it")
        if unfinished:
            logger.warning("djwork: %d job(s) still running at the shutdown deadline; requeueing them",
                           unfinished)
        try:
            requeued = self.fetcher.requeue(acks)
            if requeued:
                logger.info("djwork: pushed %d job(s) back to Redis", requeued)
        except Exception:
            # Left on the in-progress list: orphan recovery requeues them once
            # this process's heartbeat is gone.
            logger.exception("djwork: requeue at shutdown failed; orphan recovery will return the jobs")
        self.fetcher.close()
        join_until = time.monotonic() + (0.5 if unfinished else JOIN_TIMEOUT)
        for thread in list(self.processors):
            thread.join(max(0.0, join_until - time.monotonic()))

    @property
    def reserved(self) -> int:
        """Slots held by takers (read under the condition)."""
        return sum(self.reserved_by_queue.values())

    @property
    def busy(self) -> int:
        return self.concurrency - self.free

    # --- processors -----------------------------------------------------------
    def _spawn_processor(self) -> None:
        thread = threading.Thread(target=self._processor_loop, name=f"djwork-processor-{self.capsule.name}",
                                  daemon=True)
        with self.condition:
            self.processors.add(thread)
        thread.start()

    def _processor_loop(self) -> None:
        me = threading.current_thread()
        try:
            while True:
                unit = self.work.get()
                if unit is None:
                    return
                try:
                    self.run_job(self, unit)
                finally:
                    self._release(unit)
                if self.backlog and not self.work.waiting():
                    self._refill()
        except BaseException:
            logger.exception("djwork: processor thread died; replacing it")
            self._replace(me)
            raise
        finally:
            with self.condition:
                self.processors.discard(me)

    def _replace(self, dead: threading.Thread) -> None:
        with self.condition:
            self.processors.discard(dead)
            if self.stopping:
                return
        try:
            self._spawn_processor()
        except Exception:
            # Running one short for the rest of the process's life is invisible
            # degradation: take the process down through its normal graceful
            # path instead (seed 001, wurk manager.rb).
            logger.exception("djwork: could not replace a dead processor; shutting down")
            self.request_shutdown()

    def _release(self, unit: UnitOfWork) -> None:
        with self.condition:
            if unit.ack_jid is not None and not self.abandoned and (self.fetcher.reliable or unit.ack_jid):
                self.pending_acks.append(Ack(unit.queue_index, unit.raw, unit.ack_jid))
            self.processed += unit.processed
            self.failed += unit.failed
            self.running[unit.raw] -= 1
            if self.running[unit.raw] <= 0:
                del self.running[unit.raw]
            self.free += 1
            # Through a backlog this processor fetches the next batch itself
            # (_refill): waking the dispatcher would only add a thread to pass the GIL to.
            if not self.backlog or self.quieted or self.stopping:
                self.condition.notify_all()
            ack_waiting = bool(self.pending_acks) and self.idle
        if ack_waiting:
            # An idle dispatcher sleeps on job_arrived (up to FETCH_TIMEOUT), not
            # on the condition: wake it so the ack goes out now, or a crash in
            # that window would run the finished job again.
            self.job_arrived.set()

    @staticmethod
    def acknowledge(unit: UnitOfWork, jid: str) -> None:
        """The job is done (succeeded, expired, or filed elsewhere): remove it with the next fetch.

        Recorded on the unit; ``_release`` queues the ack when the processor lets go of it.
        """
        unit.ack_jid = jid

    def take_counts(self) -> tuple[int, int]:
        with self.condition:
            counts = (self.processed, self.failed)
            self.processed = self.failed = 0
        return counts

    def _refill(self) -> None:
        """Through a backlog, a processor that finds no job waiting fetches the next batch itself.

        One thread fewer per batch: handing the fetch to the dispatcher cost
        two thread switches and a third thread contending for the GIL with
        the two running jobs. Once a fetch comes back short (the queue ran
        dry) or fails, the dispatcher takes over again.
        """
        with self.condition:
            if (self.fetching or not self.backlog or self.quieted or self.stopping or self.recalling
                    or self.needs_reconcile):
                return
            limit = self.free - self.reserved
            if limit <= 0:
                return
            self.fetching = True
            acks, self.pending_acks = self.pending_acks, []
            self.free -= limit
        self._fetch_and_hand_out(limit, acks)

    def _fetch_and_hand_out(self, limit: int, acks: list[Ack]) -> list[UnitOfWork] | None:
        """Fetch into ``limit`` slots already taken from ``free`` with ``fetching`` set; None after a failure.

        On failure the slots and acks are given back and a reconcile is due:
        the lost reply may hide jobs the fetch moved (the dispatcher adopts them).
        """
        try:
            units = self.fetcher.fetch(limit, acks)
        except Exception:
            logger.exception("djwork: fetch failed; reconciling with Redis before fetching again")
            with self.condition:
                self.fetching = False
                self.backlog = False
                self.free += limit
                self.pending_acks = acks + self.pending_acks
                self.needs_reconcile = True
                self.condition.notify_all()
            return None
        self._hand_out(units, held=limit, fetched=True)
        return units

    # --- dispatcher -----------------------------------------------------------
    def _dispatcher_waits(self) -> bool:
        """Nothing for the dispatcher to do yet (under the condition)."""
        if self.stopping:
            return False
        if self.fetching:
            # Also before a reconcile: a fetch in flight would look like a lost
            # one, and its jobs would be adopted and run twice.
            return True
        if self.needs_reconcile:
            return False
        if self.backlog and not self.quieted and not self.recalling and self.work.refill_coming():
            # Processors fetch for themselves, acks riding along (_refill). Only
            # while one will: when every running job is a long one, nobody finishes
            # to refill, and the free slots and pending acks are ours again.
            return True
        if self.pending_acks:
            # Quiet: take no more jobs, but keep settling acks as running jobs
            # finish, so a kill -9 while quiet doesn't re-run them. Acks go out even
            # when takers hold every free slot, or a crash would re-run finished jobs.
            return False
        return self.quieted or self.free - self.reserved <= 0 or self.recalling

    def _dispatch_loop(self) -> None:
        while True:
            with self.condition:
                while self._dispatcher_waits():
                    # Through a backlog processors hand jobs to each other without
                    # waking us, so look in at least every escalation period: a job
                    # waiting behind long ones must still get a thread (handoff.py),
                    # and slots freed while nobody refills must still be filled.
                    longest = ESCALATE_AFTER if self.backlog else None
                    self.condition.wait(self._until_escalation(longest))
                    self.work.escalate()
                if self.stopping:
                    return
                limit = 0 if self.quieted or self.recalling else max(0, self.free - self.reserved)
                acks, self.pending_acks = self.pending_acks, []
                # Held for the fetch's round trip: a taker's job landing meanwhile
                # must not find the slots the fetch is filling still free.
                self.free -= limit
                self.fetching = True
            if self.needs_reconcile:
                with self.condition:
                    self.free += limit
                    self.fetching = False
                if not self._reconcile_with_takers_out(acks):
                    self._pause_after_error()
                continue
            units = self._fetch_and_hand_out(limit, acks)
            if units is None:
                self._pause_after_error()
                continue
            if units:
                self.want_jobs.clear()
            elif not self.quieted:
                self._wait_for_arrival()

    def _hand_out(self, units: list[UnitOfWork], held: int = 0, fetched: bool = False) -> None:
        with self.condition:
            self.free += held - len(units)
            for unit in units:
                self.running[unit.raw] += 1
            if fetched:
                # In the same step as counting them running: a reconcile between the
                # two would take the fetched jobs for a lost fetch's and run them twice.
                self.fetching = False
                self.backlog = len(units) >= held > 0
                if not self.backlog:
                    self.condition.notify_all()  # the dispatcher takes over (idle wait, takers)
            elif held > len(units):
                self.condition.notify_all()
        self.work.put_many(units)

    def _until_escalation(self, longest: float | None = None) -> float | None:
        """How long the dispatcher may sleep before the oldest handed-out job is due for escalation."""
        due = self.work.escalation_due_in()
        if due is None:
            return longest
        return due if longest is None else min(due, longest)

    def _wait_for_arrival(self) -> None:
        self.idle = True
        self.job_arrived.clear()
        self.want_jobs.set()
        with self.condition:
            # An ack or a reconcile that came in while we were fetching must not
            # wait out the fetch timeout: a crash meanwhile would re-run the job.
            urgent = bool(self.pending_acks) or self.needs_reconcile
        # Bounded so a missed wakeup costs at most one fetch timeout, not a hang.
        deadline = time.monotonic() + self.launcher.config.fetch_timeout
        while not urgent:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.job_arrived.wait(self._until_escalation(remaining)):
                break
            self.work.escalate()
        self.idle = False

    def _pause_after_error(self) -> None:
        with self.condition:
            if not self.quieted:
                self.condition.wait(FETCH_ERROR_PAUSE)

    def _reconcile_with_takers_out(self, acks: list[Ack]) -> bool:
        """Reconcile once no taker is blocked or settling: a take in flight would look like a lost fetch's."""
        with self.condition:
            self.recalling += 1
        try:
            if not self._recall_takers(time.monotonic() + self._taker_bound()):
                with self.condition:
                    self.pending_acks = acks + self.pending_acks
                return False
            return self._reconcile(acks)
        finally:
            with self.condition:
                self.recalling -= 1
                self.condition.notify_all()

    def _reconcile(self, acks: list[Ack]) -> bool:
        """After a fetch whose reply was lost: adopt what it moved, resend acks it didn't apply.

        In-memory state is trusted over Redis (seed 004, cogworker manager.rb):
        what Redis holds beyond our running jobs and unsent acks was moved by
        the lost fetch, and is ours to run. Processors keep running and
        finishing jobs meanwhile, so "unsent acks" includes those buffered
        after the read.
        """
        try:
            held = self.fetcher.in_progress()
        except Exception:
            logger.exception("djwork: reconcile read failed")
            with self.condition:
                self.pending_acks = acks + self.pending_acks
            return False
        adopted: list[UnitOfWork] = []
        unsent: list[Ack] = []
        with self.condition:
            unaccounted_running = collections.Counter(self.running)
            for index, items in held.items():
                present = collections.Counter(items)
                for raw in list(present):
                    matched = min(present[raw], unaccounted_running[raw])
                    present[raw] -= matched
                    unaccounted_running[raw] -= matched
                for ack in acks:
                    # Still on the list: the lost round trip did not apply this ack.
                    if ack.queue_index == index and present[ack.raw] > 0:
                        present[ack.raw] -= 1
                        unsent.append(ack)
                for ack in self.pending_acks:
                    # Running when the lists were read, finished since: on the list,
                    # no longer running, its ack buffered after ours were taken. Not
                    # the lost fetch's: adopted, it would run a second time.
                    if ack.queue_index == index and present[ack.raw] > 0:
                        present[ack.raw] -= 1
                for raw, count in present.items():
                    for _ in range(max(0, count)):
                        adopted.append(UnitOfWork(self.fetcher.queue_names[index - 1], index, raw,
                                                  self.fetcher.in_progress_keys[index - 1]))
            self.pending_acks = unsent + self.pending_acks
            self.needs_reconcile = False
        if adopted:
            logger.warning("djwork: adopting %d job(s) moved by a fetch whose reply was lost", len(adopted))
            self._hand_out(adopted)
        return True

    def snapshot(self) -> dict[str, Any]:
        return {"busy": self.busy, "concurrency": self.concurrency}
