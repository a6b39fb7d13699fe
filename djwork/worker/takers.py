"""Queue takers: how an idle capsule waits for jobs without polling.

When every queue is empty, taker threads block on them with BLMOVE straight
into this process's in-progress list, each on a connection of its own
(``QueueTaker``), and run the job they take on their own thread. A taker holds a
free slot while it blocks (``Slots.reserved_by_queue``), so takers and the
dispatcher together never take more jobs than there are free slots; the one
exception, a queue's first taker watching even when other queues' takers
hold every free slot, gives back what it cannot run. Quiet, stop and
reconcile stop new takes and interrupt blocked ones with CLIENT UNBLOCK
(``Takers.recall``).

Why the taker runs the job rather than handing it to a processor thread:
the taker is already awake when the job lands, a processor is asleep, and on
a VM that wake-up is a large part of an idle worker's pickup latency (issue
#20, 200 jobs/s: p99 0.98-1.10 ms handed over, 0.81-0.95 ms run in place).
The job runs through the processors' own ``run`` step (the same
settling, time limits and event-loop hand-off); while it runs, the other
takers keep watching.

A blocking *peek* would not do: on a queue shared with Ruby Sidekiq, whose
idle threads wait in BRPOP, every arriving job would go to Ruby before
djwork's fetch could take it. Moving the job in the same command that
waits competes on equal terms.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator

from djwork.payload import StoredPayload
from djwork.redis.key_types import WrongTypeKey
from djwork.redis.outage import tracker as outage
from djwork.worker import key_guard as worker_key_guard
from djwork.worker.acks import AckBuffer
from djwork.worker.component import JOIN_TIMEOUT, safe_thread
from djwork.worker.fetch import Fetcher, UnitOfWork
from djwork.worker.queue_taker import QueueTaker, refused_take
from djwork.worker.slots import Slots

logger = logging.getLogger("djwork.worker")

FETCH_ERROR_PAUSE = 1.0
PAUSED_RECHECK = 2.0
RECALL_RETRY = 0.02


class Takers:
    """One capsule's taker threads: ceil(concurrency / queues) per queue, blocking while the dispatcher idles.

    Owns the threads, which takers are blocked (by connection id, for CLIENT
    UNBLOCK), the recall count, and two events: ``want_jobs`` (the dispatcher
    found the queues empty: watch them) and ``_quiet`` (pauses end at once).
    ``on_arrival`` wakes the dispatcher when a job lands or an error may hide one;
    ``run`` runs a taken job on the taker's thread and settles it (Manager.run_unit).
    """

    def __init__(self, fetcher: Fetcher, slots: Slots, acks: AckBuffer, run: Callable[[UnitOfWork], None],
                 on_arrival: Callable[[], None], fetch_timeout: float, socket_timeout: float) -> None:
        self.fetcher = fetcher
        self.run = run
        self.slots = slots
        self.condition = slots.condition
        self.acks = acks
        self.on_arrival = on_arrival
        self.fetch_timeout = fetch_timeout
        # How long a taker can stay in Redis: its block plus the socket timeout that outlasts it.
        self.bound = fetch_timeout + socket_timeout
        self.want_jobs = threading.Event()
        self._quiet = threading.Event()
        self.recalling = 0  # >0: takers must not block (reconcile or shutdown needs them out of Redis)
        self.blocked: dict[int, QueueTaker] = {}  # taker thread ident -> its taker, while blocked (CLIENT UNBLOCK)
        self.running: set[int] = set()  # taker thread idents running a job they took (never in Redis then)
        self.threads: list[threading.Thread] = []
        self._spawned = 0
        self._roles: dict[int, tuple[int, bool]] = {}  # taker thread ident -> (queue index, first of its queue)
        self._retired: set[int] = set()  # takers replaced while stuck in a job: they end when it returns

    def start(self, concurrency: int) -> None:
        queue_names = self.fetcher.queue_names
        per_queue = max(1, -(-concurrency // len(queue_names)))
        for index in range(1, len(queue_names) + 1):
            for number in range(per_queue):
                self._spawn(index, number == 0)

    def _spawn(self, queue_index: int, first: bool) -> None:
        self._spawned += 1
        self.threads.append(safe_thread(f"taker-{self.fetcher.queue_names[queue_index - 1]}-{self._spawned - 1}",
                                        lambda: self._take_loop(queue_index, first)))

    def replace(self, thread_ident: int) -> None:
        """A taker's job was abandoned at its hard time limit: a fresh taker watches its queue from now on
        (with -c 1 it was the only one), and the stuck one ends once its job returns."""
        role = self._roles.get(thread_ident)
        if role is None or self.slots.quieted:
            return
        self._retired.add(thread_ident)
        self._spawn(*role)

    def watch(self) -> None:
        """The queues ran dry: block on them."""
        self.want_jobs.set()

    def stand_down(self) -> None:
        """Jobs are coming in: let the dispatcher fetch them in batches, not the takers one by one."""
        self.want_jobs.clear()

    def quiet(self, name: str, first: bool) -> None:
        """No new takes; on the first call, recall the blocked takers. The slots' quiet flag is already set."""
        self._quiet.set()
        self.want_jobs.set()
        if first and self.threads:
            # On a thread of its own: the caller may be a signal handler's or the
            # heartbeat's, and a Redis outage must not hold either up.
            safe_thread(f"recall-{name}", lambda: self.recall(time.monotonic() + self.bound))

    def join(self) -> None:
        """Wait for every taker to end (after quiet); warn about one that won't."""
        deadline = time.monotonic() + self.bound + JOIN_TIMEOUT
        for thread in self.threads:
            # A taker running a job is not in Redis: its job is the drain's (finished, or requeued as
            # unfinished), so the stop does not wait for it as for one that may still take a job.
            while thread.is_alive() and not self.runs_a_job(thread.ident) and time.monotonic() < deadline:
                thread.join(min(RECALL_RETRY, max(0.0, deadline - time.monotonic())))
        if any(thread.is_alive() and not self.runs_a_job(thread.ident) for thread in self.threads):
            logger.warning("djwork: a queue taker did not stop in time; a job it takes late stays on the "
                           "in-progress list, where orphan recovery returns it")

    def runs_a_job(self, thread_ident: int | None) -> bool:
        """Whether that taker thread is running a job it took (a lock-free read of a set)."""
        return thread_ident in self.running

    @contextlib.contextmanager
    def held_back(self) -> Iterator[bool]:
        """No take starts inside the block; yields whether every blocked taker was recalled in time.

        For a reconcile: a take in flight would look exactly like a job the
        lost round trip moved.
        """
        with self.condition:
            self.recalling += 1
        try:
            yield self.recall(time.monotonic() + self.bound)
        finally:
            with self.condition:
                self.recalling -= 1
                self.condition.notify_all()

    def recall(self, deadline: float) -> bool:
        """Interrupt blocked takers until none holds a slot (callers stop new ones first); False at ``deadline``.

        CLIENT UNBLOCK ends a block as a timeout would. One sent before the
        taker's BLMOVE reached Redis does nothing, hence the loop.
        """
        while True:
            with self.condition:
                if self.slots.reserved <= 0:
                    return True
                if time.monotonic() >= deadline:
                    return False
                blocked = list(self.blocked.values())
            for taker in blocked:
                try:
                    taker.unblock()
                except Exception as error:
                    logger.debug("djwork: CLIENT UNBLOCK of the taker of %s failed: %s", taker.queue, error)
            with self.condition:
                if self.slots.reserved > 0:
                    self.condition.wait(min(RECALL_RETRY, max(0.0, deadline - time.monotonic())))

    # --- one taker thread ------------------------------------------------------------------
    def _take_loop(self, queue_index: int, first: bool) -> None:
        taker = (self.fetcher.taker_class or QueueTaker)(self.fetcher, queue_index)
        paused: bool | None = None  # unknown until asked
        me = threading.get_ident()
        self._roles[me] = (queue_index, first)
        try:
            while not self.slots.quieted and me not in self._retired:
                self.want_jobs.wait()
                if self.slots.quieted:
                    return
                try:
                    if paused is not False:
                        paused = self._check_paused(taker, recheck=paused is True)
                        continue
                    taker.connect()
                except Exception as error:
                    name = f"taker {taker.queue}"
                    if outage.failed(name, error):
                        logger.debug("djwork: queue %s: %s", taker.queue, error)
                    else:
                        logger.warning("djwork: queue %s: %s", taker.queue, error)
                    self._pause_quietly(max(FETCH_ERROR_PAUSE, outage.pause(name)))
                    continue
                if self._reserve(queue_index, first):
                    paused = self._take_one(taker)
        finally:
            self._roles.pop(me, None)
            taker.close()

    def _check_paused(self, taker: QueueTaker, recheck: bool) -> bool:
        # A taker blocked on a paused queue would take and give back every job
        # on it, forever: a paused queue is re-checked on a slow clock instead.
        if recheck:
            self._pause_quietly(PAUSED_RECHECK)
        return taker.is_paused()

    def _pause_quietly(self, seconds: float) -> None:
        # An event only quiet sets, not the busy condition: woken by every other
        # taker's notify, a pause after an error would turn into a retry loop
        # while Redis is down.
        self._quiet.wait(seconds)

    def _reserve(self, queue_index: int, first: bool) -> bool:
        """Hold a free slot for a take; False (after a bounded wait) when there is none to hold.

        A queue's first taker holds one whenever any slot is free and no other
        taker of its queue holds one, even if other queues' takers hold every
        free slot: else a busy queue could leave another unwatched, its jobs
        waiting for the dispatcher's next fetch. What it takes with no slot
        left, it gives back.
        """
        slots = self.slots
        with self.condition:
            if slots.quieted or not self.want_jobs.is_set():
                return False
            if not self.recalling and (slots.unclaimed > 0 or (
                    first and slots.free > 0 and not slots.reserved_by_queue[queue_index])):
                slots.reserve(queue_index)
                return True
            # No slot to hold: wait for a job to finish (bounded, to re-check
            # want_jobs), rather than spin.
            self.condition.wait(self.fetch_timeout)
            return False

    def _take_one(self, taker: QueueTaker) -> bool:
        """Block for one job on the taker's queue and run it, or give it back; returns whether the queue is paused."""
        me = threading.get_ident()
        slots = self.slots
        taken: str | None = None
        paused = False
        error: BaseException | None = None
        with self.condition:
            self.blocked[me] = taker
        isolated = False
        try:
            # Recovered jobs isolated after repeated crashes wait on their own list,
            # which the blocking take below doesn't watch (fetch.py, IsolationGate).
            taken = self.fetcher.take_isolated(taker.queue_index)
            isolated = taken is not None
            if not isolated:
                taken, paused = taker.take(self.fetch_timeout)
        except Exception as caught:
            error = caught
        unit: UnitOfWork | None = None
        with self.condition:
            self.blocked.pop(me, None)
            if taken is not None and not paused and not slots.quieted and slots.free > 0:
                unit = taker.unit(taken)
                unit.isolated = isolated
                slots.start_running((unit,), held=0)
            if taken is None or unit is not None:
                slots.unreserve(taker.queue_index)
            if error is not None and self.fetcher.reliable and not refused_take(error, taker):
                # The lost reply may hide a job already on our in-progress list.
                self.acks.reply_lost()
        if unit is not None:
            # More may have landed with it: let the dispatcher fetch in batches.
            self.stand_down()
            self.on_arrival()
        elif taken is not None:
            if isolated:
                self.fetcher.isolation.release()
            self._give_back(taker, taken, isolated)
        if isinstance(error, WrongTypeKey):
            self._repair(taker, error)
        elif error is not None:
            if outage.failed(f"taker {taker.queue}", error):
                logger.debug("djwork: waiting on queue %s failed: %s", taker.queue, error)
            else:
                logger.warning("djwork: waiting on queue %s failed: %s", taker.queue, error)
        elif taker.wrong_type_streak:
            taker.wrong_type_streak = False
            logger.info("djwork: waiting on queue %s works again", taker.queue)
        if error is None:
            outage.succeeded(f"taker {taker.queue}")
        else:
            self.on_arrival()
            self._pause_quietly(max(FETCH_ERROR_PAUSE, outage.pause(f"taker {taker.queue}")))
        if unit is not None:
            # Last, after the take's outcome is reported: a job run here may outlast the connection it
            # came on, and a success reported after it could end a Redis outage that began meanwhile.
            self._run_here(me, unit)
        return paused

    def _run_here(self, me: int, unit: UnitOfWork) -> None:
        self.running.add(me)
        try:
            self.run(unit)
        except Exception:
            # run() settles the job itself (its slot is freed in a finally); what escapes is a bug, logged
            # here so the taker keeps watching its queue instead of dying with it.
            logger.exception("djwork: a job run by the queue taker of %s raised out of its processor step",
                             unit.queue)
        finally:
            self.running.discard(me)

    def _repair(self, taker: QueueTaker, error: WrongTypeKey) -> None:
        """Have the key guard move the key aside; logged once per streak, not on every retry each second."""
        if not taker.wrong_type_streak:
            taker.wrong_type_streak = True
            logger.error("djwork: waiting on queue %s failed: %s; quarantining the key and retrying every %.0fs",
                         taker.queue, error, FETCH_ERROR_PAUSE)
        for key in error.keys or (taker.queue_key,):
            worker_key_guard.repair(key, error.expected.get(key))

    def _give_back(self, taker: QueueTaker, raw: StoredPayload, isolated: bool = False) -> None:
        # The slot stays held until the job is back on its queue: a reconcile
        # meanwhile would see it on our in-progress list and run it.
        try:
            taker.give_back(raw, isolated)
        except Exception as error:
            logger.warning("djwork: could not give back a job taken from %s (%s); reconciling", taker.queue, error)
            with self.condition:
                # Still on our in-progress list: reconciling adopts and runs it;
                # while stopping, the shutdown requeue returns it.
                self.acks.reply_lost()
        finally:
            with self.condition:
                self.slots.unreserve(taker.queue_index)
            self.on_arrival()
