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

from djwork import dead, job_locks, keys, result_record, signals, task_events
from djwork import redis as redis_layer
from djwork.batches import runtime as batch_runtime
from djwork.cron.locks import retake
from djwork.jobs import Job, Request, Retry, UnknownJobClass, resolve
from djwork.key_guard import quarantine_culprits
from djwork.key_types import WrongTypeKey
from djwork.limiter import OverLimit
from djwork.middleware import build_server_chain, resolve_all
from djwork.payload import PayloadError, loads
from djwork.tasks_compat import Task
from djwork.worker import job_start, outcome, task_results
from djwork.worker.async_limits import is_coroutine_job, with_soft_limit
from djwork.worker.coroutine_jobs import CoroutineJob
from djwork.worker.execution_exits import SideExits
from djwork.worker.failure_log import log_failure
from djwork.worker.limits import run_within
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


class _DatabaseUse(threading.local):
    # A class default: getattr(local, name, default) raised and caught AttributeError twice per job.
    seen = False


_database_use = _DatabaseUse()


def _note_database_use(sender: Any, connection: Any, **kwargs: Any) -> None:
    _database_use.seen = True


connection_created.connect(_note_database_use, dispatch_uid="djwork.worker.execution.database-use")


def close_stale_connections() -> None:
    """close_old_connections(), skipped in threads that never opened a database connection.

    Django's connections are per thread, so a thread that never opened one
    has nothing to close; skipping saves the lookups on every job that never
    touches the database.
    """
    if _database_use.seen:
        close_old_connections()


