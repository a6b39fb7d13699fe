"""The exceptions a job sees, under the names Celery code imports them by (``celery.exceptions``).

``SoftTimeLimitExceeded`` is raised *inside* a job that ran past its
``soft_time_limit`` (docs/celery.md, Time limits), so the job can clean up;
``TimeLimitExceeded`` is the error a job past its hard ``time_limit`` is
filed with (its ``error_class`` in `retry` and `dead`).

What djwork raises for an action or an enqueue Redis could not do: one family, so a caller never needs redis-py's.

djwork.api re-exports these (djwork/api/errors.py); djwork.RedisUnavailable is the same class.
"""

from __future__ import annotations


class SoftTimeLimitExceeded(Exception):
    """Raised inside a running job at its ``soft_time_limit``; the job may catch it and clean up."""


class TimeLimitExceeded(Exception):
    """A job ran past its hard ``time_limit``: it was failed (retry path) and its thread abandoned."""


class ApiError(Exception):
    """An admin action that could not be done; the message is meant for the person who asked."""


class StaleEntry(ApiError):
    """The entry is no longer where it was read (already run, retried, moved or deleted)."""


class NotRetryable(ApiError):
    """The entry can't be pushed back to a queue (its payload is unreadable)."""


class EmbeddedProcess(ApiError):
    """Sidekiq 7 refuses quiet/stop for embedded processes: their host application owns their lifecycle."""


class RedisUnavailable(ApiError):
    """Redis could not be reached, or refused the command; ``__cause__`` is redis-py's error.

    Raised after djwork.redis's replay policy has given up, so there is nothing
    left to try on this call: the caller shows it (the dashboard answers 503)
    or tries again later.
    """


class ClusterUnsupported(Exception):
    """A feature djwork does not run on a Redis Cluster yet (docs/cluster.md, Refused on a cluster).

    Raised at the push that asks for it: never a CROSSSLOT reply from Redis at the moment a job runs.
    """


__all__ = [
    "ApiError",
    "ClusterUnsupported",
    "EmbeddedProcess",
    "NotRetryable",
    "RedisUnavailable",
    "SoftTimeLimitExceeded",
    "StaleEntry",
    "TimeLimitExceeded",
]


# Celery's names for djwork's own exceptions, so `from celery.exceptions import TimeoutError` works with the
# import swapped. Resolved on first use: the modules that define them import much of djwork.
CELERY_NAMES = {
    "TimeoutError": ("djwork.results", "ResultTimeout"),
    "TaskRevokedError": ("djwork.results", "JobRevoked"),
    "ChordError": ("djwork.canvas", "ChordError"),
    "Retry": ("djwork.jobs.task_class", "Retry"),
    "MaxRetriesExceededError": ("djwork.jobs.task_class", "MaxRetriesExceededError"),
    # Django's: what replace() with an empty chain raises, as Celery raises its own of this name.
    "ImproperlyConfigured": ("django.core.exceptions", "ImproperlyConfigured"),
}


def __getattr__(name: str) -> type[BaseException]:
    if name not in CELERY_NAMES:
        raise AttributeError(f"module 'djwork.exceptions' has no attribute {name!r}")
    import importlib

    module, attribute = CELERY_NAMES[name]
    return getattr(importlib.import_module(module), attribute)
