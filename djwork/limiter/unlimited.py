"""``limiter.unlimited()``: every limiter's interface, no limit and no Redis at all.

For tests, and for the tenants a limit should not apply to
(``limiter.bucket(...) if tenant.metered else limiter.unlimited()``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class UnlimitedHolding:
    def __init__(self, limiter: UnlimitedLimiter) -> None:
        self.limiter = limiter
        self.acquired_at = 0.0
        self.released = False

    def release(self) -> None:
        self.released = True

    def points_used(self, actual: float) -> None:
        """Accepted and ignored, so points code runs unchanged."""


class UnlimitedLimiter:
    kind = "unlimited"
    name = "unlimited"
    size = 0
    interval = 0.0
    wait_timeout = 0.0
    reschedule: int | None = None

    def __repr__(self) -> str:
        return "<UnlimitedLimiter>"

    def acquire(self, *, wait_timeout: float | None = None, jid: str | None = None,
                **options: Any) -> UnlimitedHolding:
        return UnlimitedHolding(self)

    @contextmanager
    def within_limit(self, *, wait_timeout: float | None = None, jid: str | None = None,
                     **options: Any) -> Iterator[UnlimitedHolding]:
        holding = UnlimitedHolding(self)
        try:
            yield holding
        finally:
            holding.release()


UNLIMITED = UnlimitedLimiter()
