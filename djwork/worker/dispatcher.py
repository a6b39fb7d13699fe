"""Dispatcher: fetches jobs into free slots, refills through a backlog, and reconciles after a lost reply.

The dispatcher fetches only when a processor slot is free, and never more
jobs than free slots: no prefetch, so a long job can't hold short ones
hostage behind it (Celery's prefetch starvation). Finished jobs' acks
(acks.py) ride on the next fetch. When every queue is empty it sets the
takers watching (takers.py) and waits for a job to arrive.

Through a backlog (the last fetch filled every free slot) processors fetch
for themselves (``refill``) and the dispatcher stands by; it takes over
again when a fetch comes back short or fails, on quiet or stop, and
whenever nobody will be back to refill.

State: the dispatcher thread, ``fetching`` (one fetch at a time, whoever
runs it), ``backlog``, ``idle`` and the ``arrived`` event it sleeps on while
idle. Everything it decides is decided under the slots' condition.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from djwork.redis.outage import tracker as outage
from djwork.worker.acks import AckBuffer
from djwork.worker.component import safe_thread
from djwork.worker.fetch import Ack, Fetcher, SentFetch, UnitOfWork
from djwork.worker.handoff import HandOff
from djwork.worker.slots import Slots
from djwork.worker.takers import FETCH_ERROR_PAUSE, Takers

logger = logging.getLogger("djwork.worker")


class Dispatcher:
    def __init__(self, name: str, fetcher: Fetcher, slots: Slots, acks: AckBuffer, takers: Takers,
                 work: HandOff[UnitOfWork], arrived: threading.Event, fetch_timeout: float,
                 pause: Callable[[], None] | None = None) -> None:
        self.name = name
        self.fetcher = fetcher
        self.slots = slots
        self.condition = slots.condition
        self.acks = acks
        self.takers = takers
        self.work = work
        self.arrived = arrived  # a job landed or an ack waits: ends the idle wait early
        self.fetch_timeout = fetch_timeout
        self.pause = pause  # embedded: waits while the host serves a request (yielding.py)
        self.fetching = False  # a fetch is in flight (the dispatcher's or a processor's): one at a time
        # The last fetch filled every free slot, so more jobs are likely waiting:
        # processors then fetch for themselves (refill) and the dispatcher stands by.
        self.backlog = False
        self.idle = False  # waiting for a job to arrive, not for a free slot
        # A refill's fetch sent and not yet read (refill/collect), and when it left (monotonic).
        self.sent: SentFetch | None = None
        self.sent_at = 0.0
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = safe_thread(f"dispatcher-{self.name}", self._dispatch)

    def join(self, timeout: float) -> None:
        """After the slots' ``stopping`` was set (and notified)."""
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout)

    def wake(self) -> None:
        """End an idle wait now (a job arrived, an ack waits, quiet)."""
        self.arrived.set()

    # --- refill: a processor fetches for itself through a backlog ------------------------------
    def refill(self) -> None:
        """Through a backlog, a processor running out of jobs fetches the next batch itself.

        One thread fewer per batch: handing the fetch to the dispatcher cost
        two thread switches and a third thread contending for the GIL with
        the two running jobs. The fetch is sent while up to ``REFILL_AHEAD``
        jobs still wait, into the slots already free, and its reply is read
        once none waits: the round trip overlaps the last jobs instead of
        leaving the process idle between batches (it was a quarter of a
        no-op drain's time). Once a fetch comes back short (the queue ran
        dry) or fails, the dispatcher takes over again.
        """
        if self.sent is not None:
            if not self.work.waiting():
                self.collect()
            return
        if self.pause is not None:
            self.pause()
        slots = self.slots
        with self.condition:
            if (self.fetching or not self.backlog or slots.closed or self.takers.recalling
                    or self.acks.needs_reconcile):
                return
            limit = slots.unclaimed
            if limit <= 0:
                return
            self.fetching = True
            acks = self.acks.take()
            slots.hold(limit)
        try:
            sent = self.fetcher.send(limit, acks)
        except Exception as error:
            self._fetch_failed(error, limit, acks)
            return
        with self.condition:
            self.sent = sent
            self.sent_at = time.monotonic()
        if not self.work.waiting():
            self.collect()

    def collect(self) -> None:
        """Read the reply of the fetch a refill sent and hand its jobs out; whoever comes first reads it.

        A processor that finds no job waiting, or the dispatcher when the reply has waited
        longer than ``escalate_after`` (every processor busy with long jobs) or on stop.
        """
        with self.condition:
            sent, self.sent = self.sent, None
        if sent is None:
            return
        try:
            units = self.fetcher.receive(sent)
        except Exception as error:
            self._fetch_failed(error, sent.limit, sent.acks)
            return
        outage.succeeded("fetch")
        self._hand_out(units, held=sent.limit, fetched=True)

    def _fetch_and_hand_out(self, limit: int, acks: list[Ack]) -> list[UnitOfWork] | None:
        """Fetch into ``limit`` slots already taken from ``free`` with ``fetching`` set; None after a failure."""
        try:
            units = self.fetcher.fetch(limit, acks)
        except Exception as error:
            self._fetch_failed(error, limit, acks)
            return None
        outage.succeeded("fetch")
        self._hand_out(units, held=limit, fetched=True)
        return units

    def _fetch_failed(self, error: Exception, limit: int, acks: list[Ack]) -> None:
        """The slots and acks go back and a reconcile is due: the lost reply may hide jobs the fetch moved."""
        # A single lost reply keeps its line (and its immediate reconcile); a declared
        # outage is said once by djwork.redis.outage, not on every retry.
        if outage.failed("fetch", error):
            logger.debug("djwork: fetch failed; reconciling with Redis before fetching again", exc_info=True)
        else:
            logger.error("djwork: fetch failed; reconciling with Redis before fetching again", exc_info=error)
        with self.condition:
            self.fetching = False
            self.backlog = False
            self.slots.unhold(limit)
            self.acks.put_back(acks)
            self.acks.reply_lost()
            self.condition.notify_all()

    def _hand_out(self, units: list[UnitOfWork], held: int = 0, fetched: bool = False) -> None:
        with self.condition:
            self.slots.start_running(units, held)
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

    # --- the dispatcher thread ------------------------------------------------------------------
    def _waits(self) -> bool:
        """Nothing for the dispatcher to do yet (under the condition)."""
        slots = self.slots
        if self.sent is not None and (slots.stopping or
                                      time.monotonic() - self.sent_at >= self.work.escalate_after):
            # A refill's reply nobody read: every processor is busy (or stopping), so its jobs would
            # sit in held slots. Read by the dispatcher (collect).
            return False
        if slots.stopping:
            return False
        if self.fetching:
            # Also before a reconcile: a fetch in flight would look like a lost
            # one, and its jobs would be adopted and run twice.
            return True
        if self.acks.needs_reconcile:
            return False
        if self.backlog and not slots.quieted and not self.takers.recalling and self.work.refill_coming():
            # Processors fetch for themselves, acks riding along (refill). Only
            # while one will: when every running job is a long one, nobody finishes
            # to refill, and the free slots and pending acks are ours again.
            return True
        if self.acks.pending:
            # Quiet: take no more jobs, but keep settling acks as running jobs
            # finish, so a kill -9 while quiet doesn't re-run them. Acks go out even
            # when takers hold every free slot, or a crash would re-run finished jobs.
            return False
        return slots.quieted or slots.unclaimed <= 0 or bool(self.takers.recalling)

    def _dispatch(self) -> None:
        slots = self.slots
        while True:
            with self.condition:
                while self._waits():
                    # Through a backlog processors hand jobs to each other without
                    # waking us, so look in at least every escalation period: a job
                    # waiting behind long ones must still get a thread (handoff.py),
                    # and slots freed while nobody refills must still be filled.
                    longest = self.work.escalate_after if self.backlog else None
                    self.condition.wait(self._until_escalation(longest))
                    self.work.escalate()
                collect = self.sent is not None
                if slots.stopping and not collect:
                    return
                if not collect:
                    limit = 0 if slots.quieted or self.takers.recalling else max(0, slots.unclaimed)
                    acks = self.acks.take()
                    # Held for the fetch's round trip: a taker's job landing meanwhile
                    # must not find the slots the fetch is filling still free.
                    slots.hold(limit)
                    self.fetching = True
            if collect:
                self.collect()
                continue
            if self.acks.needs_reconcile:
                with self.condition:
                    slots.unhold(limit)
                    self.fetching = False
                if not self._reconcile_with_takers_out(acks):
                    self._pause_after_error()
                continue
            if self.pause is not None and limit:
                self.pause()
            units = self._fetch_and_hand_out(limit, acks)
            if units is None:
                self._pause_after_error()
                continue
            if units:
                self.takers.stand_down()
            elif not slots.quieted:
                self._wait_for_arrival()

    def _until_escalation(self, longest: float | None = None) -> float | None:
        """How long the dispatcher may sleep before the oldest handed-out job is due for escalation."""
        due = self.work.escalation_due_in()
        if due is None:
            return longest
        return due if longest is None else min(due, longest)

    def _wait_for_arrival(self) -> None:
        self.idle = True
        self.arrived.clear()
        self.takers.watch()
        with self.condition:
            # An ack or a reconcile that came in while we were fetching must not
            # wait out the fetch timeout: a crash meanwhile would re-run the job.
            urgent = bool(self.acks.pending) or self.acks.needs_reconcile
        # Bounded so a missed wakeup costs at most one fetch timeout, not a hang.
        deadline = time.monotonic() + self.fetch_timeout
        while not urgent:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.arrived.wait(self._until_escalation(remaining)):
                break
            self.work.escalate()
        self.idle = False

    def _pause_after_error(self) -> None:
        with self.condition:
            if not self.slots.quieted:
                self.condition.wait(max(FETCH_ERROR_PAUSE, outage.pause("fetch"), outage.pause("reconcile")))

    # --- reconcile after a lost reply -----------------------------------------------------------
    def _reconcile_with_takers_out(self, acks: list[Ack]) -> bool:
        """Reconcile once no taker is blocked or settling: a take in flight would look like a lost fetch's."""
        with self.takers.held_back() as recalled:
            if not recalled:
                with self.condition:
                    self.acks.put_back(acks)
                return False
            return self._reconcile(acks)

    def _reconcile(self, acks: list[Ack]) -> bool:
        """After a fetch whose reply was lost: adopt what it moved, resend acks it didn't apply (acks.py)."""
        try:
            held = self.fetcher.in_progress()
        except Exception as error:
            if outage.failed("reconcile", error):
                logger.debug("djwork: reconcile read failed", exc_info=True)
            else:
                logger.exception("djwork: reconcile read failed")
            with self.condition:
                self.acks.put_back(acks)
            return False
        outage.succeeded("reconcile")
        with self.condition:
            moved = self.acks.settle_lost_round_trip(held, self.slots.running, acks)
        adopted = [UnitOfWork(self.fetcher.queue_names[index - 1], index, raw,
                              self.fetcher.in_progress_keys[index - 1]) for index, raw in moved]
        if adopted:
            logger.warning("djwork: adopting %d job(s) moved by a fetch whose reply was lost", len(adopted))
            self._hand_out(adopted)
        return True
