"""Jobs run by real worker subprocesses in tests/test_time_limits.py.

Each records what it saw in the suite's private Redis (``tl:*`` keys), so a
test can tell a run from a second run, and a cleanup from none.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time

import redis as redis_py

import djwork
from djwork.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from tests.support.redis_cluster import client_for_url

STARTS = "tl:starts"  # HASH key -> started runs
COUNTS = "tl:counts"  # HASH key -> completed runs
EVENTS = "tl:events"  # LIST of JSON facts (newest first)
RELEASE = "tl:release:"  # STRING per key: a stuck job returns once it exists

_client: redis_py.Redis | None = None
_client_lock = threading.Lock()


def conn() -> redis_py.Redis:
    global _client
    with _client_lock:
        if _client is None or getattr(_client, "_djwork_pid", None) != os.getpid():
            _client = client_for_url(os.environ["DJWORK_TEST_REDIS_URL"])  # per (forked) process
            _client._djwork_pid = os.getpid()
        return _client


def note(key: str, event: str) -> None:
    conn().lpush(EVENTS, json.dumps({"key": key, "event": event, "pid": os.getpid()}))


def events(client: redis_py.Redis, key: str) -> list[str]:
    rows = [json.loads(raw) for raw in reversed(client.lrange(EVENTS, 0, -1))]
    return [row["event"] for row in rows if row["key"] == key]


@djwork.job(soft_time_limit=0.5)
def spin(key):
    """A pure-Python busy loop: the soft limit's exception ends it, and its cleanup runs."""
    conn().hincrby(STARTS, key, 1)
    try:
        count = 0
        while True:
            count += 1
    except SoftTimeLimitExceeded:
        note(key, "soft cleanup")
    conn().hincrby(COUNTS, key, 1)


@djwork.job(soft_time_limit=0.5)
async def wait_async(key):
    """A coroutine job: the soft limit surfaces at its await; its loop then serves the next job."""
    conn().hincrby(STARTS, key, 1)
    try:
        await asyncio.sleep(60)
    except SoftTimeLimitExceeded:
        note(key, "soft cleanup")
    await asyncio.sleep(0)  # the loop still works after the limit
    conn().hincrby(COUNTS, key, 1)


@djwork.job
def spin_plain(key):
    """No limit of its own: ``spin_plain.set(soft_time_limit=...)`` gives it one."""
    spin.func(key)


@djwork.job(time_limit=1, retry=3)
def stuck(key):
    """Sleeps until released, ignoring the hard limit's exception: a thread the worker must abandon."""
    conn().hincrby(STARTS, key, 1)
    while True:
        # The check inside the try too: the hard limit's exception lands wherever the thread is, and
        # under load it landed in the Redis round trip, ended the job at once and left no events.
        try:
            if conn().exists(RELEASE + key):
                break
            time.sleep(0.1)
        except TimeLimitExceeded:
            note(key, "hard exception seen")
    note(key, "finished late")
    conn().hincrby(COUNTS, key, 1)


@djwork.job
def sleeps(key, seconds):
    """Blocked in time.sleep (C) for ``seconds``; the TIME_LIMIT setting is its only limit."""
    conn().hincrby(STARTS, key, 1)
    time.sleep(seconds)
    conn().hincrby(COUNTS, key, 1)


@djwork.job
def record(key):
    conn().hincrby(COUNTS, key, 1)
