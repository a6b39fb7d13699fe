"""Batches in a job's run (docs/batches.md): skip an invalidated batch's jobs, nest batches, keep results.

The facts it reads come from batches/runtime.py (cached per batch for a
second); the batch's accounting itself rides on the job's settlement (its
``b-<bid>`` tie, djwork/job_locks.py) and is done by the Lua step that ends
the job (lua/batch_lib.lua).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from djwork import result_record
from djwork.batches import runtime
from djwork.worker.run_hooks import OK, JobRun, RunHook

if TYPE_CHECKING:
    from djwork.conf import Config


class BatchRun(RunHook):
    """Joins the runs whose payload carries a ``bid``."""

    blocking = True  # keeping a result may read the batch's flags from Redis

    def __init__(self, config: Config) -> None:
        self.config = config

    def joins(self, target: Any, config: Config) -> tuple[str, ...]:
        return ("bid",)

    def admit(self, run: JobRun) -> str | None:
        if not runtime.invalidated(run.payload):  # its batch was stopped (docs/batches.md)
            return None
        if result_record.wants_result(run.payload):  # skipped unrun, as a revoked job is: REVOKED, with why
            run.unit.result = result_record.revoked_spec("skipped: its batch was invalidated", self.config)
        return "invalidated"

    def around(self, run: JobRun, call_next: Callable[[], Any]) -> Any:
        running = runtime.enter(run.payload)  # a batch this job opens is a child of its own
        try:
            return call_next()
        finally:
            runtime.leave(running)

    def allows_loop(self, run: JobRun) -> bool:
        return True

    async def around_async(self, run: JobRun, call_next: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        # Inside this task's own context (each task copies one): a batch opened in
        # the body is a child of this job's batch only, not of its loop neighbours'.
        running = runtime.enter(run.payload)
        try:
            return await call_next()
        finally:
            runtime.leave(running)

    def after(self, run: JobRun, error: BaseException | None) -> None:
        if run.status == OK:  # kept by the ack's own step, which may fire the batch's success with every result
            run.unit.locks = runtime.keep_result(run.unit.locks, run.payload, run.result)
