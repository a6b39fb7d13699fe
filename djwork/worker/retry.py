"""What happens to a job that raised: retry later, bury in `dead`, or drop (docs/wire.md, Scheduled/retry/dead sets).

Sidekiq's fields and backoff by default (``count**4 + 15 + rand(10) * (count + 1)``
seconds), or the job's own: ``self.retry(countdown=...)``, Celery's
``retry_backoff``/``retry_backoff_max``/``retry_jitter``, ``autoretry_for``.
Everything stored from outside our control (an exception's message) is made
valid UTF-8 and bounded first: an unencodable message used to make recording
the failure itself fail, forever.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from djwork.backtrace import encode_backtrace, exception_lines
from djwork.jobs.task_class import Retry
from djwork.jobs.task_class import Task as Job  # a djwork job is a Task; this module needs no more of djwork.jobs
from djwork.options import expires_at

ERROR_MESSAGE_LIMIT = 10_000


@dataclass(frozen=True)
class Decision:
    """Where a failed job goes: ``"retry"`` at ``score``, ``"dead"``, or ``"drop"`` (retry=False)."""

    target: str
    payload: dict[str, Any]
    score: float


def error_class_name(error: BaseException) -> str:
    kind = type(error)
    if kind.__module__ in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def safe_message(error: BaseException) -> str:
    """str(error), never raising, valid UTF-8, at most 10,000 characters."""
    try:
        message = str(error)
    except Exception:
        try:
            message = repr(error)
        except Exception:
            message = f"<{type(error).__name__} whose message could not be read>"
    message = message.encode("utf-8", "replace").decode("utf-8", "replace")
    return message[:ERROR_MESSAGE_LIMIT]


def max_retries_for(payload: dict[str, Any], default: int) -> int | None:
    """Retries allowed by the payload's ``retry`` field; None means no retries and no dead set."""
    value = payload.get("retry", True)
    if value is False:
        return None
    if value is True or value is None:
        return default
    if isinstance(value, int):
        return max(0, value)
    # Anything else (a Hash, a string) reads as no retries: the cautious
    # reading for a job with side effects.
    return 0


def celery_backoff(job: Job, retries: int) -> float:
    """Celery's exponential backoff: ``min(max, factor * 2**retries)`` whole seconds, jittered in [0, that]."""
    factor = int(max(1.0, float(job.retry_backoff)))
    delay = min(int(job.retry_backoff_max), factor * (2 ** retries))
    if job.retry_jitter:
        delay = random.randrange(delay + 1)
    return max(0, delay)


def autoretried(job: Job | None, error: BaseException) -> bool:
    """Celery's autoretry rule: an ``autoretry_for`` exception that is not a ``dont_autoretry_for`` one."""
    return (job is not None and bool(job.autoretry_for) and isinstance(error, job.autoretry_for)
            and not isinstance(error, job.dont_autoretry_for))


def sidekiq_backoff(count: int) -> float:
    return count ** 4 + 15 + random.randrange(10) * (count + 1)


def decide(payload: dict[str, Any], error: BaseException, job: Job | None, queue: str,
           default_max: int, now: float | None = None) -> Decision:
    """Build the payload to store and where it goes, for a job that raised ``error``."""
    now = time.time() if now is None else now
    requested: Retry | None = error if isinstance(error, Retry) else None
    shown = requested.exc if requested is not None and requested.exc is not None else error
    job_payload = dict(payload)
    job_payload["queue"] = payload.get("retry_queue") or queue
    job_payload["error_message"] = safe_message(shown)
    job_payload["error_class"] = error_class_name(shown)
    if "retry_count" in payload and isinstance(payload["retry_count"], int):
        count = payload["retry_count"] + 1
        job_payload["retried_at"] = now
    else:
        count = 0
        job_payload["failed_at"] = now
    job_payload["retry_count"] = count
    if payload.get("backtrace"):
        job_payload["error_backtrace"] = encode_backtrace(exception_lines(shown, payload["backtrace"]))

    limit = max_retries_for(payload, default_max)
    if requested is not None and requested.max_retries is not None:
        limit = requested.max_retries
    automatic = requested is None and autoretried(job, error)
    # Celery's rule: an exception the job did not ask to retry (self.retry(), autoretry_for) fails it at once —
    # for every job declared the Celery way, and for any job with autoretry_for. Else fail.delay().get() of a
    # Celery task waited out Sidekiq's 25 retries (some 20 days) instead of raising.
    asked_only = job is not None and (bool(job.autoretry_for) or job.fails_unless_retried)
    if asked_only and requested is None and not automatic:
        limit = 0 if limit is not None else None
    elif automatic and job is not None and limit is not None and job.retry_kwargs.get("max_retries") is not None:
        limit = job.retry_kwargs["max_retries"]  # Celery passes retry_kwargs to self.retry()
    if limit is None:
        return Decision("drop", job_payload, now)
    retry_for = payload.get("retry_for")
    first_failure = payload.get("failed_at", now)
    out_of_time = isinstance(retry_for, (int, float)) and isinstance(first_failure, (int, float)) and (
        first_failure + retry_for < now)
    if count >= limit or out_of_time:
        if payload.get("dead") is False:
            return Decision("drop", job_payload, now)
        return Decision("dead", job_payload, now)
    if requested is not None and requested.countdown is not None:
        delay = float(requested.countdown)
    elif job is not None and job.retry_backoff and not requested:
        delay = celery_backoff(job, count)
    elif automatic and job is not None:
        # Celery's autoretry calls self.retry(**retry_kwargs): their countdown, else default_retry_delay.
        delay = float(job.retry_kwargs.get("countdown", job.default_retry_delay))
    else:
        delay = sidekiq_backoff(count)
    if requested is not None and requested.expires is not None:
        # self.retry(expires=...): the retried run is dropped unrun past it, counted from when it is due.
        job_payload["expires_at"] = expires_at(requested.expires, now + delay, job_payload.get("class", "job"))
    return Decision("retry", job_payload, now + delay)
