"""The time-limit watchdog: one thread that enforces every running job's ``soft_time_limit`` and ``time_limit``.

One thread for the whole process, not a timer per job: a ``threading.Timer``
is a thread each, started and joined per job. The watchdog keeps the
running jobs' deadlines and sleeps on a Condition until the earliest one.

At a soft limit it raises ``SoftTimeLimitExceeded`` in the job's thread with
``PyThreadState_SetAsyncExc``. Python delivers such an exception only when
that thread next runs bytecode: a job blocked in C (a socket read,
``time.sleep``, a C extension's loop) gets it when the call returns, and a
job may catch it (that is the point: cleanup). At a hard limit it first
claims the job (``Watch.expired``: whoever of the job's finish and the
watchdog comes first settles it, never both), raises ``TimeLimitExceeded``
in the thread the same way (a job still running Python unwinds), then calls
the job's ``on_hard`` callback, which files it as failed and frees its slot.

Async exceptions sent by the watchdog are sent and withdrawn under the
watchdog's lock: once a job's ``Watch`` is closed nothing more is sent, and a
pending one not yet delivered is cleared, so it can't surface later in the
worker's own code.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from djwork.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from djwork.worker.async_limits import is_coroutine_job, with_soft_limit
from djwork.worker.component import JOIN_TIMEOUT, safe_thread
from djwork.worker.run_hooks import JobRun, RunHook

if TYPE_CHECKING:
    from djwork.conf import Config

logger = logging.getLogger("djwork.worker")

# Prototypes of their own (not argtypes set on ctypes.pythonapi's shared function object, which
# other code may call differently): one passes the exception class, one NULL to withdraw it.
_set_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))
_clear_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))


def raise_in_thread(thread_id: int, error: type[BaseException] | None) -> bool:
    """Have ``error`` raised in the thread ``thread_id`` at its next bytecode (None withdraws a pending one)."""
    if error is None:
        return _clear_async_exc(thread_id, None) == 1
    return _set_async_exc(thread_id, error) == 1


def job_limits(payload: dict[str, Any], soft_default: float | None,
               hard_default: float | None) -> tuple[float | None, float | None]:
    """The (soft, hard) limits in seconds for one job: its payload's, else the settings' (None: no limit).

    A value that is not a positive number (a hand-written or foreign payload)
    reads as unset: the setting applies, never a limit of zero.
    """
    return _limit(payload.get("soft_time_limit"), soft_default), _limit(payload.get("time_limit"), hard_default)


def _limit(value: Any, default: float | None) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf"):
        return float(value)
    return default


class Watch:
    """One running job's deadlines; a context manager around the job's body (``TimeLimitWatchdog.watch``)."""

    def __init__(self, watchdog: TimeLimitWatchdog, thread_id: int, soft: float | None, hard: float | None,
                 on_hard: Callable[[], None]) -> None:
        now = time.monotonic()
        self.watchdog = watchdog
        self.thread_id = thread_id
        self.soft_at = now + soft if soft is not None else None
        self.hard_at = now + hard if hard is not None else None
        self.on_hard = on_hard
        self.sent = False  # an async exception was sent to the thread
        self.expired = False  # the hard limit claimed the job: its finish settles nothing
        self.closed = False

    def next_deadline(self) -> float | None:
        due = [at for at in (None if self.sent else self.soft_at, self.hard_at) if at is not None]
        return min(due) if due else None

    def __enter__(self) -> Watch:
        self.watchdog._add(self)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.watchdog._close(self)


class TimeLimitWatchdog:
    """The start()/stop() component holding every running job's ``Watch`` (component.py's lifecycle)."""

    name = "time-limits"

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._watches: set[Watch] = set()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def watch(self, soft: float | None, hard: float | None, on_hard: Callable[[], None]) -> Watch:
        """A ``Watch`` for the calling thread's job: ``with watchdog.watch(...) as watch: run()``."""
        return Watch(self, threading.get_ident(), soft, hard, on_hard)

    # --- lifecycle ------------------------------------------------------------
    def start(self) -> None:
        with self._condition:
            if self._thread is not None:
                return
            self._stopping = False
            self._thread = safe_thread(self.name, self._run)

    def stop(self, timeout: float = JOIN_TIMEOUT) -> None:
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
            thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        thread.join(timeout)
        if thread.is_alive():
            logger.warning("djwork %s did not stop within %.1fs", self.name, timeout)
            return
        with self._condition:
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # --- watches ----------------------------------------------------------------
    def _add(self, watch: Watch) -> None:
        with self._condition:
            self._watches.add(watch)
            self._condition.notify_all()

    def _close(self, watch: Watch) -> None:
        with self._condition:
            watch.closed = True
            self._watches.discard(watch)
            if watch.sent:
                # Sent but maybe not yet delivered (the job returned first): withdrawn, or it
                # would surface in the worker's own code after the job.
                raise_in_thread(watch.thread_id, None)

    def _run(self) -> None:
        while True:
            expired: list[Watch] = []
            with self._condition:
                if self._stopping:
                    return
                now = time.monotonic()
                earliest: float | None = None
                for watch in list(self._watches):
                    if watch.hard_at is not None and watch.hard_at <= now:
                        self._watches.discard(watch)
                        watch.expired = watch.sent = True
                        raise_in_thread(watch.thread_id, TimeLimitExceeded)
                        expired.append(watch)
                        continue
                    if not watch.sent and watch.soft_at is not None and watch.soft_at <= now:
                        watch.sent = True
                        raise_in_thread(watch.thread_id, SoftTimeLimitExceeded)
                    due = watch.next_deadline()
                    if due is not None and (earliest is None or due < earliest):
                        earliest = due
                if not expired:
                    self._condition.wait(None if earliest is None else max(0.0, earliest - now))
            for watch in expired:
                # Outside the lock: filing the job is a Redis round trip, and the other jobs'
                # finishes must not wait on it.
                try:
                    watch.on_hard()
                except Exception:
                    logger.exception("djwork: settling a job past its time limit failed")


