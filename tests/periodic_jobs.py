"""Jobs the periodic-entry tests configure (tests/test_periodic*.py), in worker processes and in the test's own.

``tick`` is usually enqueued on a queue no worker reads, so the tests count
what the leaders enqueued. ``long_tick`` runs, and records each run's start
and end on Redis's clock, so a test can tell whether two runs overlapped.
"""

from __future__ import annotations

import json
import os
import time

import djwork
from tests.process_jobs import conn

RUNS = "pt:runs"  # LIST of JSON {jid, event: start|end, at (Redis time), pid}


def _redis_time() -> float:
    seconds, micros = conn().time()
    return seconds + micros / 1_000_000


@djwork.job(queue="periodic-out")
def tick(note=None):
    """Enqueued, never run, by most tests."""


@djwork.job(bind=True, queue="periodic-work", retry=False)
def long_tick(self, seconds):
    conn().rpush(RUNS, json.dumps({"jid": self.request.id, "event": "start", "at": _redis_time(),
                                   "pid": os.getpid()}))
    time.sleep(seconds)
    conn().rpush(RUNS, json.dumps({"jid": self.request.id, "event": "end", "at": _redis_time(), "pid": os.getpid()}))


def runs(redis) -> list[dict]:
    return [json.loads(raw) for raw in redis.lrange(RUNS, 0, -1)]
