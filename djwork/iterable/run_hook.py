"""An iterable job's part in a worker's run: it may stop between items, and then goes back to its queue.

``around`` tells the walk (walk.py) how to ask whether this process is
quieting or stopping; ``take_failure`` files an ``Interrupted`` segment
itself: the unchanged payload goes back to the pop end of its queue
(return_job.lua, removed from the in-progress list in the same step), so the
next worker resumes it from the saved cursor. Its locks and its batch
membership stay: the job has not ended.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from djwork import redis as redis_layer
from djwork.iterable.job import IterableJob
from djwork.iterable.walk import Interrupted, stop_requested
from djwork.redis import keys, scripts
from djwork.worker.run_hooks import RESCHEDULED, JobRun, RunHook

if TYPE_CHECKING:
    from djwork.settings.conf import Config
    from djwork.worker.process import RunState

logger = logging.getLogger("djwork")


class IterableRun(RunHook):
    """Joins the runs of ``djwork.IterableJob`` subclasses only."""

    def __init__(self, run_state: RunState) -> None:
        self.run_state = run_state

    def joins(self, target: Any, config: Config) -> bool:
        return isinstance(target, IterableJob)

    def _stopping(self) -> bool:
        state = self.run_state
        return state.quieted or state.stopping

    def around(self, run: JobRun, call_next: Callable[[], Any]) -> Any:
        token = stop_requested.set(self._stopping)
        try:
            return call_next()
        finally:
            stop_requested.reset(token)

    def take_failure(self, run: JobRun, error: BaseException) -> bool:
        if not isinstance(error, Interrupted):
            return False
        unit = run.unit
        run.status, run.error_class, run.error_message = RESCHEDULED, "djwork.iterable.Interrupted", str(error)
        logger.info("interrupted jid=%s class=%s: %s", run.jid, run.class_name, error,
                    extra={"jid": run.jid, "job_class": run.class_name, "queue": unit.queue,
                           "event": "interrupted"})
        if run.acks.abandoned:
            return True  # pushed back by the shutdown requeue already
        queue_key = keys.queue(unit.queue)
        if unit.in_progress_key:
            redis_layer.run(lambda conn: scripts.evaluate(conn, "return_job", [unit.in_progress_key, queue_key],
                                                          [unit.raw]), idempotent=True)
        else:  # basic fetch: the job left Redis when it was fetched
            redis_layer.run(lambda conn: conn.rpush(queue_key, unit.raw))
        return True
