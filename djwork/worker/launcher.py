"""Launcher: one worker process's components, booted and torn down in one place.

Boot order: Lua scripts loaded, then the first heartbeat (a process must be
visibly alive before it holds work, or orphan recovery would take its jobs),
then history, heartbeat loop, key guard (its boot sweep moves a wrong-type
key aside while the managers start), managers, scheduled poller, reaper, leader, periodic ticker. A failure
half way rolls back what was started: the caller is about to drop its only
reference, and started threads and a presence in Redis would outlive it.

The Launcher builds every component and hands each the config plus the few
collaborators it uses (identity, work and run state, counters, a shutdown
callback); no component reaches back into the Launcher.

Teardown: quiet, drain every manager in parallel up to the deadline and
requeue what is left, then stop the periodic components and clear the
heartbeat. Every step is guarded on its own (shutdown_steps.py): one failing
release must never skip the ones after it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from djwork import limiter, signals
from djwork import redis as redis_layer
from djwork.redis import risks as redis_risks
from djwork.redis import scripts
from djwork.redis.outage import REMINDER_EVERY
from djwork.redis.outage import tracker as outage
from djwork.redis.url import public_location
from djwork.settings.conf import Config
from djwork.worker.component import JOIN_TIMEOUT, Sleeper, safe_thread
from djwork.worker.coroutines import Coroutines
from djwork.worker.execution import Executor
from djwork.worker.fetch import IsolationGate
from djwork.worker.heartbeat import Heartbeat
from djwork.worker.history import HistoryRecorder
from djwork.worker.installed_hooks import installed_hooks
from djwork.worker.key_guard import KeyGuard
from djwork.worker.leader import Leader
from djwork.worker.manager import Manager
from djwork.worker.metrics import ExecutionMetrics
from djwork.worker.mode import mode_for
from djwork.worker.probes import WorkerProbes, health_server
from djwork.worker.process import ProcessInfo, RunState, WorkState
from djwork.worker.queue_samples import QueueSampler
from djwork.worker.shutdown_steps import ShutdownSteps
from djwork.worker.time_limits import TimeLimitWatchdog
from djwork.worker.yielding import RequestGate

logger = logging.getLogger("djwork.worker")

BOOT_RETRY_INTERVAL = 1.0


def dump_threads() -> str:
    frames = sys._current_frames()
    parts = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        stack = "".join(traceback.format_stack(frame)) if frame else "  (no frame)\n"
        parts.append(f"Thread {thread.name} (daemon={thread.daemon}):\n{stack}")
    return "\n".join(parts)


class Launcher:
    def __init__(self, config: Config, *, embedded: bool = False,
                 deliver_signal: Callable[[str], None] | None = None) -> None:
        self.config = config
        redis_layer.use_config(config)
        self.embedded = embedded
        self.process = ProcessInfo.for_config(config, embedded=embedded)
        self.identity = self.process.identity
        self.deliver_signal = deliver_signal
        self.state = RunState()
        self.work = WorkState()
        self._lifecycle = threading.Lock()
        self._started = False
        self._stopped = False
        self.boot_sleeper = Sleeper()
        reliable = config.fetch == "reliable"
        # One gate for the whole process: "one isolated job at a time" is about what dies with it.
        isolation = IsolationGate(config.fetch_timeout)
        # One server or a cluster: which steps the worker runs, chosen here once (djwork/worker/mode.py).
        mode = mode_for(config)
        fetchers = [mode.fetcher(self.identity, capsule, reliable, isolation) for capsule in config.capsules]
        in_progress_keys = [key for fetcher in fetchers for key in fetcher.in_progress_keys] if reliable else []
        self.history = HistoryRecorder(self.identity, config.history_max_length)
        self.metrics = ExecutionMetrics() if config.metrics else None
        # Jobs' soft and hard time limits (docs/celery.md). A swarm child sets recycle_on_time_limit:
        # a job past its hard limit leaves a thread behind that only a new process gets rid of.
        self.time_limits = TimeLimitWatchdog()
        self.recycle_on_time_limit = False
        self.recycle_requested = False
        executor = Executor(config, self.identity, self.work, installed_hooks(
            config, self.identity, self.history, self.metrics, self.time_limits, self._after_time_out, self.state,
            embedded=embedded),
            file_failure=mode.file_failure)
        # One event loop thread for every capsule's coroutine jobs (docs/performance.md, I/O-bound jobs).
        self.coroutines = Coroutines()
        executor.coroutines_enabled = True
        # Embedded: the host's requests in flight, which the worker steps aside for (yielding.py).
        self.gate = RequestGate(config.embedded_yield, config.embedded_max_jobs_per_second) if embedded and (
            config.embedded_yield or config.embedded_max_jobs_per_second) else None
        self.managers = [
            Manager(capsule, fetcher, executor, self.request_shutdown,
                    fetch_timeout=config.fetch_timeout, socket_timeout=config.socket_timeout,
                    coroutines=self.coroutines, async_places=config.async_concurrency, gate=self.gate)
            for capsule, fetcher in zip(config.capsules, fetchers, strict=True)
        ]
        self.heartbeat = Heartbeat(config, self.process, self.state, self.work, self.take_counts, in_progress_keys,
                                   self.handle_remote_signal, self.metrics, quiet_now=self.quiet)
        self.poller = mode.poller(config)
        self.reaper = mode.reaper(config, in_progress_keys)
        self.key_guard = KeyGuard(config)
        # The leader lease, and the periodic entries the leader fires (docs/periodic.md).
        self.leader = Leader(config, self.identity)
        self.periodic = mode.periodic_ticker(config, self.leader, self.identity)
        self.queue_sampler = QueueSampler(config, self.leader)  # leader-only queue samples (docs/metrics.md)
        for fetcher in fetchers:
            # A fetch that met a wrong-type key skips its queue; the guard moves the key aside.
            fetcher.on_broken_key = lambda key, _error: self.key_guard.repair(key) is not None
        self.probes = WorkerProbes(config, self.heartbeat, self.state)
        # /live and /ready when HEALTH_PORT is set (a swarm child gets none: its parent serves them).
        self.health = health_server(config, self.probes.live, self.probes.ready)
        self.stopped_event = threading.Event()
        self._steps = ShutdownSteps()

    def take_counts(self) -> tuple[int, int, int]:
        """Jobs processed, failed and expired since the last call, across every capsule (the stat window)."""
        processed = failed = expired = 0
        for manager in self.managers:
            more_processed, more_failed, more_expired = manager.take_counts()
            processed += more_processed
            failed += more_failed
            expired += more_expired
        return processed, failed, expired

    @property
    def busy(self) -> int:
        return sum(manager.busy for manager in self.managers)

    # --- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        with self._lifecycle:
            # Not after a stop: an embedded host may stop us before its boot
            # thread got here, and a late boot would register a stopped process.
            if self._started or self._stopped:
                return
            self._started = True
        # Loops pause at most one heartbeat interval (and 30 s): a longer pause would leave Redis
        # back but this process's presence lapsing, its jobs eligible for orphan recovery.
        try:
            location = public_location(self.config)
        except Exception:  # a CACHE alias that can't be read: the check names it; the line names no URL
            location = "(the configured Redis)"
        outage.configure(location, max_pause=self.config.heartbeat_interval)
        try:
            self._boot()
        except BaseException:
            # Boot is not atomic: what started before the failure holds threads
            # and a presence in Redis, and the caller is about to drop its only
            # reference to us. Guarded: the caller must see the boot failure.
            try:
                self.stop(timeout=0)
            except Exception:
                logger.exception("djwork: rollback of a failed boot failed")
            raise

    def _boot(self) -> None:
        if self.health is not None:
            # First, so /live answers (and a taken port fails the boot) before
            # a Redis outage can hold us in _first_beat for good.
            self.health.start()
        self._first_beat()
        if not self.boot_sleeper.stopped:
            self._report_redis_risks()
        # Concurrent limiter slots are held in this process's name, so the reaper frees them
        # when it finds the process dead instead of waiting out each slot's lock_timeout.
        limiter.set_process_identity(self.identity)
        with self._lifecycle:
            # Under the lock stop() flips _stopped in: a stop racing this boot
            # (embedded boots on a thread of its own) either sees everything
            # below started, or nothing started at all — never a loop it missed.
            if self.boot_sleeper.stopped or self._stopped:
                return
            self._start_components()
        if signals.worker_ready.receivers:  # Celery's worker_ready: every component runs
            signals.send(signals.worker_ready, self)

    def _start_components(self) -> None:
        logger.info("djwork %s starting: identity=%s concurrency=%d queues=%s", self.process.version, self.identity,
                    self.process.concurrency, ",".join(self.process.queues))
        self.history.start()
        self.time_limits.start()
        self.heartbeat.start()
        self.key_guard.start()
        self.coroutines.start()
        for manager in self.managers:
            manager.start()
        self.poller.start()
        self.reaper.start()
        self.leader.start()
        self.periodic.start()
        self.queue_sampler.start()

    def _report_redis_risks(self) -> None:
        # An evicting or nearly full Redis loses jobs with no error to anyone: said once, at boot.
        try:
            risks = redis_layer.run(redis_risks.read, idempotent=True)
        except Exception as error:  # the check must never keep a worker from booting
            logger.info("djwork: could not read Redis's memory and persistence settings (%s)", error)
            return
        redis_risks.log_risks(risks, logger)

    def _first_beat(self) -> None:
        """Beat once before anything fetches, retrying while Redis is unreachable, until stopped."""
        said: tuple[str, float] | None = None  # the last failure logged at ERROR, and when
        while True:
            try:
                redis_layer.run(scripts.load_all, idempotent=True)
                self.heartbeat.beat()
                outage.succeeded("boot")
                return
            except Exception as error:
                # An unreachable Redis is the outage tracker's to say (once, then each minute): an ERROR
                # per retry wrote a line every 1.3 s for as long as Redis stayed down.
                in_outage = outage.failed("boot", error)
                what = f"{type(error).__name__}: {error}"
                now = time.monotonic()
                if said is None or (not in_outage and (what != said[0] or now - said[1] >= REMINDER_EVERY)):
                    logger.error("djwork: Redis unreachable at boot (%s); retrying", error)
                    said = (what, now)
                else:
                    logger.debug("djwork: Redis unreachable at boot (%s); retrying", error)
                if self.boot_sleeper.wait(max(BOOT_RETRY_INTERVAL, outage.pause("boot"))):
                    return

    def quiet(self) -> None:
        """Stop fetching new jobs; keep beating (reporting quiet=true) and finish running jobs."""
        if self.state.quieted:
            return
        self.state.quieted = True
        logger.info("djwork: quiet, no longer accepting new work (%s)", self.identity)
        for manager in self.managers:
            self._guarded("manager-quiet", manager.quiet)
        self._guarded("poller", self.poller.stop)
        # A process on its way out hands the lease over now, not when it lapses.
        self._guarded("periodic", self.periodic.stop)
        self._guarded("queue-sampler", self.queue_sampler.stop)
        self._guarded("leader", self.leader.stop)

    def hurry(self) -> None:
        """A second TERM/INT: end the drain now (running jobs are requeued)."""
        self.state.shutdown_deadline = time.monotonic()

    def stop(self, timeout: float | None = None) -> None:
        """Graceful shutdown; idempotent. Waits up to ``timeout`` (default TIMEOUT) for running jobs."""
        timeout = self.config.timeout if timeout is None else timeout
        with self._lifecycle:
            already = self._stopped
            self._stopped = True
        # Redis gone during the drain is said once, not once per step, loop and retry (shutdown_steps.py).
        outage.shutting_down()
        self._steps.begin()
        if already:
            # A stop is already draining on another thread (an embedded worker
            # stopped from the dashboard): returning now would let the host exit
            # under that drain, before it requeued its jobs. Bounded all the same.
            self.stopped_event.wait(timeout + JOIN_TIMEOUT)
            return
        self.state.shutdown_deadline = time.monotonic() + timeout
        self.boot_sleeper.stop()
        if self.gate is not None:
            self.gate.close()  # the drain runs at full speed: the deadline is the host's, not ours
        try:
            self.quiet()
            running = self.busy
            if running:
                # Between "quiet" and "stopped" a drain can take the whole TIMEOUT: without this line an
                # embedded worker's host looked hung for 20 s, saying nothing.
                logger.info("djwork: waiting for %d running job(s), up to %.0fs (%s)", running, timeout,
                            self.identity)
            stoppers = [
                threading.Thread(target=self._guarded, args=("manager-stop", manager.stop, self._deadline),
                                 name="djwork-manager-stop", daemon=True)
                for manager in self.managers
            ]
            for thread in stoppers:
                thread.start()
            for thread in stoppers:
                thread.join(timeout + JOIN_TIMEOUT + 5)
        finally:
            self._release_components()

    def _deadline(self) -> float:
        deadline = self.state.shutdown_deadline
        return deadline if deadline is not None else time.monotonic()

    def _release_components(self) -> None:
        try:
            self._guarded("periodic", self.periodic.stop)
            self._guarded("queue-sampler", self.queue_sampler.stop)
            self._guarded("leader", self.leader.stop)
            # After the managers: each cancelled its own coroutines at its deadline.
            self._guarded("coroutines", self.coroutines.stop)
            self._guarded("reaper", self.reaper.stop)
            self._guarded("key-guard", self.key_guard.stop)
            # Joined before clearing: a beat still in flight would SADD us back into
            # `processes` right after the SREM below.
            self._guarded("heartbeat", self.heartbeat.stop)
            self._guarded("stats", self.heartbeat.flush_stats)
            if self.heartbeat.beats:
                self._guarded("heartbeat-clear", self.heartbeat.clear)
            self._guarded("history", self.history.stop)
            self._guarded("time-limits", self.time_limits.stop)
            self._guarded("limiter-identity", limiter.clear_process_identity)
            if signals.worker_shutdown.receivers:
                signals.send(signals.worker_shutdown, self)
            self._steps.report()
            outage.disable()
            logger.info("djwork: stopped (%s)", self.identity)
        finally:
            # In a finally of its own, not just a guarded step: even an unwind
            # past the steps above (a second signal's exception) must close the
            # port, or the kubelet keeps probing a process that is gone.
            try:
                if self.health is not None:
                    self._guarded("health", self.health.stop)
            finally:
                self.stopped_event.set()

    def _guarded(self, label: str, step: Callable[..., Any], *args: Any) -> None:
        self._steps.run(label, step, *args)

    def _after_time_out(self) -> None:
        """A job past its hard time limit was filed; a swarm child then has itself replaced (swarm_child.py)."""
        if not self.recycle_on_time_limit or self.recycle_requested:
            return
        self.recycle_requested = True
        logger.warning("djwork: stopping this swarm child so a fresh one replaces it (a job's thread is stuck "
                       "past its time limit)")
        self.request_shutdown()

    # --- signals ------------------------------------------------------------------------
    def handle_remote_signal(self, name: str) -> None:
        """A signal from ``<identity>-signals`` (dashboard, Sidekiq API): exactly as the OS signal."""
        logger.info("djwork: received %s through %s-signals", name, self.identity)
        if name not in ("TERM", "TSTP", "TTIN", "INT"):
            logger.warning("djwork: no handler for signal %r from the signal list; ignoring", name)
            return
        if self.deliver_signal is not None:
            self.deliver_signal(name)
        elif name == "TSTP":
            self.quiet()
        elif name == "TTIN":
            logger.warning("djwork thread dump:\n%s", dump_threads())
        else:
            self.request_shutdown()

    def request_shutdown(self) -> None:
        """The one way anything inside the process asks for a graceful stop.

        Standalone hands off to the installed TERM handler, so the main thread
        runs the normal drain; embedded owns no handlers and stops in place, on
        a thread of its own (the caller may be one that stop joins).
        """
        if self.deliver_signal is not None:
            self.deliver_signal("TERM")
        else:
            safe_thread("stop", self.stop)


def deliver_to_self(name: str) -> None:
    os.kill(os.getpid(), getattr(signal, f"SIG{name}"))
