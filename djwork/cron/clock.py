"""The time leader election and periodic jobs run on: Redis's clock, optionally simulated for tests.

Production runs on ``Clock()``: simulated time *is* Redis's time, and the
host's clock only decides how long to sleep. ``DJWORK["TEST_CLOCK"]`` gives
tests two hooks:

- ``speed``, ``origin``, ``start``: simulated time = ``start + (real - origin) *
  speed``, the same formula in Python and in the Lua scripts (``lua_args``),
  so a test runs three simulated minutes of a ``* * * * *`` entry in seconds
  and every duration the subsystem uses (lease, renew, look, catch-up
  windows, lock TTLs) shrinks with it; a ``start`` far from ``origin`` is a
  process restarted after a downtime of the test's choosing;
- ``skew``: seconds added to this host's clock reading, as on a host whose
  clock is wrong. Nothing may decide on it: the claim reads Redis's TIME.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FIELDS = ("speed", "origin", "start", "skew")


@dataclass(frozen=True)
class Clock:
    speed: float = 1.0
    origin: float = 0.0
    start: float | None = None  # simulated epoch seconds at ``origin``; None: ``origin`` itself
    skew: float = 0.0

    @classmethod
    def from_setting(cls, value: Mapping[str, Any] | None) -> Clock:
        """``DJWORK["TEST_CLOCK"]`` (None or a dict of FIELDS) as a Clock; ValueError for a bad one."""
        if value is None:
            return cls()
        if not isinstance(value, Mapping) or not set(value) <= set(FIELDS):
            raise ValueError(f"None or a dict with keys among {', '.join(FIELDS)}")
        numbers = {}
        for name, number in value.items():
            if number is None and name == "start":
                continue
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                raise ValueError(f"a dict whose {name!r} is a number")
            numbers[name] = float(number)
        if numbers.get("speed", 1.0) <= 0:
            raise ValueError("a dict whose 'speed' is > 0")
        return cls(**numbers)

    def simulated(self, real_seconds: float) -> float:
        """Simulated epoch seconds at real (Redis) epoch ``real_seconds``."""
        start = self.origin if self.start is None else self.start
        return start + (real_seconds - self.origin) * self.speed

    def simulated_ms(self, real_seconds: float) -> int:
        return int(self.simulated(real_seconds) * 1000)

    def real_duration(self, simulated_seconds: float) -> float:
        """Real seconds that ``simulated_seconds`` take."""
        return simulated_seconds / self.speed

    def host_now(self) -> float:
        """This host's clock (with the test skew): for sleeping, never for deciding."""
        return time.time() + self.skew

    def lua_args(self) -> list[str]:
        """origin, start, speed: what the Lua scripts need to compute simulated time from TIME."""
        start = self.origin if self.start is None else self.start
        return [repr(self.origin), repr(start), repr(self.speed)]


def redis_now(conn: Any) -> float:
    """Redis's TIME as epoch seconds (one round trip)."""
    seconds, micros = conn.time()
    return seconds + micros / 1_000_000
