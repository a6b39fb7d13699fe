"""Jobs run by real worker subprocesses in tests/test_worker_*.py.

Every job writes what it saw to the suite's private Redis under ``t:*`` keys,
so a test can count runs exactly: a counter per job key tells exactly-once
from lost from duplicated. Workers import this module by dotted path the
first time they meet one of its jobs.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time

import redis as redis_py

import djwork
from tests.support.redis_cluster import client_for_url

RUNS = "t:runs"  # STRING: total runs of record-style jobs
COUNTS = "t:counts"  # HASH key -> completed runs
STARTS = "t:starts"  # HASH key -> started runs
LOG = "t:log"  # LIST of JSON facts written by jobs (newest first)
RELEASE = "t:release:"  # + key: STRING whose existence ends held(key)


_client: redis_py.Redis | None = None
_client_lock = threading.Lock()


def conn() -> redis_py.Redis:
    """One client per process, made under a lock: a second client lost to a race would close its
    pool when garbage-collected, under a job still using it."""
    global _client
    with _client_lock:
        if _client is None:
            # The suite's private server only; the env var is always set for workers.
            _client = client_for_url(os.environ["DJWORK_TEST_REDIS_URL"])
        return _client


def note(**facts) -> None:
    conn().lpush(LOG, json.dumps({"pid": os.getpid(), "time": time.time(), **facts}))


def notes(client: redis_py.Redis, **match) -> list[dict]:
    """Facts from LOG (oldest first) whose fields equal ``match``."""
    rows = [json.loads(raw) for raw in reversed(client.lrange(LOG, 0, -1))]
    return [row for row in rows if all(row.get(k) == v for k, v in match.items())]


def _count(key) -> None:
    pipe = conn().pipeline(transaction=False)
    pipe.incr(RUNS)
    pipe.hincrby(COUNTS, str(key), 1)
    pipe.execute()


@djwork.job
def record(key):
    _count(key)


@djwork.job
def where(key):
    """Notes the name of the thread the job ran on."""
    note(key=key, thread=threading.current_thread().name)
    _count(key)


@djwork.job
def slow(key, seconds):
    conn().hincrby(STARTS, str(key), 1)
    time.sleep(seconds)
    _count(key)


@djwork.job
def held(key):
    """Runs until the test sets RELEASE + key: busy exactly as long as the test needs it, however slow the machine."""
    conn().hincrby(STARTS, str(key), 1)
    while not conn().exists(RELEASE + str(key)):
        time.sleep(0.05)
    _count(key)


@djwork.job
def stamp(key):
    """Records when it ran, for scheduling tests."""
    note(job="stamp", key=key)


@djwork.job
def kill_self(key):
    """A poison pill: kills whatever process runs it, every time."""
    note(job="kill_self", key=key)
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(5)


@djwork.job(retry=2)
def always_fail(key):
    note(job="always_fail", key=key)
    raise RuntimeError(f"always_fail {key} fails")


@djwork.job(bind=True, max_retries=2)
def bound_retry(self, key):
    note(job="bound_retry", key=key, retries=self.request.retries)
    raise self.retry(countdown=1)


@djwork.job(autoretry_for=(ValueError,), retry_backoff=1, retry_jitter=False, max_retries=2)
def auto_retry(key, kind):
    note(job="auto_retry", key=key, kind=kind)
    if kind == "value":
        raise ValueError(f"auto_retry {key}")
    raise TypeError(f"auto_retry {key} is not retried")


@djwork.job
async def async_record(key):
    await asyncio.sleep(0.01)
    note(job="async_record", key=key, loop=type(asyncio.get_running_loop()).__name__)


@djwork.job(bind=True)
def whoami(self, key, extra=None):
    request = self.request
    note(job="whoami", key=key, id=request.id, retries=request.retries, queue=request.queue,
         args=request.args, kwargs=request.kwargs, payload_jid=request.payload.get("jid"))


@djwork.job(retry=1)
def exits(key):
    """Calls sys.exit() inside the job: a failure of the job, not of the worker."""
    note(job="exits", key=key)
    sys.exit(3)


@djwork.job
def finish_when_requeued(key):
    """Outlives its worker's shutdown deadline, then finishes as soon as the deadline's requeue put it back."""
    client = conn()
    client.hincrby(STARTS, str(key), 1)
    if client.hget(STARTS, str(key)) == b"1":
        for _ in range(6000):  # bounded: 60 s
            if client.llen("queue:default"):
                break
            time.sleep(0.01)
    _count(key)


TIMES = "t:times"  # LIST of Redis TIME readings, one per run of server_time


@djwork.job
def server_time(key):
    """Appends the Redis server's clock at its start: one clock for every process, read after the job started."""
    seconds, microseconds = conn().time()
    conn().rpush(TIMES, f"{seconds + microseconds / 1e6:.6f}")