class TimeLimits(RunHook):
    """A run's soft and hard limits (docs/celery.md, Time limits): its ``Watch`` around the body.

    At the hard limit the watchdog's thread files the job as failed (``Executor.abandon``) and frees
    its slot; the body's own late finish then settles nothing (``unit.timed_out``).
    """

    def __init__(self, config: Config, watchdog: TimeLimitWatchdog,
                 after_time_out: Callable[[], None] | None = None) -> None:
        self.soft_default, self.hard_default = config.soft_time_limit, config.time_limit
        self.watchdog = watchdog
        # What the process does once a job past its hard limit is filed (a swarm child has itself replaced).
        self.after_time_out = after_time_out
        self.executor: Any = None

    def attach(self, executor: Any) -> None:
        self.executor = executor

    def joins(self, target: Any, config: Config) -> bool | tuple[str, ...]:
        # Every run when a setting gives a default; else only the runs whose payload sets a limit.
        return self.soft_default is not None or self.hard_default is not None or ("time_limit", "soft_time_limit")

    def around(self, run: JobRun, call_next: Callable[[], Any]) -> Any:
        soft, hard = job_limits(run.payload, self.soft_default, self.hard_default)
        if soft is None and hard is None:
            return call_next()
        if soft is not None and is_coroutine_job(run.target):
            # A coroutine job's soft limit is its event loop's (async_limits.py), not an async exception.
            run.wrap_awaitable = lambda coroutine: with_soft_limit(coroutine, soft)
            soft = None
        thread = threading.get_ident()
        watch = self.watchdog.watch(soft, hard, lambda: self._time_out(run, hard, thread))
        try:
            with watch:
                return call_next()
        finally:
            if watch.expired:
                # Filed already, by the watchdog at the hard limit, and its slot given to another thread.
                run.unit.timed_out = True
                late = time.perf_counter() - run.clock - (hard or 0.0)
                logger.warning("djwork: job %s (%s) finished %.1fs after its time limit; it was already filed as "
                               "failed, nothing more is done", run.jid, run.class_name, late,
                               extra={"jid": run.jid, "job_class": run.class_name, "queue": run.unit.queue})

    def allows_loop(self, run: JobRun) -> bool:
        # A coroutine job with a hard limit runs on a thread, where the watchdog can abandon it.
        return job_limits(run.payload, None, self.hard_default)[1] is None

    async def around_async(self, run: JobRun, call_next: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        soft = job_limits(run.payload, self.soft_default, None)[0]
        return await (call_next() if soft is None else with_soft_limit(call_next(), soft))

    def _time_out(self, run: JobRun, limit: float | None, thread: int) -> None:
        """On the watchdog's thread, at the hard limit: file the job as failed and free its slot."""
        unit = run.unit
        unit.timed_out = True
        error = TimeLimitExceeded(f"{run.class_name} ran past its time_limit of {limit:g}s")
        logger.error("djwork: job %s (%s) exceeded its time limit of %gs; filing it as failed and abandoning its "
                     "thread", run.jid, run.class_name, limit, extra={"jid": run.jid, "job_class": run.class_name,
                                                                     "queue": unit.queue})
        try:
            self.executor.abandon(run, error)
        finally:
            # The slot is freed even if filing failed: the job then stays on the in-progress list, where the
            # shutdown requeue (or orphan recovery) finds it.
            if unit.on_time_out is not None:
                unit.on_time_out(unit, thread)
            if self.after_time_out is not None:
                self.after_time_out()
