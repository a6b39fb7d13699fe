"""KeyGuard: the worker's side of the key guard (djwork/redis/key_repair.py).

Sweeps every djwork key it can list at boot and about once a minute, and
the keys reported to the guard (djwork.redis.key_reports) every few seconds,
moving aside the ones that hold the wrong type, each move logged at ERROR. ``repair(key)`` is
for a thread that just met a WRONGTYPE on ``key`` (a queue taker, a fetch):
it quarantines the key now instead of at the next sweep. Repairs of one key
are limited to one a second per process, shared by every caller (the
module-level ``repair`` too), so a thread failing in a tight loop can't
turn into a stream of Lua calls against Redis.
"""

from __future__ import annotations

import logging
import random
import threading
import time

from djwork.redis import key_repair as key_guard
from djwork.settings.conf import Config
from djwork.worker.component import PeriodicComponent

logger = logging.getLogger("djwork.worker")

SWEEP_INTERVAL = 60.0
# Reported keys are checked this often: one ZRANGE when there are none, and a `unique:` lock
# rewritten as a HASH fails its job's every delay() until it is moved.
REPORTED_INTERVAL = 2.0
REPAIR_INTERVAL = 1.0  # seconds between two repairs of the same key
THROTTLE_MEMORY = 1024  # keys remembered; past it the stale entries are dropped


class RepairThrottle:
    """At most one repair per key per ``interval`` seconds; thread-safe."""

    def __init__(self, interval: float = REPAIR_INTERVAL) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}

    def admit(self, key: str) -> bool:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                return False
            if len(self._last) >= THROTTLE_MEMORY:
                # Bounded: a flood of distinct bad keys must not grow this forever.
                self._last = {name: when for name, when in self._last.items() if now - when < self.interval}
            self._last[key] = now
            return True


_throttle = RepairThrottle()


def repair(key: str, expected: str | None = None) -> str | None:
    """Quarantine ``key`` if it holds the wrong type (rate-limited per key); the copy's name, or None.

    None also when the call was throttled or the repair failed (logged):
    the caller met an error already and must not get a second one from here.
    """
    if not _throttle.admit(key):
        return None
    try:
        return key_guard.quarantine_if_wrong_type(key, expected)
    except Exception as error:
        logger.error("djwork: could not quarantine %s: %s", key, error)
        return None


class KeyGuard(PeriodicComponent):
    name = "key-guard"

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config
        self._next_sweep = 0.0  # monotonic; 0 sweeps at the first tick (boot)

    def interval(self) -> float:
        return REPORTED_INTERVAL

    def first_delay(self) -> float:
        return 0.0

    def tick(self) -> None:
        if time.monotonic() >= self._next_sweep:
            self.sweep()
            # Jittered: a fleet started together must not sweep in lockstep.
            self._next_sweep = time.monotonic() + SWEEP_INTERVAL * (0.75 + random.random() / 2)
        key_guard.repair_reported()

    def sweep(self) -> list[tuple[str, str]]:
        """One sweep (key_guard.sweep with this worker's queues); each move is logged by the guard."""
        return key_guard.sweep(self.config)

    def repair(self, key: str, expected: str | None = None) -> str | None:
        """For a thread that met WRONGTYPE on ``key``: see the module-level ``repair``."""
        return repair(key, expected)
