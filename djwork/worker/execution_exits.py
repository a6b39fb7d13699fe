"""The executor's side exits: a job past its hard time limit, and a job a limiter sends back to wait.

Kept apart from execution.py so that module keeps to the run itself; ``Executor`` inherits them.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from djwork import dead, keys
from djwork import redis as redis_layer
from djwork.exceptions import TimeLimitExceeded
from djwork.jobs import Job
from djwork.limiter import OverLimit
from djwork.tasks_compat import Task
from djwork.worker import task_results
from djwork.worker.limits import count_rescheduled, reschedule_call, reschedule_cap, rescheduled_payload
from djwork.worker.retry import Decision

if TYPE_CHECKING:
    from djwork.worker.acks import AckBuffer
    from djwork.worker.fetch import UnitOfWork

logger = logging.getLogger("djwork")


class SideExits:
    """Mixed into ``Executor``: the paths that end a run other than by its body returning or raising."""

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
        if self.metrics is not None:  # neither a run nor a failure: its own count (docs/metrics.md)
            self.metrics.record_rescheduled(payload.get("wrapped") or payload["class"])
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
