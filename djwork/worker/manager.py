"""Manager: one capsule's processor threads, and the start/quiet/stop of the parts that feed them.

The parts, each owning its own state (the architecture doc draws them):

* ``Slots`` (slots.py): free, held and running counts and the one Condition
  every part decides under;
* ``AckBuffer`` (acks.py): finished jobs' acks until the next fetch carries
  them, and the reconcile rules after a lost reply;
* ``Dispatcher`` (dispatcher.py): the fetch loop, the backlog refill, the reconcile;
* ``Takers`` (takers.py): the threads that block on empty queues;
* ``HandOff`` (handoff.py): fetched jobs waiting for a processor thread.

The Manager itself runs the processor threads (take a job from the hand-off,
run it, release its slot) and orchestrates start, quiet and stop, including
the shutdown requeue.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from djwork.redis.outage import is_outage_error
from djwork.redis.outage import tracker as outage
from djwork.settings.conf import Capsule
from djwork.worker.acks import AckBuffer
from djwork.worker.component import JOIN_TIMEOUT
from djwork.worker.coroutines import Coroutines
from djwork.worker.dispatcher import Dispatcher
from djwork.worker.fetch import Ack, Fetcher, UnitOfWork
from djwork.worker.handoff import HandOff
from djwork.worker.slots import Slots
from djwork.worker.takers import Takers
from djwork.worker.yielding import RequestGate

logger = logging.getLogger("djwork.worker")

# Processor threads kept awake for a stream of short jobs (handoff.py says why
# few), and how late a waiting job may start before every waiting job gets one.
HOT_PROCESSORS = 1
ESCALATE_AFTER = 0.003
# Through a backlog, a processor sends the next batch's fetch when this few jobs still wait
# (Dispatcher.refill), so the round trip overlaps them. More would shrink the batches.
REFILL_AHEAD = 1

# Runs a job on the calling thread; returns None, or a coroutine job (coroutine_jobs.py) to put on the loop.
RunJob = Callable[[UnitOfWork, AckBuffer], Any]


class Manager:
    def __init__(self, capsule: Capsule, fetcher: Fetcher, run_job: RunJob, request_shutdown: Callable[[], None],
                 *, fetch_timeout: float, socket_timeout: float, coroutines: Coroutines | None = None,
                 async_places: int = 0, gate: RequestGate | None = None) -> None:
        self.capsule = capsule
        self.fetcher = fetcher
        self.run_job = run_job
        self.request_shutdown = request_shutdown
        self.concurrency = capsule.concurrency
        self.coroutines = coroutines
        self.gate = gate  # embedded: steps aside while the host serves requests (yielding.py)
        self.slots = Slots(capsule.concurrency, keep_units=not fetcher.reliable,
                           async_places=async_places if coroutines is not None else 0)
        self.condition = self.slots.condition
        self.acks = AckBuffer(fetcher.reliable)
        self.work: HandOff[UnitOfWork] = HandOff(capsule.concurrency, HOT_PROCESSORS, ESCALATE_AFTER)
        arrived = threading.Event()
        self.takers = Takers(fetcher, self.slots, self.acks, self.run_unit, arrived.set, fetch_timeout, socket_timeout)
        self.dispatcher = Dispatcher(capsule.name, fetcher, self.slots, self.acks, self.takers, self.work, arrived,
                                     fetch_timeout, gate.pause if gate is not None else None)
        self.processed = 0
        self.expired = 0
        self.failed = 0
        self.processors: set[threading.Thread] = set()
        self._started = False

    # --- lifecycle ------------------------------------------------------------
    def start(self) -> None:
        with self.condition:
            if self._started:
                return
            self._started = True
        for _ in range(self.concurrency):
            self._spawn_processor()
        self.dispatcher.start()
        self.takers.start(self.concurrency)

    def quiet(self) -> None:
        """Stop fetching; running jobs finish. Idempotent."""
        with self.condition:
            first = not self.slots.quieted
            self.slots.quieted = True
            self.condition.notify_all()
        self.dispatcher.wake()
        self.takers.quiet(self.capsule.name, first)

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
        self._stop_dispatching()
        unfinished, acks, unfinished_units = self._drain(deadline)
        self.work.close()
        # A taker still blocked could move one more job into our in-progress
        # list after the requeue below emptied it: wait for every taker first.
        self.takers.join()
        if unfinished:
            logger.warning("djwork: %d job(s) still running at the shutdown deadline; requeueing them",
                           unfinished)
        self._requeue(acks, unfinished_units, unfinished)
        self.fetcher.close()
        self._join_processors(0.5 if unfinished else JOIN_TIMEOUT)

    def _stop_dispatching(self) -> None:
        with self.condition:
            # From here on acks stay in memory: the requeue drops them in the
            # same atomic step that returns the unfinished jobs.
            self.slots.stopping = True
            self.condition.notify_all()
        self.dispatcher.join(JOIN_TIMEOUT)

    def _drain(self, deadline: Callable[[], float]) -> tuple[int, list[Ack], list[UnitOfWork]]:
        """Wait for running jobs until the deadline; returns how many still run, the acks to settle,
        and (basic fetch) the jobs to push back."""
        slots = self.slots
        with self.condition:
            while slots.busy and time.monotonic() < deadline():
                self.condition.wait(min(0.1, max(0.0, deadline() - time.monotonic())))
            unfinished = slots.busy
            if unfinished:
                # Past the deadline: whatever is still running is requeued
                # below, so its eventual finish must not ack or retry it.
                self.acks.abandoned = True
                self.condition.notify_all()  # a processor waiting for a place gives its job up
            result = unfinished, self.acks.take(), slots.running_units()
        if unfinished and self.coroutines is not None:
            # A coroutine can be stopped, unlike a thread: cancelled now, its requeued copy is the only run left.
            self.coroutines.cancel(self)
        return result

    def _requeue(self, acks: list[Ack], unfinished_units: list[UnitOfWork], unfinished: int) -> None:
        try:
            requeued = self.fetcher.requeue(acks, unfinished_units)
            if requeued:
                logger.info("djwork: pushed %d job(s) back to Redis", requeued)
        except Exception as error:
            if not is_outage_error(error):
                # Left on the in-progress list: orphan recovery requeues them once
                # this process's heartbeat is gone.
                logger.exception("djwork: requeue at shutdown failed; orphan recovery will return the jobs")
                return
            # Redis is gone: a traceback would add nothing, the line says where the jobs are.
            outage.failed("requeue", error)
            unacked = f" ({len(acks)} finished job(s) whose ack was not written among them: they run again)" \
                if acks else ""
            if self.fetcher.reliable:
                logger.warning("djwork: could not push back %d job(s): Redis unreachable; they stay in %s and come "
                               "back by orphan recovery%s", unfinished + len(acks),
                               ", ".join(self.fetcher.in_progress_keys), unacked)
            elif unfinished:
                logger.warning("djwork: could not push back %d job(s): Redis unreachable; basic fetch keeps no "
                               "copy of a running job, so they are lost", unfinished)

    def _join_processors(self, timeout: float) -> None:
        join_until = time.monotonic() + timeout
        for thread in list(self.processors):
            thread.join(max(0.0, join_until - time.monotonic()))

    @property
    def busy(self) -> int:
        return self.slots.busy

    def take_counts(self) -> tuple[int, int, int]:
        """Jobs processed, failed and expired since the last call (the heartbeat's stat window)."""
        with self.condition:
            counts = (self.processed, self.failed, self.expired)
            self.processed = self.failed = self.expired = 0
        return counts

    # --- processors -----------------------------------------------------------
    def _spawn_processor(self) -> None:
        thread = threading.Thread(target=self._processor_loop, name=f"djwork-processor-{self.capsule.name}",
                                  daemon=True)
        with self.condition:
            self.processors.add(thread)
        thread.start()

    def _processor_loop(self) -> None:
        me = threading.current_thread()
        work, dispatcher = self.work, self.dispatcher
        try:
            while True:
                unit = work.get()
                if unit is None:
                    return
                self.run_unit(unit)
                if unit.timed_out:
                    return  # abandoned at its job's hard time limit: a fresh thread has taken its place
                if dispatcher.backlog and work.waiting() <= REFILL_AHEAD:
                    dispatcher.refill()
        except BaseException:
            logger.exception("djwork: processor thread died; replacing it")
            self._replace(me)
            raise
        finally:
            with self.condition:
                self.processors.discard(me)

    def run_unit(self, unit: UnitOfWork) -> None:
        """Run one job on the calling thread and settle it: a processor's step, and a queue taker's."""
        handed = False
        unit.on_time_out = self._timed_out
        try:
            if self.gate is not None:
                self.gate.before_job()
            coroutine_job = self.run_job(unit, self.acks)
            if coroutine_job is not None:
                handed = self._to_loop(unit, coroutine_job)
        finally:
            if not handed and not unit.timed_out:
                self._release(unit)

    def _timed_out(self, unit: UnitOfWork, thread_ident: int) -> None:
        """A job ran past its hard time limit and was filed (the watchdog's thread): free its slot now and
        give its still-running thread's place to a fresh one, so capacity is not lost to a stuck job."""
        self._release(unit)
        if self.takers.runs_a_job(thread_ident):
            # A queue taker's: no processor was lost, but its queue may have lost its only watcher.
            self.takers.replace(thread_ident)
            return
        with self.condition:
            abandoned = next((thread for thread in self.processors if thread.ident == thread_ident), None)
        # Replaced even when the thread already ended (its late finish beat this call): it takes no
        # more jobs either way. Out of `processors`, so a stop won't wait to join it.
        self._replace(abandoned)

    def _replace(self, dead: threading.Thread | None) -> None:
        with self.condition:
            self.processors.discard(dead)
            if self.slots.stopping:
                return
        try:
            self._spawn_processor()
        except Exception:
            # Running one short for the rest of the process's life is invisible
            # degradation: take the process down through its normal graceful
            # path instead.
            logger.exception("djwork: could not replace a dead processor; shutting down")
            self.request_shutdown()

    def _to_loop(self, unit: UnitOfWork, coroutine_job: Any) -> bool:
        """Move a coroutine job from this processor's slot to a place on the loop; False if it never went."""
        slots, coroutines = self.slots, self.coroutines
        assert coroutines is not None
        with self.condition:
            slots.waiting_for_place += 1
            try:
                # Every place taken: this thread (and its slot) waits, so the fetches
                # stop too; nothing is taken from Redis that nobody can run.
                while slots.async_free <= 0 and not self.acks.abandoned:
                    self.condition.wait(1.0)
            finally:
                slots.waiting_for_place -= 1
            if self.acks.abandoned:
                return False  # past the shutdown deadline: its copy was pushed back, it never started here
            slots.move_to_place()
            self.condition.notify_all()  # a slot is free again: the dispatcher may fetch into it
            wake = self.dispatcher.idle
        if wake:
            self.dispatcher.wake()
        try:
            coroutines.submit(self, coroutine_job.run(coroutines.finisher),
                              lambda: self._release(unit, on_place=True))
        except Exception:
            logger.exception("djwork: could not hand a coroutine job to the event loop; it stays in progress")
            with self.condition:
                slots.async_free += 1
                slots.free -= 1
            return False
        return True

    def _release(self, unit: UnitOfWork, on_place: bool = False) -> None:
        """The job's slot (or place), ack and counts, settled in one locked step (the per-job cost)."""
        slots, acks, dispatcher = self.slots, self.acks, self.dispatcher
        if unit.isolated:
            self.fetcher.isolation.release()
        with self.condition:
            late = acks.abandoned and unit.ack_jid is not None
            acks.add(unit)
            self.processed += unit.processed
            self.failed += unit.failed
            self.expired += unit.expired
            if on_place:
                slots.finish_on_place(unit)
            else:
                slots.finish(unit)
            # Through a backlog this processor fetches the next batch itself
            # (refill): waking the dispatcher would only add a thread to pass the GIL to.
            if not dispatcher.backlog or slots.closed or (on_place and slots.waiting_for_place):
                self.condition.notify_all()
            ack_waiting = bool(acks.pending) and dispatcher.idle
        if ack_waiting:
            # An idle dispatcher sleeps on its arrival event (up to FETCH_TIMEOUT),
            # not on the condition: wake it so the ack goes out now, or a crash in
            # that window would run the finished job again.
            dispatcher.wake()
        if late:
            self._settle_late(unit)

    def _settle_late(self, unit: UnitOfWork) -> None:
        """A job done after the shutdown deadline requeued it: take its pushed-back copy out again."""
        try:
            outcome = self.fetcher.settle_late(unit)
        except Exception:
            logger.exception("djwork: job %s finished after the shutdown deadline, but its pushed-back copy "
                             "could not be removed; it will run again", unit.ack_jid)
            return
        logger.warning("djwork: job %s finished after the shutdown deadline; %s", unit.ack_jid, {
            "removed": "removed its pushed-back copy from the queue",
            "acked": "it had not been pushed back yet, so nothing will run it again",
            "marked": "its pushed-back copy had already left the queue: marked done so a fetch drops it",
        }.get(outcome, outcome))
