"""Expiring jobs (``expires``): a job fetched past its ``expires_at`` is dropped unrun (docs/unique.md).

Celery sends ``task_revoked`` for an expired task too, and records it as
REVOKED: the drop does both, the REVOKED record riding on the ack's own
Lua step like any result.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from djwork import result_record, signals
from djwork.worker.run_hooks import JobRun, RunHook, build_request

if TYPE_CHECKING:
    from djwork.conf import Config

logger = logging.getLogger("djwork")


class Expiry(RunHook):
    """Joins the runs whose payload carries ``expires_at``."""

    def __init__(self, config: Config, identity: str) -> None:
        self.config = config
        self.identity = identity

    def joins(self, target: Any, config: Any) -> tuple[str, ...]:
        return ("expires_at",)

    def admit(self, run: JobRun) -> str | None:
        expires_at = run.payload.get("expires_at")
        if not isinstance(expires_at, (int, float)) or expires_at >= time.time():
            return None
        jid, class_name = run.jid, run.class_name
        if signals.task_revoked.receivers:  # Celery sends it for an expired task too
            signals.revoked(run.target or class_name, build_request(run.payload, run.unit.queue, jid, self.identity),
                            expired=True)
        logger.info("djwork: dropping expired job jid=%s class=%s (expired %.1fs ago)",
                    jid, class_name, time.time() - expires_at, extra={"jid": jid, "job_class": class_name})
        run.unit.expired = 1
        if result_record.wants_result(run.payload):  # Celery records an expired task as REVOKED too
            run.unit.result = result_record.revoked_spec("expired before it ran", self.config)
        return "expired"
