"""Executing one fetched job: parse, resolve, middleware, execute, then settle it in Redis.

The ``Executor`` is shared by every processor thread (the threads
themselves, and their lifecycle, are the Manager's).

Bad data never wedges a worker: a payload that isn't a JSON job, or names a
class nobody registered, goes to `dead` with its raw text and a clear error,
so one bad push can't stop a queue; nothing here lets an exception escape
to the processor thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections
from django.db.backends.signals import connection_created

from djwork import dead, job_locks, keys
from djwork import redis as redis_layer
from djwork.batches import runtime as batch_runtime
from djwork.cron.locks import retake
from djwork.exceptions import TimeLimitExceeded
from djwork.jobs import Job, Request, UnknownJobClass, resolve
from djwork.key_guard import quarantine_culprits
from djwork.key_types import WrongTypeKey
from djwork.limiter import OverLimit
from djwork.middleware import build_server_chain, resolve_all
from djwork.payload import PayloadError, loads
from djwork.tasks_compat import Task
from djwork.worker import task_results
from djwork.worker.async_limits import is_coroutine_job, with_soft_limit
from djwork.worker.failure_log import log_failure
from djwork.worker.limits import count_rescheduled, reschedule_call, reschedule_cap, rescheduled_payload, run_within
from djwork.worker.retry import Decision, decide
from djwork.worker.time_limits import TimeLimitWatchdog, Watch, job_limits

if TYPE_CHECKING:
    from djwork.conf import Config
    from djwork.worker.acks import AckBuffer
    from djwork.worker.fetch import UnitOfWork
    from djwork.worker.history import HistoryRecorder
    from djwork.worker.metrics import ExecutionMetrics
    from djwork.worker.process import WorkState

logger = logging.getLogger("djwork")


_database_use = threading.local()


def _note_database_use(sender: Any, connection: Any, **kwargs: Any) -> None:
    _database_use.seen = True


connection_created.connect(_note_database_use, dispatch_uid="djwork.worker.execution.database-use")


def close_stale_connections() -> None:
    """close_old_connections(), skipped in threads that never opened a database connection.

    Django's connections are per thread, so a thread that never opened one
    has nothing to close; skipping saves the lookups on every job that never
    touches the database.
    """
    if getattr(_database_use, "seen", False):
        close_old_connections()


class Executor:
    """Shared by every processor thread of a Launcher; per-thread state lives in ``_local``."""

    def __init__(self, config: Config, identity: str, history: HistoryRecorder, work: WorkState,
                 metrics: ExecutionMetrics | None = None, watchdog: TimeLimitWatchdog | None = None,
                 after_time_out: Callable[[], None] | None = None) -> None:
        self.config = config
        # Time limits (time_limits.py); after_time_out: what the process does once a job past its
        # hard limit is filed (a swarm child has itself replaced).
        self.watchdog = watchdog
        self.after_time_out = after_time_out
        self._default_limits = config.soft_time_limit is not None or config.time_limit is not None
        self.metrics = metrics  # per-class execution metrics (docs/metrics.md); None when METRICS is off
        self.identity = identity
        self.history = history
        self.work = work
        self.server_chain = resolve_all(self.config.server_middleware)
        self._local = threading.local()
        self._resolved: dict[str, Job | Task | None] = {}

    # --- resolution -------------------------------------------------------------
    def resolve(self, class_name: str) -> Job | Task | None:
        # Cached per class name: resolution (alias, registry, import) runs once,
        # not per job, and only from here on down the hot path.
        if class_name in self._resolved:
            return self._resolved[class_name]
        found: Job | Task | None = resolve(class_name)
        if found is None:
            from django.utils.module_loading import import_string

            target = self.config.aliases.get(class_name, class_name)
            try:
                candidate = import_string(target)
            except ImportError:
                candidate = None
            found = candidate if isinstance(candidate, Task) else None
        self._resolved[class_name] = found
        return found

    # --- the job ------------------------------------------------------------------
    def __call__(self, unit: UnitOfWork, acks: AckBuffer) -> None:
        try:
            self._run(unit, acks)
        except Exception:
            # A bug in settling must not kill the processor; the job stays on
            # the in-progress list and orphan recovery hands it back later.
            logger.exception("djwork: internal error while processing a job from %s", unit.queue)

    def _run(self, unit: UnitOfWork, acks: AckBuffer) -> None:
        try:
            payload = loads(unit.raw)
        except PayloadError as error:
            self._bury_invalid(unit, acks, str(error))
            return
        jid = payload.get("jid") if isinstance(payload.get("jid"), str) else ""
        class_name = payload["class"]
        locks = job_locks.locks_of(payload)
        if locks:
            # Released with the ack (or the dead/drop filing) in the same step; a job that
            # asked for it gives them up as it starts, so a duplicate can be queued while it runs.
            unit.locks = job_locks.encode(locks)
            if payload.get("unique_until") == "start":
                try:
                    redis_layer.run(lambda conn: job_locks.release(conn, locks, jid), idempotent=True)
                    unit.locks = job_locks.encode([tie for tie in locks if job_locks.is_batch(tie)])
                except Exception as error:  # kept for the ack to release: later, never lost
                    logger.warning("djwork: releasing the locks of job %s at its start failed: %s", jid, error)
        expires_at = payload.get("expires_at")
        if isinstance(expires_at, (int, float)) and expires_at < time.time():
            logger.info("djwork: dropping expired job jid=%s class=%s (expired %.1fs ago)",
                        jid, class_name, time.time() - expires_at, extra={"jid": jid, "job_class": class_name})
            unit.acknowledge(jid)
            unit.expired = 1
            self.history.record(jid, class_name, unit.queue, "expired", time.time(), 0.0)
            return
        if "bid" in payload and batch_runtime.invalidated(payload):  # its batch was stopped (docs/batches.md)
            unit.acknowledge(jid)
            self.history.record(jid, class_name, unit.queue, "invalidated", time.time(), 0.0)
            return
        target = self.resolve(class_name)
        if target is None:
            error = UnknownJobClass(
                f"no djwork job, Django task or alias named {class_name!r} is registered in this process"
            )
            # Logged at ERROR whatever LOG_JOBS says: a deploy that dropped or renamed a job
            # otherwise fills `dead` (or `retry`) without one line saying why.
            logger.error("djwork: unknown job class %r (jid=%s, queue %s); %s", class_name, jid, unit.queue,
                         "sent to dead" if self.config.unknown_class == "dead" else "retrying (UNKNOWN_CLASS=retry)",
                         extra={"jid": jid, "job_class": class_name, "queue": unit.queue})
            self._handle_failure(unit, acks, payload, error, None, time.time(), 0.0, unknown=True)
            return
        self._execute(unit, acks, payload, target, jid)

    def _execute(self, unit: UnitOfWork, acks: AckBuffer, payload: dict[str, Any],
                 target: Job | Task, jid: str) -> None:
        log_jobs = self.config.log_jobs and logger.isEnabledFor(logging.INFO)
        class_name = payload["class"]
        started = time.time()
        tid = self.work.begin(unit.queue, unit.raw, int(started))
        if log_jobs:
            logger.info("start jid=%s class=%s", jid, class_name,
                        extra={"jid": jid, "job_class": class_name, "queue": unit.queue, "event": "start"})
        clock = time.perf_counter()
        error: BaseException | None = None
        running = None
        watch: Watch | None = None
        soft = hard = None
        if self._default_limits or "time_limit" in payload or "soft_time_limit" in payload:  # cheap when unused
            soft, hard = job_limits(payload, self.config.soft_time_limit, self.config.time_limit)
        try:
            close_stale_connections()
            running = batch_runtime.enter(payload)  # a batch this job opens is a child of its own
            if self.watchdog is None or (soft is None and hard is None):
                result = self._invoke(payload, target, unit.queue, jid)
            else:
                thread = threading.get_ident()
                # A coroutine job's soft limit is its event loop's (async_limits.py), not an async exception.
                self._local.soft_limit = soft if is_coroutine_job(target) else None
                with self.watchdog.watch(None if self._local.soft_limit else soft, hard, lambda: self._time_out(
                        unit, acks, payload, target, started, clock, tid, hard, thread)) as watch:
                    result = self._invoke(payload, target, unit.queue, jid)
        except BaseException as caught:
            # SystemExit/KeyboardInterrupt too: on a processor thread only the job
            # raises them (signals go to the main thread), and re-raised they
            # killed the thread and left the job on the in-progress list for good.
            error = caught
            result = None
        finally:
            try:
                close_stale_connections()
            except Exception:
                logger.exception("djwork: close_old_connections failed after a job")
            self.work.end(tid)
            self._local.soft_limit = None  # a coroutine job's limit that was not consumed must not outlive it
            if running is not None:
                batch_runtime.leave(running)
        elapsed_ms = (time.perf_counter() - clock) * 1000
        if watch is not None and watch.expired:
            # Filed already, by the watchdog at the hard limit, and its slot given to another thread:
            # this late finish must neither ack, nor file, nor count the job a second time.
            unit.timed_out = True
            logger.warning("djwork: job %s (%s) finished %.1fs after its time limit; it was already filed as "
                           "failed, nothing more is done", jid, class_name, elapsed_ms / 1000 - (hard or 0.0),
                           extra={"jid": jid, "job_class": class_name, "queue": unit.queue})
            return
        if error is None:
            unit.processed = 1
            if "bid" in payload:  # before the ack, which may fire the batch's success with every result
                batch_runtime.keep_result(payload, result)
            unit.acknowledge(jid)
            self.history.record(jid, class_name, unit.queue, "ok", started, elapsed_ms)
            if self.metrics is not None:
                self.metrics.record(payload.get("wrapped") or class_name, elapsed_ms, False)
            if isinstance(target, Task) or payload.get("djwork_task"):
                task_results.finished(jid, self.identity, result=result)
            if log_jobs:
                logger.info("done jid=%s class=%s elapsed=%.1fms", jid, class_name, elapsed_ms,
                            extra={"jid": jid, "job_class": class_name, "queue": unit.queue,
                                   "elapsed_ms": elapsed_ms, "event": "done"})
            return
        if isinstance(error, OverLimit) and self._reschedule(unit, acks, payload, error, target, started,
                                                             elapsed_ms):
            return
        if self.metrics is not None:
            self.metrics.record(payload.get("wrapped") or class_name, elapsed_ms, True)
        if isinstance(target, Task) or payload.get("djwork_task"):
            task_results.finished(jid, self.identity, error=error)
        self._handle_failure(unit, acks, payload, error, target if isinstance(target, Job) else None,
                             started, elapsed_ms)

    def _time_out(self, unit: UnitOfWork, acks: AckBuffer, payload: dict[str, Any], target: Job | Task,
                  started: float, clock: float, tid: str, limit: float | None, thread: int) -> None:
        """On the watchdog's thread, at the hard limit: file the job as failed and free its slot."""
        unit.timed_out = True
        self.work.end(tid)
        jid, class_name = payload.get("jid") or "", payload["class"]
        elapsed_ms = (time.perf_counter() - clock) * 1000
        error = TimeLimitExceeded(f"{class_name} ran past its time_limit of {limit:g}s")
        logger.error("djwork: job %s (%s) exceeded its time limit of %gs; filing it as failed and abandoning its "
                     "thread", jid, class_name, limit, extra={"jid": jid, "job_class": class_name,
                                                             "queue": unit.queue})
        try:
            if self.metrics is not None:
                self.metrics.record(payload.get("wrapped") or class_name, elapsed_ms, True)
            if isinstance(target, Task) or payload.get("djwork_task"):
                task_results.finished(jid, self.identity, error=error)
            self._handle_failure(unit, acks, payload, error, target if isinstance(target, Job) else None,
                                 started, elapsed_ms)
        finally:
            # The slot is freed even if filing failed: the job then stays on the in-progress list, where the
            # shutdown requeue (or orphan recovery) finds it.
            if unit.on_time_out is not None:
                unit.on_time_out(unit, thread)
            if self.after_time_out is not None:
                self.after_time_out()

    def _invoke(self, payload: dict[str, Any], target: Job | Task, queue: str, jid: str) -> Any:
        args = payload.get("args") or []
        kwargs = payload.get("kwargs") or {}
        if not isinstance(kwargs, dict):
            kwargs = {}
        if isinstance(target, Task):
            def execute() -> Any:
                task_result = task_results.started(jid, self.identity, target, args, kwargs)
                if target.takes_context:
                    from djwork.tasks_compat import TaskContext

                    return self._maybe_await(target.func(TaskContext(task_result=task_result), *args, **kwargs))
                return self._maybe_await(target.func(*args, **kwargs))
        else:
            retry_count = payload.get("retry_count")
            request = Request(
                id=jid, retries=(retry_count + 1) if isinstance(retry_count, int) else 0,
                queue=queue, args=list(args), kwargs=dict(kwargs), payload=payload,
            )

            def execute() -> Any:
                return self._maybe_await(target.run(request))
        run = execute
        if self.server_chain:
            run = build_server_chain(self.server_chain, execute, target, payload, queue)
        limits = getattr(target, "limits", ())
        if limits:
            # Outside the middleware: a wait for a slot must not sit inside a transaction
            # or a span a middleware opened.
            return run_within(limits, jid, run)
        return run()

    def _maybe_await(self, value: Any) -> Any:
        if not asyncio.iscoroutine(value):
            return value
        loop = getattr(self._local, "loop", None)
        if loop is None or loop.is_closed():
            # One event loop per processor thread, kept for its life: creating
            # a loop per job costs more than most jobs.
            loop = asyncio.new_event_loop()
            self._local.loop = loop
        soft_limit, self._local.soft_limit = getattr(self._local, "soft_limit", None), None
        return loop.run_until_complete(value if soft_limit is None else with_soft_limit(value, soft_limit))

    # --- a limiter said no ---------------------------------------------------------
    def _reschedule(self, unit: UnitOfWork, acks: AckBuffer, payload: dict[str, Any], error: OverLimit,
                    target: Job | Task, started: float, elapsed_ms: float) -> bool:
        """Back to `schedule` at the limiter's retry_after (limits.py); False once the cap is spent."""
        cap = reschedule_cap(error, getattr(target, "limits", ()), self.config)
        decided = rescheduled_payload(payload, error, cap)
        jid = payload.get("jid") if isinstance(payload.get("jid"), str) else ""
        if decided is None:
            logger.warning("djwork: job %s was refused by limiter %s %d times; taking the retry path", jid,
                           error.name, cap)
            return False
        new_payload, score = decided
        self.history.record(jid, payload["class"], unit.queue, "rescheduled", started, elapsed_ms,
                            "djwork.limiter.OverLimit", str(error))
        if self.metrics is not None:  # a run a limiter sent back is no failure (docs/metrics.md)
            self.metrics.record(payload.get("wrapped") or payload["class"], elapsed_ms, False)
        if self.config.log_jobs:
            logger.info("rescheduled jid=%s class=%s limiter=%s in=%.3fs overrated=%d", jid, payload["class"],
                        error.name, score - time.time(), new_payload["overrated"],
                        extra={"jid": jid, "job_class": payload["class"], "queue": unit.queue,
                               "event": "rescheduled"})
        if acks.abandoned:
            return True  # pushed back at the shutdown deadline already
        call = reschedule_call(unit.in_progress_key or keys.queue(unit.queue), unit.raw, new_payload, score, jid,
                               bool(unit.in_progress_key))
        redis_layer.run(call.evaluate, idempotent=True)
        count_rescheduled(error.name)
        return True

    # --- failure --------------------------------------------------------------------
    def _handle_failure(self, unit: UnitOfWork, acks: AckBuffer, payload: dict[str, Any],
                        error: BaseException, job: Job | None, started: float, elapsed_ms: float,
                        unknown: bool = False) -> None:
        unit.processed = unit.failed = 1
        if unknown and self.config.unknown_class == "dead":
            decision = decide({**payload, "retry": 0}, error, None, unit.queue, self.config.max_retries)
            decision = Decision("dead", decision.payload, decision.score)
        else:
            decision = decide(payload, error, job, unit.queue, self.config.max_retries)
        status = {"retry": "retry", "dead": "dead", "drop": "failed"}[decision.target]
        if not unknown:  # an unknown class has its own ERROR line already
            log_failure(logger, payload.get("jid", ""), payload["class"], unit.queue, error, status, elapsed_ms)
        self.history.record(payload.get("jid", ""), payload["class"], unit.queue, status, started,
                            elapsed_ms, decision.payload.get("error_class", ""),
                            decision.payload.get("error_message", ""))
        if acks.abandoned:
            return
        self._file(unit, decision, payload.get("jid") or "")

    def _file(self, unit: UnitOfWork, decision: Decision, jid: str) -> None:
        call = dead.file_failure(unit.in_progress_key or keys.queue(unit.queue), unit.raw, decision.target,
                                 decision.payload, decision.score, jid,
                                 from_in_progress=bool(unit.in_progress_key), config=self.config,
                                 locks=unit.locks)
        try:
            redis_layer.run(call.evaluate, idempotent=True)
        except WrongTypeKey as error:
            # `retry` or `dead` holding a STRING failed this filing every time, and the job stayed
            # in progress until the worker stopped: move the named key aside, then file once more.
            if not quarantine_culprits(error):
                raise
            redis_layer.run(call.evaluate, idempotent=True)
        if decision.target == "retry" and "djwork_periodic" in decision.payload:
            # A no-overlap entry's running lock must outlive the wait for the retry (25 retries
            # outlast its default 24 h TTL): extended past the retry's time, never dropped.
            try:
                retake([decision.payload], extra_ms=int(max(0.0, decision.score - time.time()) * 1000))
            except Exception:
                logger.exception("djwork: extending the running lock of periodic job %s failed", jid)

    def _bury_invalid(self, unit: UnitOfWork, acks: AckBuffer, reason: str) -> None:
        """A payload that is not a job: to `dead` inside a readable wrapper that keeps the raw text."""
        unit.processed = unit.failed = 1
        now = time.time()
        wrapper = dead.invalid_payload(unit.raw, unit.queue, f"{reason}; raw payload kept in args[0] and raw_payload",
                                       now)
        logger.error("djwork: invalid payload from queue %s sent to dead: %s", unit.queue, reason)
        self.history.record("", dead.INVALID_PAYLOAD_CLASS, unit.queue, "dead", now, 0.0,
                            dead.INVALID_PAYLOAD_CLASS, reason)
        if acks.abandoned:
            return
        self._file(unit, Decision("dead", wrapper, now), "")