class Executor(SideExits):
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
        # Set by the Launcher once its event loop component exists (coroutines.py).
        self.coroutines_enabled = False
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
    def __call__(self, unit: UnitOfWork, acks: AckBuffer) -> CoroutineJob | None:
        """Run one job; a coroutine job is only prepared and returned, for the Manager to put on the loop."""
        try:
            return self._run(unit, acks)
        except Exception:
            # A bug in settling must not kill the processor; the job stays on
            # the in-progress list and orphan recovery hands it back later.
            logger.exception("djwork: internal error while processing a job from %s", unit.queue)
            return None

    def _run(self, unit: UnitOfWork, acks: AckBuffer) -> CoroutineJob | None:
        try:
            payload = loads(unit.raw)
        except PayloadError as error:
            self._bury_invalid(unit, acks, str(error))
            return None
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
            if signals.task_revoked.receivers:  # Celery sends it for an expired task too
                signals.revoked(self.resolve(class_name) or class_name, self._request(payload, unit.queue, jid),
                                expired=True)
            logger.info("djwork: dropping expired job jid=%s class=%s (expired %.1fs ago)",
                        jid, class_name, time.time() - expires_at, extra={"jid": jid, "job_class": class_name})
            unit.acknowledge(jid)
            unit.expired = 1
            if result_record.wants_result(payload):  # Celery records an expired task as REVOKED too
                unit.result = result_record.revoked_spec("expired before it ran", self.config)
            self.history.record(jid, class_name, unit.queue, "expired", time.time(), 0.0)
            return None
        if "bid" in payload and batch_runtime.invalidated(payload):  # its batch was stopped (docs/batches.md)
            unit.acknowledge(jid)
            if result_record.wants_result(payload):  # skipped unrun, as a revoked job is: REVOKED, with why
                unit.result = result_record.revoked_spec("skipped: its batch was invalidated", self.config)
            self.history.record(jid, class_name, unit.queue, "invalidated", time.time(), 0.0)
            return None
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
            return None
        return self._execute(unit, acks, payload, target, jid)

    def _execute(self, unit: UnitOfWork, acks: AckBuffer, payload: dict[str, Any],
                 target: Job | Task, jid: str) -> CoroutineJob | None:
        if self.on_loop(target) and self.config.time_limit is None and "time_limit" not in payload:
            # (A coroutine job with a hard time limit runs on a thread, where the watchdog can abandon it.)
            # The body runs on the event loop (coroutines.py); the Manager moves the job to a place there.
            return CoroutineJob(self, unit, acks, payload, target, jid)
        started, clock, tid = self.begin(unit, payload, jid)
        error: BaseException | None = None
        running = None
        request = events = None
        if isinstance(target, Job):
            request = self._request(payload, unit.queue, jid)
            events = task_events.for_run(target, request)  # None unless hooks or receivers exist
        watch: Watch | None = None
        soft = hard = None
        if self._default_limits or "time_limit" in payload or "soft_time_limit" in payload:  # cheap when unused
            soft, hard = job_limits(payload, self.config.soft_time_limit, self.config.time_limit)
        try:
            close_stale_connections()
            running = batch_runtime.enter(payload)  # a batch this job opens is a child of its own
            if self.watchdog is None or (soft is None and hard is None):
                result = self._invoke(payload, target, unit.queue, jid, request, events)
            else:
                thread = threading.get_ident()
                # A coroutine job's soft limit is its event loop's (async_limits.py), not an async exception.
                self._local.soft_limit = soft if is_coroutine_job(target) else None
                with self.watchdog.watch(None if self._local.soft_limit else soft, hard, lambda: self._time_out(
                        unit, acks, payload, target, started, clock, tid, hard, thread)) as watch:
                    result = self._invoke(payload, target, unit.queue, jid, request, events)
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
        if watch is not None and watch.expired:
            # Filed already, by the watchdog at the hard limit, and its slot given to another thread:
            # this late finish must neither ack, nor file, nor count the job a second time.
            unit.timed_out = True
            late = time.perf_counter() - clock - (hard or 0.0)
            logger.warning("djwork: job %s (%s) finished %.1fs after its time limit; it was already filed as "
                           "failed, nothing more is done", jid, payload["class"], late,
                           extra={"jid": jid, "job_class": payload["class"], "queue": unit.queue})
            return
        self.settle(unit, acks, payload, target, jid, started, clock, result, error, events)
        return None

    def on_loop(self, target: Job | Task) -> bool:
        """Whether a job runs on the event loop: an ``async def`` job whose body nothing must wrap.

        Limits wait for a slot, and server middleware wraps the call, synchronously:
        around a coroutine not yet awaited they would hold and time nothing, so such
        jobs run on their processor thread as before.
        """
        return (self.coroutines_enabled and isinstance(target, Job) and target.is_async
                and not target.limits and not self.server_chain)

    def begin(self, unit: UnitOfWork, payload: dict[str, Any], jid: str,
              tid: str | None = None) -> tuple[float, float, str]:
        """A job starts: the work hash and the start line; returns (started, clock, tid)."""
        started = time.time()
        tid = self.work.begin(unit.queue, unit.raw, int(started), tid)
        if self.config.log_jobs and logger.isEnabledFor(logging.INFO):
            logger.info("start jid=%s class=%s", jid, payload["class"],
                        extra={"jid": jid, "job_class": payload["class"], "queue": unit.queue, "event": "start"})
        return started, time.perf_counter(), tid

    def settle(self, unit: UnitOfWork, acks: AckBuffer, payload: dict[str, Any], target: Job | Task, jid: str,
               started: float, clock: float, result: Any, error: BaseException | None,
               events: task_events.RunEvents | None = None) -> None:
        """A job ended: ack, history, metrics and results on success; the retry path on failure."""
        log_jobs = self.config.log_jobs and logger.isEnabledFor(logging.INFO)
        class_name = payload["class"]
        elapsed_ms = (time.perf_counter() - clock) * 1000
        if error is None:
            unit.processed = 1
            if events is not None and events.started:
                events.succeeded(result)
            if "bid" in payload:  # kept by the ack's own step, which may fire the batch's success with every result
                unit.locks = batch_runtime.keep_result(unit.locks, payload, result)
            if result_record.wants_result(payload):  # written by the ack's own Lua step (fetch.lua)
                unit.result = result_record.success_spec(result, self.config)
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
            if events is not None and events.started:  # a limiter inside the body: it runs again later
                events.ended_badly(error, will_retry=True)
            return
        if self.metrics is not None:
            self.metrics.record(payload.get("wrapped") or class_name, elapsed_ms, True)
        if isinstance(target, Task) or payload.get("djwork_task"):
            task_results.finished(jid, self.identity, error=error)
        self._handle_failure(unit, acks, payload, error, target if isinstance(target, Job) else None,
                             started, elapsed_ms, events=events)

    def _request(self, payload: dict[str, Any], queue: str, jid: str) -> Request:
        """A djwork job's ``self.request`` for this run (Celery's ``retries``: 0 on the first run)."""
        retry_count = payload.get("retry_count")
        args = payload.get("args") or []
        kwargs = payload.get("kwargs")
        return Request(id=jid, retries=(retry_count + 1) if isinstance(retry_count, int) else 0, queue=queue,
                       args=list(args), kwargs=dict(kwargs) if isinstance(kwargs, dict) else {}, payload=payload,
                       hostname=self.identity, task=payload["class"])

    def _invoke(self, payload: dict[str, Any], target: Job | Task, queue: str, jid: str, request: Request | None,
                events: task_events.RunEvents | None) -> Any:
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
            def execute() -> Any:
                if events is not None:
                    events.before()
                if job_start.tracked(target, payload, self.config):  # after a limiter let it in
                    job_start.mark_started(jid, self.identity, self.config)
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
    def _handle_failure(self, unit: UnitOfWork, acks: AckBuffer, payload: dict[str, Any],
                        error: BaseException, job: Job | None, started: float, elapsed_ms: float,
                        unknown: bool = False, events: task_events.RunEvents | None = None) -> None:
        unit.processed = unit.failed = 1
        if unknown and self.config.unknown_class == "dead":
            decision = decide({**payload, "retry": 0}, error, None, unit.queue, self.config.max_retries)
            decision = Decision("dead", decision.payload, decision.score)
        else:
            decision = decide(payload, error, job, unit.queue, self.config.max_retries)
        status = {"retry": "retry", "dead": "dead", "drop": "failed"}[decision.target]
        if events is not None and events.started:  # before the filing, as Celery's hooks run before the ack
            events.ended_badly(error, will_retry=decision.target == "retry")
        if not unknown:  # an unknown class has its own ERROR line already
            log_failure(logger, payload.get("jid", ""), payload["class"], unit.queue, error, status, elapsed_ms)
        self.history.record(payload.get("jid", ""), payload["class"], unit.queue, status, started,
                            elapsed_ms, decision.payload.get("error_class", ""),
                            decision.payload.get("error_message", ""))
        if acks.abandoned:
            return
        jid = payload.get("jid") or ""
        result = ("", "")
        if jid and result_record.wants_result(payload):  # RETRY or FAILURE, written by fail.lua's own step
            shown = error.exc if isinstance(error, Retry) and error.exc is not None else error
            state = result_record.RETRY if decision.target == "retry" else result_record.FAILURE
            wait = decision.score - time.time() if decision.target == "retry" else 0.0
            result = (keys.result(jid), outcome.failure_spec(state, shown, self.config, wait))
        self._file(unit, decision, jid, result)

    def _file(self, unit: UnitOfWork, decision: Decision, jid: str,
              result: tuple[str, str] = ("", "")) -> None:
        call = dead.file_failure(unit.in_progress_key or keys.queue(unit.queue), unit.raw, decision.target,
                                 decision.payload, decision.score, jid,
                                 from_in_progress=bool(unit.in_progress_key), config=self.config,
                                 locks=unit.locks, result=result)
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
