"""Jobs run by the process-model tests (tests/test_swarm.py, test_embedded.py, test_health.py).

Each run bumps a per-key counter in the suite's private Redis, so a test can
tell exactly-once from lost from duplicated, and records the pid that ran
it, so a test can tell *which* process (swarm child, gunicorn worker) did.
"""

from __future__ import annotations

import os
import threading
import time

import redis as redis_py

import djwork
from tests.support.redis_cluster import client_for_url

COUNTS = "p:counts"  # HASH key -> completed runs
STARTS = "p:starts"  # HASH key -> started runs
PIDS = "p:pids"  # HASH key -> pid of the last process that completed it

_client: redis_py.Redis | None = None
_client_lock = threading.Lock()


def conn() -> redis_py.Redis:
    global _client
    with _client_lock:
        if _client is None or getattr(_client, "_djwork_pid", None) != os.getpid():
            # Per process: a forked child must not share its parent's socket.
            _client = client_for_url(os.environ["DJWORK_TEST_REDIS_URL"])
            _client._djwork_pid = os.getpid()
        return _client


def _done(key: str) -> None:
    pipe = conn().pipeline(transaction=False)
    pipe.hincrby(COUNTS, key, 1)
    pipe.hset(PIDS, key, os.getpid())
    pipe.execute()


@djwork.job
def record(key):
    _done(str(key))


@djwork.job
def slow(key, seconds):
    conn().hincrby(STARTS, str(key), 1)
    time.sleep(seconds)
    _done(str(key))
