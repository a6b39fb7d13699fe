"""A coroutine job: an ``async def`` djwork job whose body runs on the worker's event loop (coroutines.py).

The processor thread does everything before the body (parse, locks,
expiry, resolve) exactly as for a thread job, and hands a ``CoroutineJob``
to the Manager, which moves it from its thread slot to a place on the loop.
There ``run()`` begins it, awaits the body and settles it through the same
``Executor.settle`` as a thread job: the same ack, history, metrics and
retry filing. Settling steps that talk to Redis (a failure's filing, a
batch's kept result) run on a finisher thread, so one slow round trip never
stalls the other coroutines on the loop.

Celery's machinery runs as for a thread job (djwork/task_events.py):
``task_prerun`` and ``before_start`` on the loop, in the job's own asyncio
context, just before its body (what a receiver sets in a ContextVar, the body
sees); ``self.request`` is the job's own for its whole life, across every
await (a ContextVar, djwork/task_class.py); the ending hooks and signals run
with the settling, on a finisher thread (a hook that blocks must not stall the
loop), in a copy of the job's context.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import os
from concurrent.futures import Executor as ThreadPool
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from djwork import task_events
from djwork.batches import runtime as batch_runtime
from djwork.worker import job_start
from djwork.worker.async_limits import with_soft_limit
from djwork.worker.process import base36
from djwork.worker.time_limits import job_limits

if TYPE_CHECKING:
    from djwork.jobs import Job
    from djwork.worker.acks import AckBuffer
    from djwork.worker.fetch import UnitOfWork

logger = logging.getLogger("djwork")

# Each coroutine job gets a tid of its own in the work hash (Sidekiq's is per thread; many jobs share
# the loop's thread here). next() on a count is one C call: safe from every processor thread.
_tids = itertools.count(1)


@dataclass(slots=True)
class CoroutineJob:
    # The execution.Executor that prepared the job (its begin/request/settle/work): typed loosely,
    # since the Executor builds CoroutineJobs and a type import back would be a cycle.
    executor: Any
    unit: UnitOfWork
    acks: AckBuffer
    payload: dict[str, Any]
    target: Job
    jid: str

    async def run(self, finisher: ThreadPool) -> None:
        """Begin, await the body, settle; never raises (a failure takes the retry path)."""
        executor, unit, payload = self.executor, self.unit, self.payload
        tid = base36((next(_tids) << 20) ^ os.getpid())
        started, clock, tid = executor.begin(unit, payload, self.jid, tid)
        # Inside this task's own context (each task copies one): a batch opened in
        # the body is a child of this job's batch only, not of its loop neighbours'.
        running = batch_runtime.enter(payload)
        error: BaseException | None = None
        result = None
        request = executor._request(payload, unit.queue, self.jid)
        events = task_events.for_run(self.target, request)  # None unless hooks or receivers exist
        try:
            if events is not None:
                events.before()
            if job_start.tracked(self.target, payload, executor.config):  # a round trip: off the loop
                await asyncio.get_running_loop().run_in_executor(
                    finisher, job_start.mark_started, self.jid, executor.identity, executor.config)
            body = self.target.run(request)
            soft, _hard = job_limits(payload, executor.config.soft_time_limit, None)
            # The soft limit on the loop is its timer's cancellation, turned into SoftTimeLimitExceeded at the
            # job's await (async_limits.py); a job with a hard limit runs on a thread (Executor._execute).
            result = await (with_soft_limit(body, soft) if soft is not None else body)
        except asyncio.CancelledError as cancelled:
            if self.acks.abandoned:
                # Cancelled at the shutdown deadline: the requeue pushed its copy back, so
                # this run files nothing (a thread job past the deadline files nothing either).
                logger.warning("djwork: coroutine job %s cancelled at the shutdown deadline; it was requeued",
                               self.jid)
                executor.work.end(tid)
                return
            error = cancelled
        except BaseException as caught:
            error = caught
        finally:
            batch_runtime.leave(running)
        executor.work.end(tid)
        if error is not None or events is not None or "bid" in payload or payload.get("djwork_task"):
            # A copy of this job's context: the ending hooks and receivers see what its start set.
            await asyncio.get_running_loop().run_in_executor(
                finisher, contextvars.copy_context().run, executor.settle, unit, self.acks, payload, self.target,
                self.jid, started, clock, result, error, events)
        else:
            executor.settle(unit, self.acks, payload, self.target, self.jid, started, clock, result, error)
