"""The log line of a failed job: WARNING, with what happens next, and the traceback when it is final.

A failure logged at INFO with no traceback left nothing to debug from in a
log filtered at WARNING, and a job that ran out of retries went to `dead`
without its traceback anywhere but the dead set's compressed
``error_backtrace``. A retry gets one line (the error's class and message:
it will run again, and a traceback per retry of a flapping job floods the
log, as Sidekiq's own default of one backtrace per failure does); the final
failure (`dead`, or dropped with `dead=False`) gets the traceback too.
The one-line start/done stay at INFO under ``LOG_JOBS``.
"""

from __future__ import annotations

import logging

from djwork.worker.retry import error_class_name, safe_message

FINAL = ("dead", "failed")


def log_failure(logger: logging.Logger, jid: str, class_name: str, queue: str, error: BaseException, outcome: str,
                elapsed_ms: float) -> None:
    """One WARNING per failed run; ``outcome`` is the history status (``retry``, ``dead`` or ``failed``)."""
    final = outcome in FINAL
    logger.warning(
        "fail jid=%s class=%s elapsed=%.1fms error=%s: %s -> %s", jid, class_name, elapsed_ms,
        error_class_name(error), safe_message(error)[:500], outcome,
        exc_info=(type(error), error, error.__traceback__) if final else None,
        extra={"jid": jid, "job_class": class_name, "queue": queue, "elapsed_ms": elapsed_ms, "event": "fail",
               "outcome": outcome})
