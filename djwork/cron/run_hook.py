"""A periodic job's running lock across its retries (docs/periodic.md, no overlap).

A no-overlap entry's running lock must outlive the wait for a retry (25
retries outlast its default 24 h TTL): when the job is filed in `retry`, the
lock is retaken past the retry's time, never dropped.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from djwork.cron.locks import retake
from djwork.worker.run_hooks import RETRY, JobRun, RunHook

logger = logging.getLogger("djwork")


class PeriodicLockRetake(RunHook):
    """Joins the runs of periodic jobs (``djwork_periodic``)."""

    # Its round trip comes on a failure only, which a coroutine job settles off the event loop anyway.
    blocking = False

    def joins(self, target: Any, config: Any) -> tuple[str, ...]:
        return ("djwork_periodic",)

    def after(self, run: JobRun, error: BaseException | None) -> None:
        decision = run.decision
        if run.status != RETRY or decision is None or run.acks.abandoned:
            return
        try:
            retake([decision.payload], extra_ms=int(max(0.0, decision.score - time.time()) * 1000))
        except Exception:
            logger.exception("djwork: extending the running lock of periodic job %s failed", run.jid)
