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
