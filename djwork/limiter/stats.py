"""Per-limiter counters (the ``djwork:limiter-stats:<name>`` HASH), as Sidekiq Enterprise's Limits page shows them.

The Lua scripts count every event where it happens; the worker counts one
more, ``rescheduled``, through ``record_rescheduled`` when a job over a limit
goes back to wait.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from djwork import redis as redis_layer
from djwork.limiter.base import Limiter
from djwork.limiter.names import DEFAULT_TTL, validate_name
from djwork.redis.key_layout import layout_of

FIELDS = {
    "held": "completed holdings of a concurrent slot",
    "held_us": "microseconds those holdings lasted, in all",
    "immediate": "admissions on the first try",
    "waited": "admissions after waiting",
    "wait_us": "microseconds those admissions waited, in all",
    "over": "OverLimit answers (no admission within wait_timeout)",
    "overages": "holders that ran on past their slot: past lock_timeout, or freed under them (the limit was exceeded)",
    "reclaimed": "slots taken back from a holder past lock_timeout",
    "orphaned": "slots freed because their process was found dead",
    "rescheduled": "jobs sent back to wait for the limit (counted by the worker)",
}


@dataclass(frozen=True)
class LimiterStats:
    held: int = 0
    held_time: float = 0.0  # seconds, in all
    immediate: int = 0
    waited: int = 0
    wait_time: float = 0.0  # seconds, in all
    over: int = 0
    overages: int = 0
    reclaimed: int = 0
    orphaned: int = 0
    rescheduled: int = 0

    @property
    def average_held(self) -> float:
        return self.held_time / self.held if self.held else 0.0

    @property
    def average_wait(self) -> float:
        return self.wait_time / self.waited if self.waited else 0.0


def _count(value: Any) -> int:
    try:
        number = int(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError, AttributeError):
        return 0
    return max(0, number)


def parse_stats(raw: Any) -> LimiterStats:
    """The stats HASH as read (HGETALL); unreadable or missing fields read as 0."""
    fields = {(name.decode() if isinstance(name, bytes) else str(name)): value
              for name, value in (raw.items() if isinstance(raw, dict) else [])}
    counts = {name: _count(fields.get(name)) for name in FIELDS}
    return LimiterStats(
        held=counts["held"], held_time=counts["held_us"] / 1e6, immediate=counts["immediate"],
        waited=counts["waited"], wait_time=counts["wait_us"] / 1e6, over=counts["over"],
        overages=counts["overages"], reclaimed=counts["reclaimed"], orphaned=counts["orphaned"],
        rescheduled=counts["rescheduled"])


def record_rescheduled(limiter: Limiter | str, count: int = 1) -> None:
    """Count ``count`` jobs sent back to wait for ``limiter`` (a Limiter, or its name).

    Given a Limiter, the counter expires with the limiter's ttl, as every
    other key of it does; given a name, an expiry the key already has is
    kept (PEXPIRE NX), and a new key gets the default ttl.
    """
    if isinstance(limiter, Limiter):
        name, ttl, keep = limiter.name, limiter.ttl, False
    else:
        name, ttl, keep = validate_name(limiter), DEFAULT_TTL, True
    ttl_ms = math.ceil(ttl * 1000)

    def block(conn: Any) -> None:
        key = layout_of(conn).limiter(name).stats
        pipe = conn.pipeline(transaction=True)
        pipe.hincrby(key, "rescheduled", count)
        pipe.pexpire(key, ttl_ms, nx=keep)
        pipe.execute()

    # Not replayed: a replay would count the reschedule twice.
    redis_layer.run(block)
