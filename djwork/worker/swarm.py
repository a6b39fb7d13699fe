"""Swarm: ``runworkers --processes N`` — one parent forks N worker children and supervises them.

The parent sets Django up and imports the jobs once, then forks: children
share the loaded app copy-on-write. Each child is a full standalone worker
(``runner.run`` with its own Launcher: own identity, own signal handlers, own
Redis pools). The parent never runs jobs and never talks to Redis; it:

* respawns a child that dies, at once the first time and then with an
  exponential backoff while the slot keeps crashing young, so a crash loop
  (bad deploy, Redis refusing connections at import) doesn't spin a core;
* restarts a child whose RSS passed ``--max-memory`` gracefully (TERM, the
  child drains, then a fresh fork);
* forwards TSTP (quiet) and TTIN (thread dump) to every child, and on
  TERM/INT drains them all within TIMEOUT, SIGKILLing stragglers after
  ``SHUTDOWN_GRACE`` (their jobs then come back by orphan recovery);
* optionally serves ``/live`` (supervisor loop alive) and ``/ready`` (at least
  one child ready, as each child reports through a shared memory board).

Failure modes designed against:

* Nothing of the parent's Redis survives into a child: the parent drops its
  pools (``djwork.redis.reset()``) and Django's DB/cache connections before
  every fork, and the at-fork hook in djwork.redis forgets whatever is left
  in the child without closing it (closing would hang up the parent's socket).
* A child whose parent is gone stops by itself, and a terminal's Ctrl-C
  reaches the parent only (swarm_child.py says how).
* Signals are blocked across fork: a TERM sent to a child before it has its
  own handlers would otherwise run the parent's inherited handler and be lost.
* A failure half way through boot (fork refused at the process limit, port
  taken) drains the children already forked: no child outlives a dead boot.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from djwork import __version__
from djwork import redis as redis_layer
from djwork.settings.conf import Config
from djwork.worker.launcher import dump_threads
from djwork.worker.memory import rss_kb
from djwork.worker.probes import HealthServer, health_server
from djwork.worker.swarm_child import (
    RECYCLE_EXIT_CODE,
    REPORT_INTERVAL,
    SHUTDOWN_GRACE,
    Board,
    child_main,
    set_title,
)

logger = logging.getLogger("djwork.worker")

SUPERVISE_TICK = 0.5
KILL_REAP_WAIT = 3.0
STABLE_UPTIME = 30.0  # a child that lived this long and died is a new incident, not part of a crash loop
RESPAWN_BACKOFF_BASE = 1.0
RESPAWN_BACKOFF_CAP = 30.0
MEMORY_CHECK_INTERVAL = 5.0
READY_STALE = 3 * REPORT_INTERVAL
LIVE_STALL = 10.0

FORWARDED = ("TSTP", "TTIN")
PARENT_SIGNALS = ("TERM", "INT", "TSTP", "TTIN", "CHLD")
BLOCKED_ACROSS_FORK = [getattr(signal, f"SIG{name}") for name in PARENT_SIGNALS]

@dataclass
class Child:
    slot: int
    pid: int
    started: float
    kill_at: float | None = None  # SIGKILL deadline once we sent TERM
    reason: str = ""  # why we sent TERM: "memory" or "shutdown"


class Swarm:
    def __init__(self, config: Config, processes: int, *, max_memory_mb: int | None = None) -> None:
        self.config = config
        self.processes = max(1, processes)
        self.max_memory_kb = max_memory_mb * 1024 if max_memory_mb else None
        self.pid = os.getpid()
        self.board = Board(self.processes)
        self.children: dict[int, Child] = {}
        self.respawn_at: dict[int, float] = {}
        self.crashes = [0] * self.processes
        self.stopping = False
        self.quieted = False
        self.killed = 0
        self._lock = threading.Lock()  # children/respawn_at: mutated by the main loop, read by probes
        self._signals: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._tick_at = time.monotonic()
        self._memory_checked_at = 0.0
        self._drained = False
        self.health: HealthServer | None = health_server(config, self.live, self.ready)

    # --- the parent's main loop --------------------------------------------------------
    def run(self) -> int:
        """Supervise until TERM/INT, then drain; returns the exit code. Runs on the main thread.

        The main thread matters: PR_SET_PDEATHSIG fires when the *thread* that
        forked a child ends, so forks must come from the one that lives longest.
        """

        def on_signal(number: int, _frame: Any) -> None:
            if os.getpid() != self.pid:
                return  # a child between fork and its own handlers (signals are blocked there anyway)
            self._signals.put(signal.Signals(number).name[3:])

        previous = {name: signal.signal(getattr(signal, f"SIG{name}"), on_signal) for name in PARENT_SIGNALS}
        try:
            logger.info("djwork %s swarm starting: %d processes, concurrency %d each, timeout %.0fs%s",
                        __version__, self.processes, sum(c.concurrency for c in self.config.capsules),
                        self.config.timeout,
                        f", max memory {self.max_memory_kb // 1024} MB" if self.max_memory_kb else "")
            if self.health is not None:
                self.health.start()
            for slot in range(self.processes):
                self._spawn(slot)
            self._supervise_until_stopped()
            self._drain()
            return 0
        finally:
            # Every path, including a boot that raised half way: no forked child
            # is left without a drain, and the port never outlives the parent.
            try:
                self._drain()  # a no-op after the normal drain above
                if self.children:
                    self._kill_all()
            except BaseException:
                logger.exception("djwork swarm: drain after a failure failed")
                self._kill_all()
            finally:
                if self.health is not None:
                    try:
                        self.health.stop()
                    except Exception:
                        logger.exception("djwork swarm: closing the health server failed")
                for name, handler in previous.items():
                    try:
                        signal.signal(getattr(signal, f"SIG{name}"), handler)
                    except (TypeError, ValueError):
                        pass

    def _supervise_until_stopped(self) -> None:
        while True:
            self._tick_at = time.monotonic()
            try:
                name = self._signals.get(timeout=SUPERVISE_TICK)
            except queue.Empty:
                name = None
            if name in ("TERM", "INT"):
                logger.info("djwork swarm: received %s, stopping %d children (timeout %.0fs)", name,
                            len(self.children), self.config.timeout)
                return
            if name == "TSTP":
                logger.info("djwork swarm: received TSTP, quieting every child")
                self.quieted = True
                self._forward(signal.SIGTSTP)
            elif name == "TTIN":
                logger.warning("djwork swarm parent thread dump:\n%s", dump_threads())
                self._forward(signal.SIGTTIN)
            self._supervise()

    def _supervise(self) -> None:
        self._reap()
        now = time.monotonic()
        for slot, at in sorted(self.respawn_at.items()):
            if at <= now and not self.stopping:
                with self._lock:
                    self.respawn_at.pop(slot, None)
                self._spawn(slot)
        self._enforce_kill_deadlines(now)
        if self.max_memory_kb and now - self._memory_checked_at >= MEMORY_CHECK_INTERVAL:
            self._memory_checked_at = now
            self._check_memory(now)
        self._update_title()

    # --- children -------------------------------------------------------------------------
    def _spawn(self, slot: int) -> None:
        self.board.clear(slot)
        self._before_fork()
        signal.pthread_sigmask(signal.SIG_BLOCK, BLOCKED_ACROSS_FORK)
        try:
            pid = os.fork()
        except OSError as error:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, BLOCKED_ACROSS_FORK)
            logger.error("djwork swarm: fork for slot %d failed: %s", slot, error)
            self._schedule_respawn(slot, crashed=True)
            return
        if pid == 0:
            child_main(self.config, slot, self.pid, self.board, self.health)  # never returns
        signal.pthread_sigmask(signal.SIG_UNBLOCK, BLOCKED_ACROSS_FORK)
        with self._lock:
            self.children[pid] = Child(slot, pid, time.monotonic())
        logger.info("djwork swarm: started child %d in slot %d", pid, slot)

    def _before_fork(self) -> None:
        # Sockets shared across fork interleave two processes' commands on one
        # connection; each side must own its own. The parent doesn't use any
        # afterwards, so it simply closes them and lets the child dial afresh.
        redis_layer.reset()
        try:
            from django.core.cache import close_caches
            from django.db import connections

            connections.close_all()
            close_caches()
        except Exception:
            logger.exception("djwork swarm: closing Django connections before fork failed")

    def _reap(self) -> None:
        for pid in list(self.children):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0  # already reaped elsewhere; treat as gone
            if done == 0:
                continue
            with self._lock:
                child = self.children.pop(pid)
            self.board.clear(child.slot)
            code = os.waitstatus_to_exitcode(status) if status else 0
            self._on_exit(child, code)

    def _on_exit(self, child: Child, code: int) -> None:
        uptime = time.monotonic() - child.started
        described = f"signal {-code}" if code < 0 else f"code {code}"
        if self.stopping:
            logger.info("djwork swarm: child %d exited (%s)", child.pid, described)
            return
        if code == RECYCLE_EXIT_CODE:
            logger.info("djwork swarm: child %d in slot %d stopped to be replaced (a job past its time limit); "
                        "replacing it", child.pid, child.slot)
            self._schedule_respawn(child.slot, crashed=False)
            return
        if child.reason == "memory":
            logger.info("djwork swarm: child %d exited (%s) after its memory restart; replacing it",
                        child.pid, described)
            self._schedule_respawn(child.slot, crashed=False)
            return
        if code == 0:
            # A clean stop we didn't ask for (a dashboard "stop" on this child's
            # identity): replaced like any exit, but it is no crash to alarm on.
            logger.info("djwork swarm: child %d in slot %d stopped (code 0) after %.1fs; replacing it",
                        child.pid, child.slot, uptime)
        else:
            logger.warning("djwork swarm: child %d in slot %d died (%s) after %.1fs", child.pid, child.slot,
                           described, uptime)
        if uptime >= STABLE_UPTIME:
            self.crashes[child.slot] = 0
        self._schedule_respawn(child.slot, crashed=True)

    def _schedule_respawn(self, slot: int, *, crashed: bool) -> None:
        if self.quieted:
            # Quiet is the step before a stop: a fresh child would start fetching.
            logger.warning("djwork swarm: quiet, not replacing the child of slot %d", slot)
            return
        delay = 0.0
        if crashed:
            self.crashes[slot] += 1
            if self.crashes[slot] > 1:
                delay = min(RESPAWN_BACKOFF_CAP, RESPAWN_BACKOFF_BASE * 2 ** (self.crashes[slot] - 2))
                logger.warning("djwork swarm: slot %d crashed %d times in a row; respawning in %.0fs",
                               slot, self.crashes[slot], delay)
        with self._lock:
            self.respawn_at[slot] = time.monotonic() + delay

    def _check_memory(self, now: float) -> None:
        for child in list(self.children.values()):
            if child.reason:
                continue
            rss = rss_kb(child.pid)
            if self.max_memory_kb and rss > self.max_memory_kb:
                logger.warning("djwork swarm: child %d uses %d MB (limit %d MB); restarting it gracefully",
                               child.pid, rss // 1024, self.max_memory_kb // 1024)
                self._terminate(child, "memory", now)

    def _terminate(self, child: Child, reason: str, now: float) -> None:
        child.reason = reason
        child.kill_at = now + self.config.timeout + SHUTDOWN_GRACE
        self._kill(child.pid, signal.SIGTERM)

    def _enforce_kill_deadlines(self, now: float) -> None:
        for child in list(self.children.values()):
            if child.kill_at is not None and now >= child.kill_at:
                logger.warning("djwork swarm: child %d still running %.0fs past its drain; SIGKILL "
                               "(orphan recovery returns its jobs)", child.pid, SHUTDOWN_GRACE)
                child.kill_at = None
                self.killed += 1
                self._kill(child.pid, signal.SIGKILL)

    def _forward(self, number: int) -> None:
        for pid in list(self.children):
            self._kill(pid, number)

    @staticmethod
    def _kill(pid: int, number: int) -> None:
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass

    # --- shutdown ------------------------------------------------------------------------
    def _drain(self) -> None:
        """TERM every child, wait up to TIMEOUT + grace, SIGKILL the rest. Idempotent."""
        if self._drained:
            return
        self._drained = True
        self.stopping = True
        with self._lock:
            self.respawn_at.clear()
        now = time.monotonic()
        deadline = now + self.config.timeout + SHUTDOWN_GRACE
        for child in list(self.children.values()):
            if child.reason:
                # Already draining (a memory restart): a second TERM would mean "stop now".
                child.kill_at = min(child.kill_at or deadline, deadline)
            else:
                self._terminate(child, "shutdown", now)
        while self.children:
            self._tick_at = time.monotonic()
            self._reap()
            self._update_title()
            if not self.children:
                break
            self._enforce_kill_deadlines(time.monotonic())
            if time.monotonic() > deadline + KILL_REAP_WAIT:
                logger.error("djwork swarm: %d children did not exit even after SIGKILL: %s",
                             len(self.children), sorted(self.children))
                break
            try:
                name = self._signals.get(timeout=0.1)
            except queue.Empty:
                continue
            if name in ("TERM", "INT"):
                # A second TERM/INT: the children's second one too — stop now, requeueing.
                logger.info("djwork swarm: received %s again, telling children to stop now", name)
                self._forward(signal.SIGTERM)
            elif name in FORWARDED:
                self._forward(getattr(signal, f"SIG{name}"))
        logger.info("djwork swarm: stopped%s", f" ({self.killed} child(ren) killed)" if self.killed else "")

    def _kill_all(self) -> None:
        for pid in list(self.children):
            self._kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + KILL_REAP_WAIT
        while self.children and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.05)

    # --- probes and titles -----------------------------------------------------------------
    def live(self) -> tuple[bool, str]:
        stalled = time.monotonic() - self._tick_at
        if stalled > LIVE_STALL:
            return False, f"supervisor loop stalled for {stalled:.0f}s"
        return True, "draining" if self.stopping else "ok"

    def ready(self) -> tuple[bool, str]:
        if self.stopping:
            return False, "stopping"
        with self._lock:
            children = list(self.children.values())
        now = time.monotonic()
        ready = 0
        for child in children:
            pid, ready_at, _busy = self.board.read(child.slot)
            if pid == child.pid and ready_at and now - ready_at <= READY_STALE:
                ready += 1
        text = f"{ready} of {self.processes} children ready"
        return ready > 0, text

    def _update_title(self) -> None:
        busy = 0
        for child in list(self.children.values()):
            pid, _ready_at, child_busy = self.board.read(child.slot)
            if pid == child.pid:
                busy += child_busy
        state = " stopping" if self.stopping else " quiet" if self.quieted else ""
        tag = f" {self.config.tag}" if self.config.tag else ""
        set_title(f"djwork {__version__} swarm{tag} [{len(self.children)} of {self.processes} children, "
                  f"{busy} busy]{state}")

def run(config: Config, processes: int, *, max_memory_mb: int | None = None) -> int:
    return Swarm(config, processes, max_memory_mb=max_memory_mb).run()
