"""OverLimit: what a limiter raises when its limit can't be had within ``wait_timeout``."""

from __future__ import annotations


class OverLimit(Exception):  # Sidekiq Enterprise's name, which users search for
    """The limiter ``name`` refused; ``retry_after`` is when, in seconds, trying again can succeed.

    The limiter computed it on Redis's clock: the next calendar period
    (bucket), when the oldest admission leaves the window (window), the next
    drip (leaky), when enough points refill (points), or for a concurrent
    limiter the sooner of the oldest lease running out and the limiter's
    ``wait_timeout`` (a slot frees whenever its holder finishes, which no
    clock can tell).
    """

    def __init__(self, name: str, retry_after: float, kind: str = "") -> None:
        self.name = name
        self.limiter = name
        self.retry_after = max(0.0, float(retry_after))
        self.kind = kind
        super().__init__(f"limiter {name!r} is over its limit; retry in {self.retry_after:.3f} s")

    def __reduce__(self) -> tuple[type, tuple[str, float, str]]:
        # Picklable with its fields (an exception's default pickling passes only the message).
        return (type(self), (self.name, self.retry_after, self.kind))
