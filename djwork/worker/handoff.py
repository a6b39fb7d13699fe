"""HandOff: fetched jobs wait here for a processor thread; only as many short jobs run at once as pay off.

Why not a plain queue that wakes a thread per job: under CPython's GIL, ten
threads each waiting on a short Redis reply spend more time passing the GIL
around than running jobs (``./dev bench thread_ceiling``: 2 threads doing
INCR reach twice the rate of 10, at a third of the CPU per call). So only
``hot`` *fresh* jobs — started less than ``escalate_after`` ago — run at
once: a job handed over wakes a sleeping processor only while fewer are
fresh, and a thread that finishes a job leaves the next one to the fresh
ones, and sleeps, while they keep up.

Why that never holds a job hostage: a job that has run for
``escalate_after`` is no longer fresh, so long jobs don't count against the
limit; and if a job waits that long anyway, ``escalate()`` wakes a thread
for every job still waiting.

Why ``hot`` adapts: short jobs that mostly wait on I/O (a remote database)
leave the GIL idle, and then more of them at once is faster. Every
``TUNE_WINDOW`` the process's CPU use decides: below ``GROW_BELOW`` of one
core while the limit turned jobs away, one more; above ``SHRINK_ABOVE``,
one fewer (never below ``minimum_hot``). Low CPU use only means an idle GIL
when the machine has a core to give: on a saturated machine (two workers
and Redis on two cores) the process is starved, not waiting, and more
threads would only contend — so it grows only while the thread deciding
spent less than ``STARVED_ABOVE`` of its time runnable but not running
(Linux's per-thread run-queue wait), and a starved process shrinks.
Why not the load average, as before: it trails by a minute, so a drain
started on a quiet machine grew to every thread within half a second and
stayed there (``--processes 2`` ran ten threads per process at 1.5 times
the CPU per job of one hot thread). Where the kernel gives no run-queue
figure, the load average is still the fallback.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from typing import Generic, TypeVar

Item = TypeVar("Item")

TUNE_WINDOW = 0.05
GROW_BELOW = 0.75
SHRINK_ABOVE = 0.9
STARVED_ABOVE = 0.1


def runqueue_wait() -> float | None:
    """Seconds the calling thread has spent runnable but not running (Linux), None where the kernel doesn't say."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as stats:
            return int(stats.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def machine_has_idle_cpu() -> bool:
    try:
        return os.getloadavg()[0] < (os.cpu_count() or 1)
    except OSError:  # pragma: no cover - no load average on this platform
        return True


class HandOff(Generic[Item]):
    def __init__(self, threads: int, minimum_hot: int, escalate_after: float) -> None:
        self.threads = threads
        self.minimum_hot = min(minimum_hot, threads)
        self.hot = self.minimum_hot
        self.escalate_after = escalate_after
        self._ready = threading.Condition(threading.Lock())
        self._items: collections.deque[tuple[Item, float]] = collections.deque()
        self._sleeping = 0  # threads waiting in get()
        self._woken = 0  # of those, notified but not yet running: fresh for the count, or we'd wake twice
        self._started: dict[int, float] = {}  # thread ident -> when its current job started
        self._closed = False
        self._window_began = time.monotonic()
        self._window_cpu = time.process_time()
        self._turned_away = False
        self._waits: dict[int, tuple[float, float]] = {}  # thread ident -> (its run-queue wait, when read)

    def put_many(self, items: list[Item]) -> None:
        if not items:
            return
        now = time.monotonic()
        with self._ready:
            self._items.extend((item, now) for item in items)
            wanted = min(len(self._items), self._sleeping - self._woken)
            if self._wake(min(wanted, self.hot - self._fresh(now) - self._woken)) < wanted:
                self._turned_away = True

    def put(self, item: Item) -> None:
        self.put_many([item])

    def waiting(self) -> int:
        """Jobs handed over and not yet taken (a lock-free read: a hint, not a promise)."""
        return len(self._items)

    def refill_coming(self) -> bool:
        """A job waits, or a fresh one runs: a processor will be back for more within ``escalate_after``."""
        with self._ready:
            return bool(self._items) or self._fresh(time.monotonic()) > 0

    def get(self) -> Item | None:
        """The next job, or None once closed (jobs still waiting then were requeued by the shutdown)."""
        me = threading.get_ident()
        with self._ready:
            self._started.pop(me, None)  # the job this thread ran (if any) is done
            now = time.monotonic()
            if now - self._window_began >= TUNE_WINDOW:
                self._tune(now)
            while not self._closed and (not self._items or self._yield(now)):
                self._sleeping += 1
                try:
                    self._ready.wait()
                finally:
                    self._sleeping -= 1
                    if self._woken:
                        self._woken -= 1
                now = time.monotonic()
            if self._closed:
                return None
            item, _queued_at = self._items.popleft()
            self._started[me] = now
            return item

    def escalation_due_in(self) -> float | None:
        """Seconds until escalate() has work to do, or None while it has none (nothing waits unattended)."""
        with self._ready:
            if len(self._items) <= self._woken or self._sleeping <= self._woken:
                return None
            return max(0.0, self.escalate_after - (time.monotonic() - self._items[0][1]))

    def escalate(self) -> int:
        """Wake a thread for every job that has waited ``escalate_after`` or longer; returns how many woke."""
        with self._ready:
            if not self._items or time.monotonic() - self._items[0][1] < self.escalate_after:
                return 0
            self._turned_away = True  # the limit kept a job waiting this long
            return self._wake(len(self._items) - self._woken)

    def close(self) -> None:
        """Every get() returns None from now on; jobs still waiting are dropped (the caller requeued them)."""
        with self._ready:
            self._closed = True
            self._items.clear()
            self._ready.notify_all()

    # --- under the lock -----------------------------------------------------------
    def _fresh(self, now: float) -> int:
        """Jobs started less than ``escalate_after`` ago, counted up to ``hot`` (all any caller needs)."""
        cutoff = now - self.escalate_after
        count = 0
        for started in self._started.values():
            if started > cutoff:
                count += 1
                if count >= self.hot:
                    break
        return count

    def _yield(self, now: float) -> bool:
        """Leave the waiting jobs to the fresh ones: they keep up, and one more thread would only contend."""
        if now - self._items[0][1] >= self.escalate_after:
            return False
        if self._fresh(now) + self._woken < self.hot:
            return False
        self._turned_away = True
        return True

    def _tune(self, now: float) -> None:
        cpu = time.process_time()
        busy = (cpu - self._window_cpu) / (now - self._window_began)
        starved = self._starved(now)
        if starved is None:
            pass  # this thread's first reading: the window has no run-queue figure to decide by
        elif busy < GROW_BELOW and self._turned_away and not starved:
            self.hot = min(self.threads, self.hot + 1)
        elif busy > SHRINK_ABOVE or starved:
            self.hot = max(self.minimum_hot, self.hot - 1)
        self._window_began, self._window_cpu, self._turned_away = now, cpu, False

    def _starved(self, now: float) -> bool | None:
        """Was the calling thread kept off a CPU it wanted since its last reading? None at its first one."""
        wait = runqueue_wait()
        if wait is None:
            return not machine_has_idle_cpu()
        me = threading.get_ident()
        last = self._waits.get(me)
        self._waits[me] = (wait, now)
        if last is None or now <= last[1]:
            return None
        return (wait - last[0]) / (now - last[1]) > STARVED_ABOVE

    def _wake(self, count: int) -> int:
        count = max(0, min(count, self._sleeping - self._woken))
        if count:
            self._woken += count
            self._ready.notify(count)
        return count
