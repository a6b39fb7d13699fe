"""Rate limiters shared by every process on the same Redis: concurrent, bucket, window, leaky, points.

    from djwork import limiter

    stripe = limiter.concurrent("stripe", 5, wait_timeout=5, lock_timeout=30)
    with stripe.within_limit():
        ...

Building a limiter sends nothing to Redis; its first use registers it. Every
decision is one Lua call on Redis's clock. ``OverLimit`` carries the limiter's
name and the ``retry_after`` it computed. docs/limiters.md has the semantics,
the keys and what differs from Sidekiq Enterprise.

Hooks for the worker: ``set_process_identity`` at boot (slots are held on
behalf of the process), ``release_slots_of`` when the reaper finds a process
dead, ``record_rescheduled`` when a job over a limit goes back to wait,
``parse_rate`` for ``@djwork.job(rate_limit=...)``.
"""

from __future__ import annotations

from typing import Any

from djwork.limiter.base import Holding, Limiter
from djwork.limiter.celery_rate import RateSpec, parse_rate
from djwork.limiter.concurrency import ConcurrentLimiter, Slot, identities_holding_slots, release_slots_of
from djwork.limiter.errors import OverLimit
from djwork.limiter.identity import clear_process_identity, process_identity, set_process_identity
from djwork.limiter.names import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_TTL,
    DEFAULT_WAIT_TIMEOUT,
    INTERVALS,
    validate_name,
)
from djwork.limiter.rate import BucketLimiter, LeakyLimiter, PointsHolding, PointsLimiter, WindowLimiter
from djwork.limiter.stats import LimiterStats, record_rescheduled
from djwork.limiter.unlimited import UNLIMITED, UnlimitedHolding, UnlimitedLimiter

__all__ = [
    "DEFAULT_LOCK_TIMEOUT", "DEFAULT_TTL", "DEFAULT_WAIT_TIMEOUT", "INTERVALS", "BucketLimiter",
    "ConcurrentLimiter", "Holding", "LeakyLimiter", "Limiter", "LimiterStats", "OverLimit", "PointsHolding",
    "PointsLimiter", "RateSpec", "Slot", "UnlimitedHolding", "UnlimitedLimiter", "WindowLimiter", "bucket",
    "clear_process_identity", "concurrent", "identities_holding_slots", "leaky", "parse_rate", "points",
    "process_identity", "record_rescheduled", "release_slots_of", "set_process_identity", "unlimited",
    "validate_name", "window",
]


def concurrent(name: str, size: int, *, wait_timeout: Any = DEFAULT_WAIT_TIMEOUT,
               lock_timeout: Any = DEFAULT_LOCK_TIMEOUT, ttl: Any = DEFAULT_TTL,
               reschedule: int | None = None) -> ConcurrentLimiter:
    """At most ``size`` holders at once, cluster-wide; a holder past ``lock_timeout`` loses its slot."""
    return ConcurrentLimiter(name, size, wait_timeout=wait_timeout, lock_timeout=lock_timeout, ttl=ttl,
                             reschedule=reschedule)


def bucket(name: str, size: int, interval: Any, *, wait_timeout: Any = DEFAULT_WAIT_TIMEOUT,
           ttl: Any = DEFAULT_TTL, reschedule: int | None = None) -> BucketLimiter:
    """``size`` per calendar ``interval`` ("second" | "minute" | "hour" | "day", or seconds)."""
    return BucketLimiter(name, size, interval, wait_timeout=wait_timeout, ttl=ttl, reschedule=reschedule)


def window(name: str, size: int, interval: Any, *, wait_timeout: Any = DEFAULT_WAIT_TIMEOUT,
           ttl: Any = DEFAULT_TTL, reschedule: int | None = None) -> WindowLimiter:
    """At most ``size`` in any sliding ``interval``."""
    return WindowLimiter(name, size, interval, wait_timeout=wait_timeout, ttl=ttl, reschedule=reschedule)


def leaky(name: str, size: int, interval: Any, *, wait_timeout: Any = DEFAULT_WAIT_TIMEOUT,
          ttl: Any = DEFAULT_TTL, reschedule: int | None = None) -> LeakyLimiter:
    """A burst of ``size``, then one each ``interval / size`` seconds."""
    return LeakyLimiter(name, size, interval, wait_timeout=wait_timeout, ttl=ttl, reschedule=reschedule)


def points(name: str, size: int, interval: Any, *, wait_timeout: Any = DEFAULT_WAIT_TIMEOUT,
           ttl: Any = DEFAULT_TTL, reschedule: int | None = None) -> PointsLimiter:
    """``size`` points per ``interval``, refilling continuously; ``within_limit(estimate=n)`` spends n."""
    return PointsLimiter(name, size, interval, wait_timeout=wait_timeout, ttl=ttl, reschedule=reschedule)


def unlimited() -> UnlimitedLimiter:
    """The same interface, never limiting, never touching Redis."""
    return UNLIMITED
