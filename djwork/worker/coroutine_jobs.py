"""A coroutine job: an ``async def`` djwork job whose body runs on the worker's event loop (coroutines.py).

The processor thread does everything before the body (parse, resolve, the
hooks' ``admit``) exactly as for a thread job, and hands a ``CoroutineJob``
to the Manager, which moves it from its thread slot to a place on the loop.
There ``run()`` begins it, runs the same hook chain as a thread job (each
wrapping hook's ``around_async``, then the ``before`` hooks) around the
awaited body, and settles it through the same ``Executor.settle``: the same
ack, ``after`` hooks and retry filing. Hooks that may wait (``blocking``: a
Redis round trip, user code) and a failure's filing run on a finisher
thread, so one slow call never stalls the other coroutines on the loop;
the ``after`` hooks then run in a copy of the job's context, so they see
what its start set (Celery's hooks and signals: djwork/task_events.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import logging
import os
from concurrent.futures import Executor as ThreadPool
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from djwork.worker.process import base36

if TYPE_CHECKING:
    from djwork.worker.run_hooks import JobRun

logger = logging.getLogger("djwork")

# Each coroutine job gets a tid of its own in the work hash (Sidekiq's is per thread; many jobs share
# the loop's thread here). next() on a count is one C call: safe from every processor thread.
_tids = itertools.count(1)


@dataclass(slots=True)
class CoroutineJob:
    # The execution.Executor that prepared the job (its begin/settle/work): typed loosely,
    # since the Executor builds CoroutineJobs and a type import back would be a cycle.
    executor: Any
    job_run: JobRun

    async def run(self, finisher: ThreadPool) -> None:
        """Begin, run the chain around the awaited body, settle; never raises (a failure takes the retry path)."""
        executor, run = self.executor, self.job_run
        executor.begin(run, base36((next(_tids) << 20) ^ os.getpid()))
        error: BaseException | None = None
        result = None
        call = functools.partial(self._body, finisher)
        for hook in reversed(run.phases.around):
            call = functools.partial(hook.around_async, run, call)
        try:
            result = await call()
        except asyncio.CancelledError as cancelled:
            if run.acks.abandoned:
                # Cancelled at the shutdown deadline: the requeue pushed its copy back, so
                # this run files nothing (a thread job past the deadline files nothing either).
                logger.warning("djwork: coroutine job %s cancelled at the shutdown deadline; it was requeued",
                               run.jid)
                executor.work.end(run.tid)
                return
            error = cancelled
        except BaseException as caught:
            error = caught
        executor.work.end(run.tid)
        if error is not None or run.off_loop:
            # A copy of this job's context: the ending hooks and receivers see what its start set.
            await asyncio.get_running_loop().run_in_executor(
                finisher, contextvars.copy_context().run, executor.settle, run, result, error)
        else:
            executor.settle(run, result, error)

    async def _body(self, finisher: ThreadPool) -> Any:
        run = self.job_run
        for hook in run.phases.before:
            if hook.blocking:  # a round trip: off the loop
                await asyncio.get_running_loop().run_in_executor(finisher, hook.before, run)
            else:  # on the loop, in the job's own context: what it sets, the body sees
                hook.before(run)
        return await run.target.run(run.request)
