"""HandOff (djwork/worker/handoff.py): few short jobs at once, long ones never in the way, clean close.

HandOff decides from three readings: the monotonic clock (is a job still
fresh, has one waited long enough to escalate, has a tuning window passed),
the process's CPU time (grow or shrink the limit) and whether the deciding
thread was kept waiting for a CPU (its run-queue wait, or where the kernel
gives none, the load average). Here a ``Clock`` stands in for the ``time``
module inside handoff.py and for the run-queue reading, and the load average
is pinned, so each test moves time, CPU use and waiting by hand; jobs
are gated by events the test releases. Nothing depends on how fast the
machine runs the threads: every assertion is made once the pool has
settled (each thread either runs a gated job or sleeps in get() with no
wake-up pending), when nothing can move until the test acts again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from djwork.worker import handoff as handoff_module
from djwork.worker.handoff import TUNE_WINDOW, HandOff
from tests.helpers_worker import wait_until

WAIT = 10.0  # a failure bound only: every wait below ends as soon as its event happens
# Comfortably past one tuning window, so float rounding in the clock cannot leave it a hair short.
WINDOW = 2 * TUNE_WINDOW


class Clock:
    """Stands in for the ``time`` module inside handoff.py: time and CPU use move only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.cpu = 0.0
        self.runqueue: float | None = None  # None: no run-queue figure, as on a kernel without one

    def runqueue_wait(self) -> float | None:
        return self.runqueue

    def monotonic(self) -> float:
        return self.now

    def process_time(self) -> float:
        return self.cpu

    def advance(self, seconds: float, cpu: float = 0.0) -> None:
        self.now += seconds
        self.cpu += cpu


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(handoff_module, "time", clock)
    monkeypatch.setattr(handoff_module, "runqueue_wait", clock.runqueue_wait)
    return clock


@pytest.fixture
def idle_machine(monkeypatch) -> Iterator[None]:
    # The load average, pinned: the suite's own processes (and CI neighbours) load the machine.
    monkeypatch.setattr(handoff_module, "machine_has_idle_cpu", lambda: True)
    yield


class Pool:
    """``threads`` processor threads; each job (a label) runs until the test finishes it, unless ``hold`` is off."""

    def __init__(self, handoff: HandOff[str], threads: int, hold: bool = True) -> None:
        self.handoff = handoff
        self.size = threads
        self.hold = hold
        self.closing = False
        self.lock = threading.Lock()
        self.gates: dict[str, threading.Event] = {}
        self.running: list[str] = []
        self.finished: list[str] = []
        self.most_at_once = 0
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(threads)]
        for thread in self.threads:
            thread.start()

    def _gate(self, label: str) -> threading.Event:
        with self.lock:
            gate = self.gates.setdefault(label, threading.Event())
            if self.closing:  # a job taken while the pool closes must not hold its thread
                gate.set()
            return gate

    def _loop(self) -> None:
        while (label := self.handoff.get()) is not None:
            with self.lock:
                self.running.append(label)
                self.most_at_once = max(self.most_at_once, len(self.running))
            if self.hold:
                self._gate(label).wait()
            with self.lock:
                self.running.remove(label)
                self.finished.append(label)

    def finish(self, label: str) -> None:
        """Let a running job end, and wait until its thread has left it (it is back in get() or on its next job)."""
        self._gate(label).set()
        wait_until(lambda: label in self.finished, WAIT, f"{label} to finish")

    def settled(self) -> list[str]:
        """Wait until every thread runs a job or sleeps in get() with no wake-up pending; the running jobs then.

        Past this point no thread can take a job until the test hands one over, finishes one, escalates
        or closes (HandOff's private counters are read because that state is exactly what is under test).
        """

        def quiet() -> bool:
            with self.lock:
                running = len(self.running)
            return self.handoff._woken == 0 and self.handoff._sleeping + running == self.size

        wait_until(quiet, WAIT, "the pool to settle")
        with self.lock:
            return sorted(self.running)

    def close(self) -> None:
        self.handoff.close()
        with self.lock:
            self.closing = True
            gates = list(self.gates.values())
        for gate in gates:
            gate.set()
        deadline = time.monotonic() + WAIT
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        assert not any(thread.is_alive() for thread in self.threads), "close() left threads asleep in get()"


