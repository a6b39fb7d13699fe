"""Benchmark job bodies for djwork: the comparison table's own (bench/others/counter.py), as djwork jobs."""

import djwork
from bench.others import counter


@djwork.job(queue="bench")
def incr():
    counter.incr()


@djwork.job(queue="bench")
def probe(sent_at):
    """Records pickup latency: start of the job minus the moment it was pushed."""
    counter.probe(sent_at)


@djwork.job(queue="bench")
def nearly_noop():
    """djwork's own cost per job: no Redis call but one INCRBY per 100 runs; the other systems' no-op body."""
    counter.noop()


# Issue #13's drain comparison (bench/limiter.py --drain): one body run plain, under limiter.unlimited(), and
# under a real limiter that never refuses, so what separates their drain rates is the limiter alone.
import itertools  # noqa: E402

from djwork import limiter  # noqa: E402

# next() on a count is one C call, so the worker's threads cannot lose a run between them as "+= 1" can;
# a lost run would leave the drain's counter short of the total forever.
_drain_runs = itertools.count(1)

# 10**9 admissions per sliding second: never refuses, yet pays a real limiter's Lua call on every job.
NEVER_REFUSES = limiter.window("bench-never", 10**9, 1)


def _drain_body() -> None:
    """No Redis call but one INCRBY per 100 runs (how the drain sees progress), like nearly_noop."""
    if next(_drain_runs) % 100 == 0:
        counter.client().incrby(counter.COUNTER, 100)


@djwork.job(queue="bench")
def drain_plain():
    _drain_body()


@djwork.job(queue="bench", limits=[limiter.unlimited()])
def drain_unlimited():
    _drain_body()


@djwork.job(queue="bench", limits=[NEVER_REFUSES])
def drain_window():
    _drain_body()


@djwork.job(queue="bench")
def batch_done(status):
    """bench/batch.py's success callback: the drain of a batch ends when it has run."""
    counter.client().set("bench:batch-done", status["total"])


# bench/async_jobs.py: I/O-bound coroutine jobs on the worker's event loop (docs/performance.md).
import asyncio  # noqa: E402

_sleep_runs = itertools.count(1)


@djwork.job(queue="bench")
async def sleep_async(seconds):
    """Awaits ``seconds`` (I/O standing in); one INCRBY per 100 runs, as _drain_body, off the loop's hot path."""
    await asyncio.sleep(seconds)
    if next(_sleep_runs) % 100 == 0:
        counter.client().incrby(counter.COUNTER, 100)


# bench/footprint.py: the kinds of job whose Redis footprint it measures (the same body as drain_plain).
BOUNDED_FIVE = limiter.concurrent("bench-five", 5, wait_timeout=60, lock_timeout=300)


@djwork.job(queue="bench", unique_for=3600)
def drain_unique(n):
    _drain_body()


@djwork.job(queue="bench", limits=[BOUNDED_FIVE])
def drain_concurrent():
    _drain_body()


@djwork.job(queue="bench")
def noop():
    """bench/cluster.py's job: nothing at all; the drain's end is read from the queues."""
