"""How much of a limit is in use, computed from its state as read (never by changing it).

The same arithmetic lua/limiter_rate.lua and lua/limiter_concurrent.lua decide
with, on a snapshot and Redis's clock, so a status page shows what the next
acquisition would find. Nothing here writes: a status read that trimmed a
window, for one, would free it for a second full charge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Usage:
    used: float
    available: float
    reset_at: float | None  # Redis epoch seconds when the limit is wholly free again; None if it is


def _number(value: Any) -> float | None:
    try:
        number = float(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError, AttributeError):
        return None
    return number if math.isfinite(number) else None


def _field(state: Any, name: str) -> float | None:
    if not isinstance(state, dict):
        return None
    return _number(state.get(name.encode(), state.get(name)))


def bucket(size: int, interval: float, state: Any, now: float) -> Usage:
    period = math.floor(now / interval) * interval
    used = 0.0
    if _field(state, "period") == period:  # a count from an earlier period is spent, not in use
        used = _field(state, "used") or 0.0
    return Usage(used, max(0.0, size - used), period + interval if used else None)


def window(size: int, interval: float, admissions: list[float], now: float) -> Usage:
    """``admissions``: the log's scores inside (now - interval, now] (older ones are only not yet trimmed)."""
    inside = [at for at in admissions if at > now - interval]
    return Usage(float(len(inside)), max(0.0, size - len(inside)), max(inside) + interval if inside else None)


def level(size: int, interval: float, state: Any, now: float) -> Usage:
    """leaky and points: a level draining at size/interval per second."""
    stored, at = _field(state, "level") or 0.0, _field(state, "at")
    rate = size / interval
    drained = max(0.0, stored - max(0.0, now - at) * rate) if at is not None else 0.0
    return Usage(drained, max(0.0, size - drained), now + drained / rate if drained else None)


def concurrent(size: int, lease_ends: list[float], now: float) -> Usage:
    """Leases already run out count as free: the next acquisition reclaims them."""
    live = [end for end in lease_ends if end >= now]
    return Usage(float(len(live)), max(0.0, size - len(live)), None)
