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
