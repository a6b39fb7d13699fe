"""The exceptions a job sees, under the names Celery code imports them by (``celery.exceptions``).

``SoftTimeLimitExceeded`` is raised *inside* a job that ran past its
``soft_time_limit`` (docs/celery.md, Time limits), so the job can clean up;
``TimeLimitExceeded`` is the error a job past its hard ``time_limit`` is
filed with (its ``error_class`` in `retry` and `dead`).
"""

from __future__ import annotations


class SoftTimeLimitExceeded(Exception):
    """Raised inside a running job at its ``soft_time_limit``; the job may catch it and clean up."""


class TimeLimitExceeded(Exception):
    """A job ran past its hard ``time_limit``: it was failed (retry path) and its thread abandoned."""


__all__ = ["SoftTimeLimitExceeded", "TimeLimitExceeded"]


# Celery's names for djwork's own exceptions, so `from celery.exceptions import TimeoutError` works with the
# import swapped. Resolved on first use: the modules that define them import much of djwork.
CELERY_NAMES = {
    "TimeoutError": ("djwork.results", "ResultTimeout"),
    "TaskRevokedError": ("djwork.results", "JobRevoked"),
    "ChordError": ("djwork.canvas", "ChordError"),
    "Retry": ("djwork.task_class", "Retry"),
    "MaxRetriesExceededError": ("djwork.task_class", "MaxRetriesExceededError"),
}


def __getattr__(name: str) -> type[BaseException]:
    if name not in CELERY_NAMES:
        raise AttributeError(f"module 'djwork.exceptions' has no attribute {name!r}")
    import importlib

    module, attribute = CELERY_NAMES[name]
    return getattr(importlib.import_module(module), attribute)