@pytest.fixture
def pools() -> Iterator[list[Pool]]:
    started: list[Pool] = []
    yield started
    for pool in started:
        pool.close()


def start_pool(pools: list[Pool], handoff: HandOff[str], threads: int, hold: bool = True) -> Pool:
    pool = Pool(handoff, threads, hold)
    pools.append(pool)
    pool.settled()
    return pool


def test_only_hot_fresh_jobs_run_at_once_however_many_threads_sleep(clock, pools):
    handoff: HandOff[str] = HandOff(10, 2, escalate_after=1.0)
    pool = start_pool(pools, handoff, 10)
    for batch in range(5):
        labels = [f"b{batch}-{n}" for n in range(5)]
        handoff.put_many(labels)
        # A plain queue would wake a thread per job: five running. The limit wakes two.
        assert pool.settled() == sorted(labels[:2])
        assert handoff.waiting() == 3
        # A thread that finishes leaves the next job to itself: still two at once, never more.
        for done, label in enumerate(labels):
            pool.finish(label)
            assert len(pool.settled()) == min(2, len(labels) - done - 1)
    assert pool.most_at_once == 2
    assert len(pool.finished) == 25


def test_long_jobs_never_hold_short_ones_hostage(clock, pools):
    handoff: HandOff[str] = HandOff(6, 2, escalate_after=1.0)
    pool = start_pool(pools, handoff, 6)
    handoff.put_many(["long-1", "long-2"])
    assert pool.settled() == ["long-1", "long-2"]
    # Running for escalate_after makes a job long: it no longer counts against the limit.
    clock.advance(1.0)
    short = [f"short-{n}" for n in range(4)]
    handoff.put_many(short)
    assert pool.settled() == ["long-1", "long-2", "short-0", "short-1"]
    for label in short:
        pool.finish(label)
    assert pool.settled() == ["long-1", "long-2"]
    assert pool.finished == short


def test_a_job_kept_waiting_escalate_after_gets_a_thread_of_its_own(clock, pools):
    handoff: HandOff[str] = HandOff(4, 1, escalate_after=1.0)
    pool = start_pool(pools, handoff, 4)
    handoff.put_many(["first", "second"])
    assert pool.settled() == ["first"]
    assert handoff.escalation_due_in() == 1.0
    assert handoff.escalate() == 0  # not due yet: the fresh job may free its thread first

    clock.advance(0.5)
    assert handoff.escalation_due_in() == 0.5
    clock.advance(0.5)
    assert handoff.escalation_due_in() == 0.0
    assert handoff.escalate() == 1
    assert pool.settled() == ["first", "second"]
    assert handoff.escalation_due_in() is None  # nothing waits unattended


def test_jobs_waiting_without_a_dispatcher_still_start_once_a_thread_frees_up(clock, pools):
    # No escalate() is ever called: each thread that finishes must take the next job itself.
    handoff: HandOff[str] = HandOff(3, 1, escalate_after=1.0)
    pool = start_pool(pools, handoff, 3, hold=False)
    labels = [f"q{n}" for n in range(50)]
    handoff.put_many(labels)
    wait_until(lambda: len(pool.finished) == 50, WAIT, "every job")
    assert sorted(pool.finished) == sorted(labels)
    assert pool.most_at_once == 1


def test_close_releases_every_thread_and_drops_waiting_jobs(clock):
    handoff: HandOff[str] = HandOff(4, 2, escalate_after=1.0)
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(handoff.get()), daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    # Every thread asleep inside get(): close() itself must wake them.
    wait_until(lambda: handoff._sleeping == 4, WAIT, "four threads asleep in get()")
    handoff.close()
    for thread in threads:
        thread.join(WAIT)
    assert results == [None] * 4
    handoff.put("late")
    assert handoff.get() is None


