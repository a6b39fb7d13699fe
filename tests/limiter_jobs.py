"""Jobs with rate limiters, run by real workers in tests/test_limiter_worker.py.

Each job stamps its start with Redis's clock (``t:limit-starts``) and keeps
the highest number running at once (``t:limit-max``), so a test checks the
limit cluster-wide, across processes, from what the jobs themselves saw.
"""

from __future__ import annotations

import time

import djwork
from djwork import limiter
from djwork.worker.limits import current_holdings
from tests.worker_jobs import STARTS, _count, conn

STARTED_AT = "t:limit-starts"  # LIST of Redis TIME (seconds, float) at each start
ADMITTED_AT = "t:limit-admitted"  # LIST of each admission's Redis time (Holding.acquired_at)
RUNNING = "t:limit-running"  # STRING: jobs inside their body now
HIGHEST = "t:limit-max"  # STRING: the most ever inside at once

# Raise RUNNING and keep HIGHEST in one step, so two jobs starting together can't both miss the max.
ENTER = """
local now = redis.call('INCR', KEYS[1])
if now > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], now) end
local t = redis.call('TIME')
redis.call('RPUSH', KEYS[3], t[1] .. '.' .. string.format('%06d', tonumber(t[2])))
return now
"""

three_at_once = limiter.concurrent("test-three", 3, wait_timeout=1, lock_timeout=300)
ten_a_second = limiter.window("test-ten", 10, 1)
# A short lease: a holder stalled by a test outlives it before the reaper takes its process for dead.
stall_three = limiter.concurrent("test-stall", 3, wait_timeout=30, lock_timeout=1)


def _body(key, seconds: float) -> None:
    client = conn()
    client.hincrby(STARTS, str(key), 1)
    client.eval(ENTER, 3, RUNNING, HIGHEST, STARTED_AT)
    # The limiter admitted the job at acquired_at (Redis time): what a rate limit bounds. The body's
    # own stamp above comes a few ms later, by however long the thread took to get here.
    for holding in current_holdings():
        client.rpush(ADMITTED_AT, repr(holding.acquired_at))
    try:
        time.sleep(seconds)
    finally:
        client.decr(RUNNING)
    _count(key)


@djwork.job(limits=[three_at_once])
def concurrent_job(key, seconds):
    _body(key, seconds)


@djwork.job(limits=[three_at_once])
def concurrent_long_once(key, seconds):
    """Long on its first run (a test kills the worker under it), short afterwards."""
    first = conn().hget(STARTS, str(key)) is None
    _body(key, seconds if first else 0.0)


@djwork.job(limits=[stall_three])
def stalled_once(key, seconds):
    """Long on its first run (a test stalls the worker under it with SIGSTOP), short afterwards."""
    first = conn().hget(STARTS, str(key)) is None
    _body(key, seconds if first else 0.0)


@djwork.job(limits=[ten_a_second])
def windowed_job(key):
    _body(key, 0.0)


@djwork.job(rate_limit="20/s")
def celery_rated_job(key):
    _body(key, 0.0)


@djwork.job(retry=False)
def refused_inside(key):
    """A limit the body can never have: OverLimit escapes it every time."""
    conn().hincrby(STARTS, str(key), 1)
    raise limiter.OverLimit("test-never", 0.05, "window")
