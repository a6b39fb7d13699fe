"""What every limiter shares: its name and options, its metadata, and the ``within_limit`` block.

A limiter object is configuration only: building one sends nothing to Redis,
so per-tenant limiters can be built per call (``limiter.bucket(f"api:{tenant}", ...)``).
The first acquisition registers it (one Lua call per decision, see lua/limiter_*.lua).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from djwork.limiter.names import DEFAULT_TTL, DEFAULT_WAIT_TIMEOUT, positive_size, seconds, validate_name

# Expired registry names one call may remove: the sweep rides on every acquisition, so its cost
# must stay bounded however many per-tenant names expired at once.
SWEEP_BATCH = 100


class Holding:
    """What ``within_limit`` yields: the admission, released when the block ends."""

    def __init__(self, limiter: Limiter, acquired_at: float) -> None:
        self.limiter = limiter
        self.acquired_at = acquired_at  # Redis time of the admission (seconds)
        self.released = False

    def release(self) -> None:
        """Give the admission back (a slot for ``concurrent``; nothing to give for the rate kinds)."""
        self.released = True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.limiter.name!r} at {self.acquired_at:.6f}>"


class Limiter:
    """A named limit shared by every process on the same Redis."""

    kind = ""

    def __init__(self, name: str, size: int, interval: float, *, wait_timeout: Any = DEFAULT_WAIT_TIMEOUT,
                 ttl: Any = DEFAULT_TTL, reschedule: int | None = None) -> None:
        self.name = validate_name(name)
        self.size = positive_size(size)
        self.interval = interval
        self.wait_timeout = seconds(wait_timeout, "wait_timeout", allow_zero=True)
        self.ttl = seconds(ttl, "ttl")
        if reschedule is not None and (isinstance(reschedule, bool) or not isinstance(reschedule, int)
                                       or reschedule < 0):
            raise ValueError(f"reschedule must be a whole number of reschedules (0 or more), not {reschedule!r}")
        # How many times a job over this limit goes back to wait before it takes the normal retry path
        # (None: the LIMITER_MAX_RESCHEDULES setting). Read by the worker, not by the limiter.
        self.reschedule = reschedule
        if self.ttl < self.interval:
            raise ValueError(f"limiter {name!r}: ttl {self.ttl:g} s is shorter than its interval "
                             f"{self.interval:g} s; its state would expire while it still counts")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} size={self.size} interval={self.interval:g}>"

    def metadata(self) -> list[str]:
        """Field/value pairs for the limiter's metadata HASH (what status pages show)."""
        return ["kind", self.kind, "size", str(self.size), "interval", repr(float(self.interval)),
                "ttl", repr(self.ttl), "wait_timeout", repr(self.wait_timeout)]

    def wait_budget(self, wait_timeout: Any) -> float:
        return self.wait_timeout if wait_timeout is None else seconds(wait_timeout, "wait_timeout", allow_zero=True)

    def acquire(self, *, wait_timeout: float | None = None, jid: str | None = None, **options: Any) -> Holding:
        """Wait up to ``wait_timeout`` (default: the limiter's) for an admission; ``OverLimit`` if none came.

        The worker calls this (and ``Holding.release``) around a job; ``jid`` names the job in the
        limiter's status (who holds a slot, who waits).
        """
        raise NotImplementedError

    @contextmanager
    def within_limit(self, *, wait_timeout: float | None = None, jid: str | None = None,
                     **options: Any) -> Iterator[Holding]:
        holding = self.acquire(wait_timeout=wait_timeout, jid=jid, **options)
        try:
            yield holding
        finally:
            holding.release()
