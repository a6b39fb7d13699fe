"""The one lifecycle every long-running worker component shares.

``start()`` and ``stop()`` are idempotent; waits go through a Condition so
``stop()`` takes effect at once instead of after a sleep; joins are bounded;
a thread that fails to join stays tracked, so a later ``start()`` can't run a
second copy beside a wedged first one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from djwork.redis.outage import tracker as outage

logger = logging.getLogger("djwork.worker")

JOIN_TIMEOUT = 5.0


class Sleeper:
    """An interruptible sleep: ``wait(seconds)`` returns early (True) once ``wake_all()`` ran."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._stopped = False

    @property
    def stopped(self) -> bool:
        return self._stopped

    def wait(self, seconds: float) -> bool:
        with self._condition:
            if not self._stopped and seconds > 0:
                self._condition.wait(seconds)
            return self._stopped

    def stop(self) -> None:
        # Flipped inside the lock the waiter re-checks under, so a stop can't
        # slip in between the check and the wait and be missed.
        with self._condition:
            self._stopped = True
            self._condition.notify_all()

    def reset(self) -> None:
        with self._condition:
            self._stopped = False


def safe_thread(name: str, target: Callable[[], None]) -> threading.Thread:
    """A daemon thread that logs, rather than silently loses, an exception that kills it."""

    def body() -> None:
        try:
            target()
        except BaseException:
            logger.exception("djwork thread %s died", name)
            raise

    thread = threading.Thread(target=body, name=f"djwork-{name}", daemon=True)
    thread.start()
    return thread


class PeriodicComponent:
    """Runs ``tick()`` every ``interval()`` seconds on its own thread until stopped."""

    name = "periodic"

    def __init__(self) -> None:
        self._sleeper = Sleeper()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def interval(self) -> float:
        raise NotImplementedError

    def first_delay(self) -> float:
        return self.interval()

    def tick(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        with self._lock:
            # Spawned inside the lock: two racing start() calls must not both
            # spawn, leaving an unrecorded loop that outlives stop().
            if self._thread is not None:
                return
            self._sleeper.reset()
            self._thread = safe_thread(self.name, self._run)

    def _run(self) -> None:
        if self._sleeper.wait(self.first_delay()):
            return
        while True:
            try:
                self.tick()
                outage.reset_streak(self.name)
            except Exception as error:
                # Once the outage is declared (djwork/redis/outage.py) its own lines say it: one
                # traceback per tick per loop was most of the ~120 lines 30 s of outage wrote.
                if outage.failed(self.name, error):
                    logger.debug("djwork %s tick failed", self.name, exc_info=True)
                else:
                    logger.exception("djwork %s tick failed", self.name)
            if self._sleeper.wait(max(self.interval(), outage.pause(self.name))):
                return

    def stop(self, timeout: float = JOIN_TIMEOUT) -> None:
        self._sleeper.stop()
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        thread.join(timeout)
        if not thread.is_alive():
            with self._lock:
                self._thread = None
        else:
            logger.warning("djwork %s did not stop within %.1fs", self.name, timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
