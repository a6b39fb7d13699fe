"""Executing one fetched job: parse, resolve, run the hook chain around the body, then settle it in Redis.

The ``Executor`` is shared by every processor thread (the threads
themselves, and their lifecycle, are the Manager's). It names no feature:
each one's part in a run is a hook (run_hooks.py, docs/hooks.md), and
tests/test_structure.py lists the modules this one may import.

Bad data never wedges a worker: a payload that isn't a JSON job, or names a
class nobody registered, goes to `dead` with its raw text and a clear error,
so one bad push can't stop a queue; nothing here lets an exception escape
to the processor thread.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections
from django.db.backends.signals import connection_created

from djwork import dead
from djwork import redis as redis_layer
from djwork.jobs import Job, UnknownJobClass, resolve
from djwork.payload import PayloadError, loads
from djwork.redis import keys
from djwork.redis.key_repair import quarantine_culprits
from djwork.redis.key_types import WrongTypeKey
from djwork.tasks_compat import DjangoTask
from djwork.worker.coroutine_jobs import CoroutineJob
from djwork.worker.failure_log import log_failure
from djwork.worker.retry import Decision, decide
from djwork.worker.run_hooks import DEAD, FAILED, OK, RETRY, HookPlan, JobRun, RunHook, build_request

if TYPE_CHECKING:
    from djwork.settings.conf import Config
    from djwork.worker.acks import AckBuffer
    from djwork.worker.fetch import UnitOfWork
    from djwork.worker.process import WorkState

logger = logging.getLogger("djwork")

_STATUS = {"retry": RETRY, "dead": DEAD, "drop": FAILED}  # a Decision's target -> the run's status


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


class Executor:
    """Shared by every processor thread of a Launcher; per-thread state lives in ``_local``."""

    def __init__(self, config: Config, identity: str, work: WorkState, hooks: Sequence[RunHook] = (),
                 file_failure: Callable[..., Any] = dead.file_failure) -> None:
        self.config = config
        # dead.file_failure, or a cluster's filing in single-slot steps (djwork/worker/mode.py): one call shape.
        self.file_failure = file_failure
        self.identity = identity
        self.work = work
        self.hooks = tuple(hooks)  # installed_hooks.py: registration order is the chain's order
        for hook in self.hooks:
            hook.attach(self)
        # Set by the Launcher once its event loop component exists (coroutines.py).
        self.coroutines_enabled = False
        self._local = threading.local()
        self._plans: dict[str, HookPlan] = {}
        # An invalid payload names no class: its run (history's `dead` line) sees the hooks that join any class.
        self._no_class = HookPlan(self.hooks, None, config).plain

    # --- resolution -------------------------------------------------------------
    def resolve(self, class_name: str) -> Job | DjangoTask | None:
        """The job or Django task a payload's class names (an alias, the registry, an import), or None."""
        found: Job | DjangoTask | None = resolve(class_name)
        if found is None:
            from django.utils.module_loading import import_string

            target = self.config.aliases.get(class_name, class_name)
            try:
                candidate = import_string(target)
            except ImportError:
                candidate = None
            found = candidate if isinstance(candidate, DjangoTask) else None
        return found

    def plan(self, class_name: str) -> HookPlan:
        # Cached per class name: resolution (alias, registry, import) and the choice of hooks
        # run once, not per job.
        plan = self._plans.get(class_name)
        if plan is None:
            plan = self._plans[class_name] = HookPlan(self.hooks, self.resolve(class_name), self.config)
        return plan

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
        plan = self.plan(class_name)
        target = plan.target
        run = JobRun(unit, acks, payload, jid, class_name, target, plan.phases(payload))
        for hook in run.phases.admit:
            status = hook.admit(run)
            if status is not None:  # dropped unrun (expired, its batch invalidated, ...)
                unit.acknowledge(jid)
                run.status, run.started = status, time.time()
                for ending in run.phases.after:
                    ending.after(run, None)
                return None
        if target is None:
            error = UnknownJobClass(
                f"no djwork job, Django task or alias named {class_name!r} is registered in this process"
            )
            # Logged at ERROR whatever LOG_JOBS says: a deploy that dropped or renamed a job
            # otherwise fills `dead` (or `retry`) without one line saying why.
            logger.error("djwork: unknown job class %r (jid=%s, queue %s); %s", class_name, jid, unit.queue,
                         "sent to dead" if self.config.unknown_class == "dead" else "retrying (UNKNOWN_CLASS=retry)",
                         extra={"jid": jid, "job_class": class_name, "queue": unit.queue})
            run.started = time.time()
            self.fail(run, error, unknown=True)
            return None
        if isinstance(target, Job):
            run.request = build_request(payload, unit.queue, jid, self.identity)
            if self.coroutines_enabled and target.is_async and all(
                    hook.allows_loop(run) for hook in run.phases.around):
                # The body runs on the event loop (coroutines.py); the Manager moves the job to a place there.
                # A hook whose wrapping would block the loop (a limiter's wait, middleware) keeps it on a thread.
                return CoroutineJob(self, run)
        self._execute(run)
        return None

    def _execute(self, run: JobRun) -> None:
        self.begin(run)
        error: BaseException | None = None
        call = functools.partial(self._body, run)
        for hook in reversed(run.phases.around):
            call = functools.partial(hook.around, run, call)
        try:
            close_stale_connections()
            result = call()
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
            self.work.end(run.tid)
        if run.unit.timed_out:
            # Settled already, by the hook that abandoned it (a hard time limit), and its slot given
            # to another thread: this late finish must neither ack, nor file, nor count it again.
            return
        self.settle(run, result, error)

    def _body(self, run: JobRun) -> Any:
        for hook in run.phases.before:
            hook.before(run)
        target = run.target
        if isinstance(target, Job):
            return self._maybe_await(target.run(run.request), run)
        payload = run.payload
        kwargs = payload.get("kwargs") or {}
        return self._maybe_await(target.func(*run.leading_args, *(payload.get("args") or []),
                                             **(kwargs if isinstance(kwargs, dict) else {})), run)

    def _maybe_await(self, value: Any, run: JobRun) -> Any:
        if not asyncio.iscoroutine(value):
            return value
        loop = getattr(self._local, "loop", None)
        if loop is None or loop.is_closed():
            # One event loop per processor thread, kept for its life: creating
            # a loop per job costs more than most jobs.
            loop = asyncio.new_event_loop()
            self._local.loop = loop
        return loop.run_until_complete(value if run.wrap_awaitable is None else run.wrap_awaitable(value))

    def begin(self, run: JobRun, tid: str | None = None) -> None:
        """A job starts: the work hash and the start line."""
        run.started = time.time()
        run.tid = self.work.begin(run.unit.queue, run.unit.raw, int(run.started), tid)
        if self.config.log_jobs and logger.isEnabledFor(logging.INFO):
            logger.info("start jid=%s class=%s", run.jid, run.class_name,
                        extra={"jid": run.jid, "job_class": run.class_name, "queue": run.unit.queue,
                               "event": "start"})
        run.clock = time.perf_counter()

    def settle(self, run: JobRun, result: Any, error: BaseException | None) -> None:
        """A job ended: the ``after`` hooks and the ack on success; a hook's own filing or the retry path on failure."""
        run.elapsed_ms = (time.perf_counter() - run.clock) * 1000
        if error is None:
            unit = run.unit
            unit.processed = 1
            run.status, run.result = OK, result
            for hook in run.phases.after:
                hook.after(run, None)
            unit.acknowledge(run.jid)
            if self.config.log_jobs and logger.isEnabledFor(logging.INFO):
                logger.info("done jid=%s class=%s elapsed=%.1fms", run.jid, run.class_name, run.elapsed_ms,
                            extra={"jid": run.jid, "job_class": run.class_name, "queue": unit.queue,
                                   "elapsed_ms": run.elapsed_ms, "event": "done"})
            return
        for hook in run.phases.failure:
            if hook.take_failure(run, error):  # filed by the hook (a limiter's reschedule)
                for ending in run.phases.after:
                    ending.after(run, error)
                return
        self.fail(run, error)

    def abandon(self, run: JobRun, error: BaseException) -> None:
        """Settle a run as failed from another thread while its body may still run (a hook set
        ``unit.timed_out`` first, so the body's own finish settles nothing)."""
        self.work.end(run.tid)
        run.elapsed_ms = (time.perf_counter() - run.clock) * 1000
        self.fail(run, error)

    def fail(self, run: JobRun, error: BaseException, unknown: bool = False) -> None:
        """The retry rules decide where a failed job goes; the ``after`` hooks see it, then it is filed."""
        unit, payload = run.unit, run.payload
        unit.processed = unit.failed = 1
        if unknown and self.config.unknown_class == "dead":
            decision = decide({**payload, "retry": 0}, error, None, unit.queue, self.config.max_retries)
            decision = Decision("dead", decision.payload, decision.score)
        else:
            target = run.target
            decision = decide(payload, error, target if isinstance(target, Job) else None, unit.queue,
                              self.config.max_retries)
        run.decision, run.status = decision, _STATUS[decision.target]
        run.error_class = decision.payload.get("error_class", "")
        run.error_message = decision.payload.get("error_message", "")
        for hook in run.phases.after:  # before the filing, as Celery's hooks run before the ack
            hook.after(run, error)
        if not unknown:  # an unknown class has its own ERROR line already
            log_failure(logger, run.jid, run.class_name, unit.queue, error, run.status, run.elapsed_ms)
        if run.acks.abandoned:
            return
        self._file(unit, decision, run.jid)

    def _file(self, unit: UnitOfWork, decision: Decision, jid: str) -> None:
        result = (keys.result(jid), unit.result) if jid and unit.result else ("", "")
        call = self.file_failure(unit.in_progress_key or keys.queue(unit.queue), unit.raw, decision.target,
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

    def _bury_invalid(self, unit: UnitOfWork, acks: AckBuffer, reason: str) -> None:
        """A payload that is not a job: to `dead` inside a readable wrapper that keeps the raw text."""
        unit.processed = unit.failed = 1
        now = time.time()
        wrapper = dead.invalid_payload(unit.raw, unit.queue, f"{reason}; raw payload kept in args[0] and raw_payload",
                                       now)
        logger.error("djwork: invalid payload from queue %s sent to dead: %s", unit.queue, reason)
        run = JobRun(unit, acks, wrapper, "", dead.INVALID_PAYLOAD_CLASS, None, self._no_class)
        run.status, run.started = DEAD, now
        run.error_class, run.error_message = dead.INVALID_PAYLOAD_CLASS, reason
        for hook in run.phases.after:
            hook.after(run, None)
        if acks.abandoned:
            return
        self._file(unit, Decision("dead", wrapper, now), "")
