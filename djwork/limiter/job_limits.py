"""A job's limits: ``@djwork.job(limits=[...], rate_limit="100/m")``, checked once at decoration.

The worker acquires them in order before the body runs and releases them
after (djwork/worker/limits.py). ``rate_limit`` is Celery's syntax, but one
sliding window shared by every process instead of a limit per worker process.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from djwork.limiter.base import Limiter
from djwork.limiter.celery_rate import parse_rate
from djwork.limiter.unlimited import UnlimitedLimiter

RATE_LIMIT_PREFIX = "rate:"  # the window limiter behind rate_limit= is named rate:<job name>


def job_limits(job_name: str, limits: Iterable[Any] | None, rate_limit: Any) -> tuple[Limiter | UnlimitedLimiter, ...]:
    """The limiters a job runs within, in acquisition order; ValueError naming the job for anything else."""
    chosen: list[Limiter | UnlimitedLimiter] = []
    if limits is not None:
        if isinstance(limits, (str, bytes)) or not isinstance(limits, Iterable):
            raise ValueError(f"job {job_name}: limits must be a list of limiters, got {limits!r}")
        for position, entry in enumerate(limits):
            if not isinstance(entry, (Limiter, UnlimitedLimiter)):
                raise ValueError(f"job {job_name}: limits[{position}] is not a djwork limiter "
                                 f"(limiter.concurrent(...), limiter.bucket(...), ...): {entry!r}")
            chosen.append(entry)
    if rate_limit is not None:
        try:
            spec = parse_rate(rate_limit)
        except ValueError as error:
            raise ValueError(f"job {job_name}: rate_limit: {error}") from None
        # Job names are dotted paths; anything a limiter name can't hold becomes "_".
        name = "".join(character if character.isalnum() or character in "_.:-" else "_" for character in job_name)
        chosen.append(spec.limiter(f"{RATE_LIMIT_PREFIX}{name}"))
    names = [limit.name for limit in chosen if isinstance(limit, Limiter)]
    if len(names) != len(set(names)):
        # Acquiring one concurrent limiter twice in one job would wait on itself.
        raise ValueError(f"job {job_name}: a limiter appears twice in its limits: {names}")
    return tuple(chosen)
