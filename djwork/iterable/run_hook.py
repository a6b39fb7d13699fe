"""An iterable job's part in a worker's run: it may stop between items, and then goes back to its queue.

``around`` gives the segment (walk.py) a ``RunSlot``: how to ask whether
this process is quieting or stopping, and where the segment leaves itself
for the hook. ``take_failure`` files an ``Interrupted`` segment itself: the
unchanged payload goes back to the pop end of its queue (return_job.lua,
removed from the in-progress list in the same step), so the next worker
resumes it from the saved cursor. Its locks and its batch membership stay:
the job has not ended. ``after`` marks a segment that started from a saved
cursor as resumed, for the history.

It joins ``IterableJob`` runs and Django tasks' runs: a task's body may
iterate with ``djwork.resumable`` (task_form.py), whose failures no walk
sees, so this hook saves their cursor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from djwork import redis as redis_layer
from djwork.iterable import state
from djwork.iterable.job import IterableJob
from djwork.iterable.walk import Interrupted, RunSlot, worker_run
from djwork.redis import keys, lanes, scripts
from djwork.settings.conf import get_config
from djwork.tasks_compat import DjangoTask
from djwork.worker.run_hooks import OK, RESCHEDULED, JobRun, RunHook

if TYPE_CHECKING:
    from djwork.settings.conf import Config
    from djwork.worker.process import RunState

logger = logging.getLogger("djwork")


class IterableRun(RunHook):
    """Joins the runs of ``djwork.IterableJob`` subclasses and of Django tasks."""

    def __init__(self, run_state: RunState) -> None:
        self.run_state = run_state

    def joins(self, target: Any, config: Config) -> bool:
        return isinstance(target, (IterableJob, DjangoTask))

    def _stopping(self) -> bool:
        state = self.run_state
        return state.quieted or state.stopping

    def around(self, run: JobRun, call_next: Callable[[], Any]) -> Any:
        slot = RunSlot(run.jid, self._stopping)
        run.note(self, slot)
        token = worker_run.set(slot)
        try:
            return call_next()
        finally:
            worker_run.reset(token)

    def take_failure(self, run: JobRun, error: BaseException) -> bool:
        slot = run.noted(self)
        if slot is not None and slot.segment is not None:
            # The Tasks form's failure reaches no walk: save the last item done here, and a soft time
            # limit after some progress sends it back to its queue (an IterableJob's walk did it already).
            error = slot.segment.failed(error)
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
        layout = lanes.layout_for(get_config())  # a cluster's lanes carry the queue's tag: one slot with the queue
        if unit.in_progress_key:
            # A prioritised job back to its lane (docs/priority.md).
            redis_layer.run(lambda conn: scripts.evaluate(conn, "return_job", [
                unit.in_progress_key, queue_key, layout.lanes(unit.queue)], [unit.raw, layout.lane_name(unit.queue)]),
                idempotent=True)
        else:  # basic fetch: the job left Redis when it was fetched
            lane = lanes.lane_of_raw(unit.raw)
            redis_layer.run(lambda conn: redis_layer.exchange_on(
                conn, lanes.push_commands(unit.queue, lane, [unit.raw], "RPUSH", layout)))
        return True

    def after(self, run: JobRun, error: BaseException | None) -> None:
        slot = run.noted(self)
        segment = slot.segment if slot is not None else None
        if segment is None:
            return
        run.resumed = segment.progress.resumed
        if run.status == OK and segment.keep and not segment.finished:
            # A task that left its loop early and returned has ended: a later job with its id must not
            # resume this iteration.
            state.delete(run.jid)
