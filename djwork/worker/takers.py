"""Queue takers: how an idle Manager waits for jobs, mixed into Manager (manager.py).

When every queue is empty, taker threads block on them with BLMOVE straight
into this process's in-progress list, each on a connection of its own
(``QueueTaker``, fetch.py), and hand the job they take to a processor. A
taker holds a free slot while it blocks (``reserved_by_queue``), so takers and the
dispatcher together never take more jobs than there are free slots; the one
exception, a queue's first taker watching even when other queues' takers
hold every free slot, gives back what it cannot run. Quiet, stop and
reconcile stop new takes and interrupt blocked ones with CLIENT UNBLOCK.
The state lives on the Manager, under its condition.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from djwork import redis as redis_layer
from djwork.worker.fetch import QueueTaker, UnitOfWork

if TYPE_CHECKING:
    from djwork.worker.manager import Manager

logger = logging.getLogger("djwork.worker")

FETCH_ERROR_PAUSE = 1.0
PAUSED_RECHECK = 2.0
RECALL_RETRY = 0.02


class TakersMixin:
    def _taker_bound(self: Manager) -> float:
        """How long a taker can stay in Redis: its block plus the socket timeout that outlasts it."""
        config = self.launcher.config
        return config.fetch_timeout + config.socket_timeout

    def _take_loop(self: Manager, queue_index: int, first: bool) -> None:
        taker = QueueTaker(self.fetcher, queue_index)
        paused: bool | None = None  # unknown until asked
        try:
            while not self.quieted:
                self.want_jobs.wait()
                if self.quieted:
                    return
                try:
                    if paused is not False:
                        paused = self._check_paused(taker, recheck=paused is True)
                        continue
                    taker.connect()
                except Exception as error:
                    logger.warning("djwork: queue %s: %s", taker.queue, error)
                    self._pause_quietly(FETCH_ERROR_PAUSE)
                    continue
                if self._reserve(queue_index, first):
                    paused = self._take_one(taker)
        finally:
            taker.close()

    def _check_paused(self: Manager, taker: QueueTaker, recheck: bool) -> bool:
        # A taker blocked on a paused queue would take and give back every job
        # on it, forever: a paused queue is re-checked on a slow clock instead.
        if recheck:
            self._pause_quietly(PAUSED_RECHECK)
        return taker.is_paused()

    def _pause_quietly(self: Manager, seconds: float) -> None:
        # An event only quiet sets, not the busy condition: woken by every other
        # taker's notify, a pause after an error would turn into a retry loop
        # while Redis is down.
        self.quiet_event.wait(seconds)

    def _reserve(self: Manager, queue_index: int, first: bool) -> bool:
        """Hold a free slot for a take; False (after a bounded wait) when there is none to hold.

        A queue's first taker holds one whenever any slot is free and no other
        taker of its queue holds one, even if other queues' takers hold every
        free slot: else a busy queue could leave another unwatched, its jobs
        waiting for the dispatcher's next fetch. What it takes with no slot
        left, it gives back.
        """
        with self.condition:
            if self.quieted or not self.want_jobs.is_set():
                return False
            if not self.recalling and (self.free - self.reserved > 0 or (
                    first and self.free > 0 and not self.reserved_by_queue[queue_index])):
                self.reserved_by_queue[queue_index] += 1
                return True
            # No slot to hold: wait for a job to finish (bounded, to re-check
            # want_jobs), rather than spin.
            self.condition.wait(self.launcher.config.fetch_timeout)
            return False

    def _unreserve(self: Manager, queue_index: int) -> None:
        """Under the condition: a taker lets go of its slot."""
        self.reserved_by_queue[queue_index] -= 1
        self.condition.notify_all()

    def _take_one(self: Manager, taker: QueueTaker) -> bool:
        """Block for one job on the taker's queue and run it, or give it back; returns whether the queue is paused."""
        me = threading.get_ident()
        taken: str | None = None
        paused = False
        error: BaseException | None = None
        with self.condition:
            self.blocked[me] = taker.client_id
        try:
            taken, paused = taker.take(self.launcher.config.fetch_timeout)
        except Exception as caught:
            error = caught
        unit: UnitOfWork | None = None
        with self.condition:
            self.blocked.pop(me, None)
            if taken is not None and not paused and not self.quieted and self.free > 0:
                self.free -= 1
                self.running[taken] += 1
                unit = taker.unit(taken)
            if taken is None or unit is not None:
                self._unreserve(taker.queue_index)
            if error is not None and self.fetcher.reliable:
                # The lost reply may hide a job already on our in-progress list.
                self.needs_reconcile = True
        if unit is not None:
            self.work.put(unit)
            # More may have landed with it: let the dispatcher fetch in batches.
            self.want_jobs.clear()
            self.job_arrived.set()
        elif taken is not None:
            self._give_back(taker, taken)
        if error is not None:
            logger.warning("djwork: waiting on queue %s failed: %s", taker.queue, error)
            self.job_arrived.set()
            self._pause_quietly(FETCH_ERROR_PAUSE)
        return paused

    def _give_back(self: Manager, taker: QueueTaker, raw: str) -> None:
        # The slot stays held until the job is back on its queue: a reconcile
        # meanwhile would see it on our in-progress list and run it.
        try:
            taker.give_back(raw)
        except Exception as error:
            logger.warning("djwork: could not give back a job taken from %s (%s); reconciling", taker.queue, error)
            with self.condition:
                # Still on our in-progress list: reconciling adopts and runs it;
                # while stopping, the shutdown requeue returns it.
                self.needs_reconcile = True
        finally:
            with self.condition:
                self._unreserve(taker.queue_index)
            self.job_arrived.set()

    def _recall_takers(self: Manager, deadline: float) -> bool:
        """Interrupt blocked takers until none holds a slot (callers stop new ones first); False at ``deadline``.

        CLIENT UNBLOCK ends a block as a timeout would. One sent before the
        taker's BLMOVE reached Redis does nothing, hence the loop.
        """
        while True:
            with self.condition:
                if self.reserved <= 0:
                    return True
                if time.monotonic() >= deadline:
                    return False
                client_ids = list(self.blocked.values())
            for client_id in client_ids:
                try:
                    redis_layer.run(lambda conn, client_id=client_id: conn.client_unblock(client_id),
                                    idempotent=True, purpose="admin")
                except Exception as error:
                    logger.debug("djwork: CLIENT UNBLOCK %s failed: %s", client_id, error)
            with self.condition:
                if self.reserved > 0:
                    self.condition.wait(min(RECALL_RETRY, max(0.0, deadline - time.monotonic())))

