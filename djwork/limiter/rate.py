"""The rate kinds: bucket (per calendar period), window (sliding), leaky (burst, then a drip), points (cost).

Each decision is one call of lua/limiter_rate.lua on Redis's clock. A caller
that is refused sleeps exactly the ``retry_after`` Redis computed (no polling)
and asks once more, until ``wait_timeout`` is spent; when the computed wait is
longer than what is left of it, ``OverLimit`` is raised at once instead of
sleeping to no purpose.
"""

from __future__ import annotations

import time
from typing import Any

from djwork import redis as redis_layer
from djwork.limiter.base import SWEEP_BATCH, Holding, Limiter
from djwork.limiter.cluster_steps import list_apart
from djwork.limiter.errors import OverLimit
from djwork.limiter.identity import clean_jid, new_token, process_identity
from djwork.limiter.names import DEFAULT_TTL, DEFAULT_WAIT_TIMEOUT, interval_seconds, positive_points
from djwork.redis import scripts
from djwork.redis.key_layout import LimiterKeys, layout_of

# Sleep this much past the computed retry: Redis's clock and this host's sleep both drift a little,
# and waking a hair early costs one more round trip for nothing.
WAKE_MARGIN = 0.002

ADMITTED, WAIT, OVER = 1, 0, -1


def rate_keys(limiter_keys: LimiterKeys) -> list[str]:
    """lua/limiter_rate.lua's KEYS, from the limiter's keys in the mode's layout (``layout_of(conn).limiter``)."""
    return [limiter_keys.registry, limiter_keys.meta, limiter_keys.stats, limiter_keys.state, limiter_keys.waiters,
            limiter_keys.waiting]


class RateLimiter(Limiter):
    """bucket, window and leaky: one unit per admission."""

    # The Redis type of djwork:limiter-state:<name> for this kind (a window keeps a ZSET log), which
    # the key guard's table can't tell from the name alone.
    state_type = "hash"

    def __init__(self, name: str, size: int, interval: Any, *, wait_timeout: Any = DEFAULT_WAIT_TIMEOUT,
                 ttl: Any = DEFAULT_TTL, reschedule: int | None = None) -> None:
        super().__init__(name, size, interval_seconds(interval), wait_timeout=wait_timeout, ttl=ttl,
                         reschedule=reschedule)

    def _call(self, op: str, token: str, cost: float, budget: float, jid: str) -> list[Any]:
        args = [op, self.name, self.kind, self.size, repr(float(self.interval)), repr(self.ttl), token,
                repr(float(cost)), repr(budget), process_identity(), jid, SWEEP_BATCH, *self.metadata()]

        def block(conn: Any) -> list[Any]:
            limiter_keys = layout_of(conn).limiter(self.name)
            if op == "acquire":
                list_apart(conn, limiter_keys, self.name, self.ttl)
            return scripts.evaluate(conn, "limiter_rate", rate_keys(limiter_keys), args)

        # Not replayed: a bucket's count would be charged twice.
        return redis_layer.run(block)

    def _admit(self, cost: float, wait_timeout: Any, jid: str | None) -> float:
        """Wait for ``cost`` units; returns the Redis time of the admission."""
        deadline = time.monotonic() + self.wait_budget(wait_timeout)
        token, jid = new_token(), clean_jid(jid)
        while True:
            budget = max(0.0, deadline - time.monotonic())
            status, now, retry = self._call("acquire", token, cost, budget, jid)
            if int(status) == ADMITTED:
                return float(now)
            if int(status) == OVER:
                raise OverLimit(self.name, float(retry), self.kind)
            time.sleep(float(retry) + WAKE_MARGIN)

    def acquire(self, *, wait_timeout: float | None = None, jid: str | None = None, **options: Any) -> Holding:
        if options:
            raise TypeError(f"{self.kind} limiter got unexpected options {sorted(options)}")
        return Holding(self, self._admit(1, wait_timeout, jid))


class BucketLimiter(RateLimiter):
    """``size`` admissions per calendar period: 10 per second allows 10 at 12:00:00.999 and 10 more at 12:00:01."""

    kind = "bucket"


class WindowLimiter(RateLimiter):
    """At most ``size`` admissions in any sliding ``interval``."""

    kind = "window"
    state_type = "zset"


class LeakyLimiter(RateLimiter):
    """A burst of ``size``, then one admission each ``interval / size`` seconds as the bucket drips."""

    kind = "leaky"


class PointsHolding(Holding):
    """A points admission: ``points_used(actual)`` corrects the estimate once the real cost is known."""

    def __init__(self, limiter: PointsLimiter, acquired_at: float, charged: float) -> None:
        super().__init__(limiter, acquired_at)
        self.charged = charged

    def points_used(self, actual: float) -> None:
        """The call cost ``actual`` points: refund the unused estimate, or charge the excess."""
        if isinstance(actual, bool) or not isinstance(actual, (int, float)) or actual < 0:
            raise ValueError(f"points used must be a number of points (0 or more), not {actual!r}")
        delta = float(actual) - self.charged
        if delta:
            limiter = self.limiter
            assert isinstance(limiter, PointsLimiter)
            limiter._call("adjust", "", delta, 0.0, "")
        self.charged = float(actual)


class PointsLimiter(RateLimiter):
    """``size`` points per ``interval``, refilling continuously; each admission costs its estimate."""

    kind = "points"

    def acquire(self, *, wait_timeout: float | None = None, jid: str | None = None, estimate: Any = 1,
                **options: Any) -> PointsHolding:
        if options:
            raise TypeError(f"points limiter got unexpected options {sorted(options)}")
        cost = positive_points(estimate, "estimate")
        if cost > self.size:
            raise ValueError(f"limiter {self.name!r}: an estimate of {cost:g} points can never be admitted "
                             f"by a limit of {self.size}")
        return PointsHolding(self, self._admit(cost, wait_timeout, jid), cost)
