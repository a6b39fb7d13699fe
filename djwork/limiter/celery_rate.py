"""Celery's ``rate_limit`` syntax ("100/m"), enforced cluster-wide instead of per worker process.

Celery applies ``rate_limit`` in each worker process separately, so 10
processes at "100/m" run up to 1,000 a minute. Here the string becomes a
sliding-window limiter shared by every process: at most N starts in any
second, minute or hour.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from djwork.limiter.rate import WindowLimiter

RATE = re.compile(r"\A\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:/\s*([smh]))?\s*\Z")
UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class RateSpec:
    """At most ``count`` starts in any sliding ``interval`` seconds."""

    count: int
    interval: float

    def limiter(self, name: str, **options: Any) -> WindowLimiter:
        """The window limiter that enforces this rate under ``name`` (e.g. ``f"rate:{job_name}"``)."""
        return WindowLimiter(name, self.count, self.interval, **options)


def parse_rate(rate: Any) -> RateSpec:
    """"N/s", "N/m", "N/h", or a bare number (per second), as Celery reads them.

    A rate below one becomes one start per longer period ("0.5/s": one in any
    2 s) and a fractional count above one is rounded down ("2.5/m": 2 a
    minute), so the limit is never looser than asked.
    A rate of 0 (Celery's "no limit") is refused: leave rate_limit unset instead.
    """
    if isinstance(rate, bool):
        raise ValueError(f"rate limit {rate!r} is not 'N/s', 'N/m', 'N/h' or a number")
    if isinstance(rate, (int, float)):
        count, interval = float(rate), 1.0
    elif isinstance(rate, str) and (match := RATE.match(rate)):
        count, interval = float(match.group(1)), UNITS[match.group(2) or "s"]
    else:
        raise ValueError(f"rate limit {rate!r} is not 'N/s', 'N/m', 'N/h' or a number (Celery's syntax)")
    if not math.isfinite(count) or count <= 0:
        raise ValueError(f"rate limit {rate!r} must allow more than zero per period (leave it unset for no limit)")
    if count < 1:
        return RateSpec(1, interval / count)
    return RateSpec(math.floor(count), interval)
