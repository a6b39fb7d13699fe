"""Manager: one capsule's processor threads, the dispatcher that feeds them, and the queue waiters.

The dispatcher fetches only when a processor slot is free, and never more
jobs than free slots: no prefetch, so a long job can't hold short ones
hostage behind it (Celery's prefetch starvation). Finished jobs' acks are
buffered and ride on the next fetch. When every queue is empty, waiter
threads block on the queues (a blocking peek) and wake the dispatcher the
moment a job arrives: an idle worker notices new work at once, without
polling.
"""

from __future__ import annotations

import collections
import logging
import queue as queue_module
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from djwork.worker.component import JOIN_TIMEOUT, safe_thread
from djwork.worker.fetch import Ack, Fetcher, UnitOfWork

if TYPE_CHECKING:
    from djwork.conf import Capsule
    from djwork.worker.launcher import Launcher

logger = logging.getLogger("djwork.worker")

FETCH_ERROR_PAUSE = 1.0
PAUSED_RECHECK = 2.0
BATCH_WAIT = 0.002


class Manager:
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
        self.pending_acks: list[Ack] = []
        self.running: collections.Counter[str] = collections.Counter()
        self.work: queue_module.SimpleQueue[UnitOfWork | None] = queue_module.SimpleQueue()
        self.job_arrived = threading.Event()
        self.want_jobs = threading.Event()
        self.quieted = False
        self.stopping = False
        self.abandoned = False  # set at the deadline: late finishers must not ack requeued jobs
        self.needs_reconcile = False
        self.processed = 0
        self.failed = 0
        self.idle = False  # the dispatcher is waiting for a job to arrive, not for a free slot
        self.backlog = False  # the last fetch filled every free slot: more jobs are likely waiting
        self.batch_minimum = max(1, capsule.concurrency // 2)
        self.processors: set[threading.Thread] = set()
        self.dispatcher: threading.Thread | None = None
        self.waiters: list[threading.Thread] = []
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
        for index in range(1, len(self.fetcher.queue_names) + 1):
            self.waiters.append(safe_thread(f"waiter-{self.fetcher.queue_names[index - 1]}",
                                            lambda index=index: self._wait_loop(index)))

    def quiet(self) -> None:
        """Stop fetching; running jobs finish. Idempotent."""
        with self.condition:
            self.quieted = True
            self.condition.notify_all()
        self.job_arrived.set()
        self.want_jobs.set()

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
        for _ in range(len(self.processors)):
            self.work.put(None)
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
        join_until = time.monotonic() + (0.5 if unfinished else JOIN_TIMEOUT)
        for thread in list(self.processors):
            thread.join(max(0.0, join_until - time.monotonic()))

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
            # Wake the dispatcher only when it can act: while a backlog is being
            # batched it is waiting for batch_minimum free slots anyway.
            if not self.backlog or self.free >= self.batch_minimum or self.quieted or self.stopping:
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

    # --- dispatcher -----------------------------------------------------------
    def _dispatch_loop(self) -> None:
        while True:
            with self.condition:
                # Quiet: take no more jobs, but keep settling acks as running
                # jobs finish, so a kill -9 while quiet doesn't re-run them.
                while not self.stopping and (not self.pending_acks if self.quieted else self.free <= 0):
                    self.condition.wait()
                if self.stopping:
                    return
                if self.backlog and not self.quieted and self.free < self.batch_minimum:
                    # The queue had more than we could take: let a few more slots
                    # free up, so a busy worker pays one fetch per batch, not one
                    # per job. Bounded, so a lone free slot waits at most BATCH_WAIT.
                    self.condition.wait(BATCH_WAIT)
                    if self.stopping:
                        return
                limit = 0 if self.quieted else self.free
                acks, self.pending_acks = self.pending_acks, []
            if self.needs_reconcile and not self._reconcile(acks):
                self._pause_after_error()
                continue
            try:
                units = self.fetcher.fetch(limit, acks)
            except Exception:
                logger.exception("djwork: fetch failed; reconciling with Redis before fetching again")
                with self.condition:
                    self.pending_acks = acks + self.pending_acks
                self.needs_reconcile = True
                self._pause_after_error()
                continue
            self.backlog = len(units) >= limit > 0
            if units:
                self.want_jobs.clear()
                self._hand_out(units)
            elif not self.quieted:
                self._wait_for_arrival()

    def _hand_out(self, units: list[UnitOfWork]) -> None:
        with self.condition:
            self.free -= len(units)
            for unit in units:
                self.running[unit.raw] += 1
        for unit in units:
            self.work.put(unit)

    def _wait_for_arrival(self) -> None:
        self.job_arrived.clear()
        self.want_jobs.set()
        self.idle = True
        # Bounded so a paused queue resuming, or a missed wakeup, costs at most
        # one fetch timeout rather than a hang.
        self.job_arrived.wait(self.launcher.config.fetch_timeout)
        self.idle = False

    def _pause_after_error(self) -> None:
        with self.condition:
            if not self.quieted:
                self.condition.wait(FETCH_ERROR_PAUSE)

    def _reconcile(self, acks: list[Ack]) -> bool:
        """After a fetch whose reply was lost: adopt what it moved, resend acks it didn't apply.

        In-memory state is trusted over Redis (seed 004, cogworker manager.rb):
        what Redis holds beyond our running jobs and unsent acks was moved by
        the lost fetch, and is ours to run.
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

    # --- waiters --------------------------------------------------------------
    def _wait_loop(self, queue_index: int) -> None:
        name = self.fetcher.queue_names[queue_index - 1]
        while not self.quieted:
            self.want_jobs.wait()
            if self.quieted:
                return
            if name in self.fetcher.paused:
                # A paused queue with jobs would answer the peek at once, forever:
                # re-check it on a slow clock instead.
                time.sleep(PAUSED_RECHECK)
                self.job_arrived.set()
                continue
            try:
                if self.fetcher.wait_for_job(queue_index, self.launcher.config.fetch_timeout):
                    self.job_arrived.set()
            except Exception as error:
                logger.warning("djwork: waiting on queue %s failed: %s", name, error)
                time.sleep(FETCH_ERROR_PAUSE)

    def snapshot(self) -> dict[str, Any]:
        return {"busy": self.busy, "concurrency": self.concurrency}
