"""IsolationGate: at most one isolated job (recovered from dead processes more than once) per process at a time.

Shared by every capsule's fetcher (fetch.py) and by the idle takers (takers.py).
"""

from __future__ import annotations

import threading
import time


class IsolationGate:
    """One isolated job at a time per process, shared by every capsule's fetcher.

    A token is reserved before a fetch (so two capsules fetching at once can't
    both take one) and settled with what the fetch took; a finished isolated
    job gives it back. An idle process's takers also look at the isolated
    lists (their blocking take watches only the queue), each list at most
    once per ``check_interval``.
    """

    def __init__(self, check_interval: float = 2.0) -> None:
        self._lock = threading.Lock()
        self._held = False
        self.check_interval = check_interval
        self._next_check: dict[str, float] = {}

    def due(self, list_key: str) -> bool:
        """Whether an idle taker should look at this isolated list now (each list at most once per interval).

        Per list: one clock for the whole process let the takers of other
        queues spend every look, and an isolated job waited 87 s on an idle worker.
        """
        with self._lock:
            now = time.monotonic()
            if self._held or now < self._next_check.get(list_key, 0.0):
                return False
            self._next_check[list_key] = now + self.check_interval
            return True

    def reserve(self) -> int:
        with self._lock:
            if self._held:
                return 0
            self._held = True
            return 1

    def settle(self, reserved: int, taken: int) -> None:
        if reserved and not taken:
            self.release()

    def release(self) -> None:
        with self._lock:
            self._held = False
