"""djwork jobs the interop tests run in djwork workers (imported by dotted path, or through ALIASES).

Every job writes what it saw to the suite's private Redis under ``t:py:*``
(``t:mixed:py`` for the mixed fleet), so a test can count runs exactly. No
job here has a Ruby class name: a worker that imports this module must not
know the names the Ruby side runs (see tests/interop/ruby_jobs.py).
"""

from __future__ import annotations

import json
import os
import threading
import time

import redis as redis_py

import djwork

COUNTS = "t:py:counts"  # HASH key -> completed runs
STARTS = "t:py:starts"  # HASH key -> started runs (hold)
FAILS = "t:py:fails"  # HASH key -> runs of fail
LOG = "t:py:log"  # LIST of JSON facts, newest first
RELEASE = "t:py:release"  # STRING: when it exists, hold() returns
MIXED = "t:mixed:py"  # HASH key -> runs of mixed (the mixed fleet's Python half)
MIXED_BOUNCED = "t:mixed:py:bounced"  # HASH key -> error_class the payload carried in (failed elsewhere first)
MIXED_TRIES = "t:mixed:py:tries"  # HASH key -> failed attempts elsewhere before this run (retry_count + 1)

_client: redis_py.Redis | None = None
_lock = threading.Lock()


def conn() -> redis_py.Redis:
    global _client
    with _lock:
        if _client is None:
            _client = redis_py.Redis.from_url(os.environ["DJWORK_TEST_REDIS_URL"])
        return _client


def facts(client: redis_py.Redis, **match) -> list[dict]:
    """Facts from LOG (oldest first) whose fields equal ``match``."""
    rows = [json.loads(raw) for raw in reversed(client.lrange(LOG, 0, -1))]
    return [row for row in rows if all(row.get(k) == v for k, v in match.items())]


@djwork.job(bind=True)
def record(self, key, *rest, **kwargs):
    """Counts a run and logs what the worker handed the job (args, kwargs, the payload's fields)."""
    request = self.request
    fact = {
        "job": "record", "key": key, "args": [key, *rest], "kwargs": kwargs, "jid": request.id,
        "queue": request.queue, "retries": request.retries, "pid": os.getpid(), "time": time.time(),
        "payload": request.payload,
    }
    pipe = conn().pipeline(transaction=True)
    pipe.hincrby(COUNTS, str(key), 1)
    pipe.lpush(LOG, json.dumps(fact))
    pipe.execute()


@djwork.job
def fail(key):
    """Always raises (retry and backtrace come from the payload a Ruby client wrote)."""
    conn().hincrby(FAILS, str(key), 1)
    raise RuntimeError(f"interop fail {key}")


@djwork.job
def hold(key, seconds):
    """Keeps a processor thread busy until RELEASE exists or ``seconds`` passed."""
    conn().hincrby(STARTS, str(key), 1)
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline and not conn().exists(RELEASE):
        time.sleep(0.05)
    conn().hincrby(COUNTS, str(key), 1)


@djwork.job(bind=True)
def mixed(self, key):
    pipe = conn().pipeline(transaction=True)
    pipe.hincrby(MIXED, str(key), 1)
    error_class = self.request.payload.get("error_class")
    if error_class:  # a Ruby Sidekiq process took it first and sent it the retry way (NameError)
        pipe.hset(MIXED_BOUNCED, str(key), error_class)
        pipe.hset(MIXED_TRIES, str(key), int(self.request.payload.get("retry_count", 0)) + 1)
    pipe.execute()
