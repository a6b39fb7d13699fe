"""``self.replace(sig)`` in a job's run (docs/canvas.md, replace()): the ``Replaced`` it raises is a success.

``replace()`` raises ``Replaced`` once the replacement is written (Celery raises ``Ignore``), so that
``raise self.replace(sig)`` ends the body as ``return self.replace(sig)`` does. Without this hook the
retry rules took it for a failure and ran the job again, making a second replacement each time.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from djwork.jobs import Job
from djwork.jobs.task_class import Replaced
from djwork.worker.run_hooks import OK, JobRun, RunHook

if TYPE_CHECKING:
    from djwork.settings.conf import Config


class ReplacedRuns(RunHook):
    """A bound job's ``Replaced`` ends its run as a success with no result; its own record is not written."""

    def joins(self, target: Any, config: Config) -> bool:
        # Only a bound job has the ``self`` to call replace() on: any other run pays nothing.
        return isinstance(target, Job) and bool(target.bind)

    def around(self, run: JobRun, call_next: Callable[[], Any]) -> Any:
        try:
            return call_next()
        except Replaced:
            run.note(self, True)
            return None

    def allows_loop(self, run: JobRun) -> bool:
        return True

    async def around_async(self, run: JobRun, call_next: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        try:
            return await call_next()
        except Replaced:
            run.note(self, True)
            return None

    def after(self, run: JobRun, error: BaseException | None) -> None:
        # Registered after ResultRecords: the replacement runs with this job's id and writes its record;
        # this job's SUCCESS-None, written by an ack that may come after the replacement's, would hide it.
        if run.status == OK and run.noted(self):
            run.unit.result = ""
