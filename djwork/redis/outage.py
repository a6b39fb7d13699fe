"""One process's view of a Redis outage: said once when it starts, reminded each minute, said when it ends.

Without it every loop that talks to Redis (heartbeat, fetch, takers, poller,
reaper, leader) logged each failed round and retried at its own pace: a worker
wrote ~120 lines in 30 s of outage. A single cut command is not an outage: the
first failure of a loop still logs its own line and retries at once; only once
failures persist (a loop fails twice in a row, or failures last OUTAGE_AFTER
seconds with no success between) is the outage declared, the loops' own lines
go to DEBUG, and the loops pause with a growing, jittered delay. A dial the
replay policy retried and that failed again also declares it (Redis refused
twice, not one lost reply), which keeps the policy's per-retry lines to the
first ones.

Only a running worker (its Launcher) turns the tracker on: a web process or a
shell keeps every retry line, its commands being few and each one worth a line.
"""

from __future__ import annotations

import logging
import random
import threading
import time

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger("djwork.redis")

OUTAGE_AFTER = 1.0  # seconds of failures, with no success between, that make an outage
REMINDER_EVERY = 60.0  # seconds between "still unreachable" lines
FIRST_PAUSE = 1.0  # a loop's pause after its second failure in a row; doubles from there
MAX_PAUSE = 30.0


def is_outage_error(error: BaseException) -> bool:
    """A failure to reach Redis (dial, lost connection, timeout), not a bad command or a wrong key type."""
    return isinstance(error, (RedisConnectionError, RedisTimeoutError))


class OutageTracker:
    """Shared by every loop of the process; each loop reports its failures and successes under its own name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streaks: dict[str, int] = {}
        self._failing_since: float | None = None
        self._declared = False
        self._reminded_at = 0.0
        self._dial_failures = 0
        self._shutting_down = False
        self.enabled = False
        self.location = "(not configured)"
        self.max_pause = MAX_PAUSE

    def configure(self, location: str, max_pause: float = MAX_PAUSE) -> None:
        """Turn on. ``location``: the Redis URL without its password. ``max_pause``: a loop's longest pause."""
        self.location = location
        self.max_pause = max(FIRST_PAUSE, min(MAX_PAUSE, max_pause))
        self.enabled = True

    def shutting_down(self) -> None:
        """The worker is draining: its first failure to reach Redis is the outage, said once.

        A shutdown has seconds, not the streaks that tell a cut connection from
        an outage: without this, each step (requeue, stats, presence, every loop's
        last tick) logged its retries and a traceback, ~300 lines in 2 s.
        """
        with self._lock:
            self._shutting_down = True

    def disable(self) -> None:
        """Back to every line at its own level (the worker stopped); forgets any outage in progress."""
        with self._lock:
            self.enabled = False
            self._shutting_down = False
            self._declared = False
            self._failing_since = None
            self._dial_failures = 0
            self._streaks.clear()

    @property
    def declared(self) -> bool:
        """True while an outage is on: loops log their own failures at DEBUG."""
        return self._declared

    def dial_failed(self, error: BaseException) -> None:
        """The replay policy could not dial; the second such failure in a row, no success between, is an outage."""
        if not self.enabled:
            return
        with self._lock:
            self._dial_failures += 1
            if self._failing_since is None:
                self._failing_since = time.monotonic()
            if (self._dial_failures >= 2 or self._shutting_down) and not self._declared:
                self._declare(error)

    def _declare(self, error: BaseException) -> None:
        self._declared = True
        self._reminded_at = time.monotonic()
        if self._shutting_down:
            logger.warning("djwork: Redis at %s is unreachable during the shutdown (%s: %s); what the shutdown "
                           "could not do is said once, when it ends", self.location, type(error).__name__, error)
            return
        logger.warning("djwork: Redis at %s is unreachable (%s: %s); retrying with pauses up to %.0fs, "
                       "a reminder each minute", self.location, type(error).__name__, error, self.max_pause)

    def failed(self, loop: str, error: BaseException) -> bool:
        """Record ``loop``'s failure; True if it belongs to a declared outage (the caller logs it at DEBUG)."""
        if not self.enabled or not is_outage_error(error):
            return False
        now = time.monotonic()
        with self._lock:
            streak = self._streaks[loop] = self._streaks.get(loop, 0) + 1
            if self._failing_since is None:
                self._failing_since = now
            lasted = now - self._failing_since
            if not self._declared:
                if streak < 2 and lasted < OUTAGE_AFTER and not self._shutting_down:
                    return False
                self._declare(error)
                return True
            if now - self._reminded_at >= REMINDER_EVERY:
                self._reminded_at = now
                logger.warning("djwork: Redis at %s still unreachable after %.0fs (%s)", self.location, lasted, error)
            return True

    def reset_streak(self, loop: str) -> None:
        """``loop`` did a round without error, which need not have reached Redis: its streak ends, not the outage."""
        if loop in self._streaks:
            with self._lock:
                self._streaks.pop(loop, None)

    def succeeded(self, loop: str) -> bool:
        """``loop`` reached Redis: the first success after a declared outage says Redis is back (returns True)."""
        if self._failing_since is None and not self._streaks:
            return False  # the common case, no lock: nothing was failing
        with self._lock:
            self._streaks.pop(loop, None)
            if self._failing_since is None:
                return False
            lasted = time.monotonic() - self._failing_since
            declared = self._declared
            self._failing_since = None
            self._declared = False
            self._dial_failures = 0
            self._streaks.clear()
        if declared:
            logger.warning("djwork: Redis is back after %.1fs (%s)", lasted, self.location)
        return declared

    def pause(self, loop: str) -> float:
        """Extra seconds ``loop`` waits before its next try: 0 unless an outage is declared, then 1, 2, 4... s."""
        if not self._declared:
            return 0.0
        streak = self._streaks.get(loop, 0)
        if streak < 2:
            return 0.0
        delay = min(self.max_pause, FIRST_PAUSE * 2 ** (streak - 2))
        # Jitter: the workers of a fleet would otherwise all dial the returning Redis in the same instant.
        return delay * random.uniform(0.5, 1.0)


tracker = OutageTracker()
