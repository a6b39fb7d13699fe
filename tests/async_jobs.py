"""Coroutine jobs (``async def``) run by real worker subprocesses in tests/test_worker_async.py.

They write what they saw to the suite's private Redis (the counters of
tests/worker_jobs.py), so a test counts runs exactly and reads how many ran
at once. Redis calls here are the blocking client's: each is a short round
trip, and what these jobs await is the event loop's own sleep.
"""

from __future__ import annotations

import asyncio
import time

import djwork
from tests import batch_jobs
from tests.worker_jobs import COUNTS, STARTS, conn

RUNNING = "t:async:running"  # STRING: coroutine jobs inside their body now
MOST = "t:async:most"  # STRING: the most that were inside at once

# One step: count this job in and raise the high-water mark, so no two jobs can both read a stale mark.
ENTER = """
local now = redis.call('INCR', KEYS[1])
if now > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], now) end
return now
"""


@djwork.job
async def gather(key, target):
    """Waits inside its body until ``target`` jobs were inside at once (or 60 s), then counts itself done.

    Only jobs running at the same time can reach the target: on threads alone,
    -c of them wait out the 60 s and the rest never start in time.
    """
    client = conn()
    client.eval(ENTER, 2, RUNNING, MOST)
    deadline = time.monotonic() + 60
    while int(client.get(MOST) or 0) < target and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    client.decr(RUNNING)
    client.hincrby(COUNTS, str(key), 1)


@djwork.job(retry=3)
async def fails(key):
    await asyncio.sleep(0)
    raise ValueError(f"coroutine job {key} failed")


@djwork.job
async def hangs_first_time(key):
    """Its first run awaits forever (TERM or kill -9 ends it); a later run completes at once."""
    started = conn().hincrby(STARTS, str(key), 1)
    if started == 1:
        await asyncio.Event().wait()
    conn().hincrby(COUNTS, str(key), 1)


# --- batches, unique locks and metrics of coroutine jobs (tests/test_worker_async.py) -------------------------

@djwork.job(bind=True, max_retries=5)
async def batch_member(self, key, fail_once=False):
    """A batch member on the loop (tests/batch_jobs.py's counters); ``fail_once`` retries its first run at once."""
    await asyncio.sleep(0.01)
    if fail_once and conn().set(f"t:async:failed:{key}", 1, nx=True):
        raise self.retry(countdown=0)
    conn().hincrby(batch_jobs.RUNS, str(key), 1)
    return key


def release_key(key) -> str:
    return f"t:async:release:{key}"


@djwork.job(unique_for=600)
async def unique_held(key):
    """Counts its start, then awaits (on the loop) until the test sets its release key (or 30 s)."""
    client = conn()
    client.hincrby(STARTS, str(key), 1)
    deadline = time.monotonic() + 30
    while not client.exists(release_key(key)) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    client.hincrby(COUNTS, str(key), 1)


@djwork.job
async def timed(key):
    """Awaits 50 ms: its recorded run time must cover the awaited body, not only the hand-off to the loop."""
    await asyncio.sleep(0.05)
    conn().hincrby(COUNTS, str(key), 1)