@pytest.mark.parametrize(("machine_idle", "cpu_share", "turned_away", "grown"), [
    (True, 0.0, True, True),  # jobs waiting on I/O, more of them were waiting: grow
    (True, 0.8, True, False),  # the process is using most of a core already
    (False, 0.0, True, False),  # the machine is saturated: low CPU use means starved, not waiting
    (True, 0.0, False, False),  # the limit kept no job waiting: nothing to gain
])
def test_the_limit_grows_one_step_per_window_while_jobs_wait_on_io(clock, pools, monkeypatch, machine_idle,
                                                                   cpu_share, turned_away, grown):
    monkeypatch.setattr(handoff_module, "machine_has_idle_cpu", lambda: machine_idle)
    handoff: HandOff[str] = HandOff(8, 2, escalate_after=10.0)
    pool = start_pool(pools, handoff, 8)
    handoff.put_many(["a", "b", "c"] if turned_away else ["a", "b"])
    assert pool.settled() == ["a", "b"]
    clock.advance(WINDOW, cpu=WINDOW * cpu_share)
    pool.finish("a")  # its thread's next get() closes the window
    pool.settled()
    assert handoff.hot == (3 if grown else 2)
    if not grown:
        return
    assert pool.settled() == ["b", "c"]
    # The grown limit is used: a third job runs beside the two.
    handoff.put_many(["d", "e"])
    assert pool.settled() == ["b", "c", "d"]
    # One step per window: a get() inside the same window changes nothing, though a job was turned away.
    pool.finish("b")
    assert pool.settled() == ["c", "d", "e"]
    assert handoff.hot == 3


def test_a_busy_process_shrinks_the_limit_one_step_per_window(clock, idle_machine):
    # Every get() runs on the test's thread, and every job has waited past escalate_after by then: get()
    # returns it at once whatever the limit is, so a limit gone wrong shows in `hot`, never as a hang.
    handoff: HandOff[str] = HandOff(8, 2, escalate_after=WINDOW / 2)
    handoff.hot = 8
    handoff.put_many(["x", "y"])
    clock.advance(WINDOW, cpu=WINDOW)  # a full core busy for the window
    assert handoff.get() == "x"
    assert handoff.hot == 7
    assert handoff.get() == "y"  # the same window: no second step
    assert handoff.hot == 7
    for _window in range(10):
        handoff.put("z")
        clock.advance(WINDOW, cpu=WINDOW)
        assert handoff.get() == "z"
    assert handoff.hot == 2  # never below minimum_hot
    handoff.close()


def test_a_thread_kept_off_the_cpu_shrinks_the_limit_and_one_that_was_not_grows_it(clock, monkeypatch):
    # The load average would say "grow" throughout: only the run-queue reading can hold growth back.
    monkeypatch.setattr(handoff_module, "machine_has_idle_cpu", lambda: True)
    handoff: HandOff[str] = HandOff(8, 2, escalate_after=WINDOW / 2)
    handoff.hot = 4
    clock.runqueue = 0.0

    def window(waited_share: float) -> None:
        """One window at no CPU use with a job turned away (a process waiting on I/O, or a starved one)."""
        handoff.put("job")
        handoff._turned_away = True
        clock.advance(WINDOW)
        clock.runqueue += WINDOW * waited_share
        assert handoff.get() == "job"

    window(0.0)
    assert handoff.hot == 4  # this thread's first reading: no run-queue figure for the window yet
    window(0.5)
    assert handoff.hot == 3  # runnable half the window but not running: starved, not waiting on I/O
    window(0.5)
    assert handoff.hot == 2
    window(0.5)
    assert handoff.hot == 2  # never below minimum_hot
    window(0.0)
    assert handoff.hot == 3  # on a CPU whenever it wanted one, and jobs were turned away: grow
    handoff.close()
