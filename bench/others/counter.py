"""The job bodies every system runs, so all of them do the same work: one INCR, a no-op, or one RPUSH of a latency.

Kept free of Django and djwork imports so the other systems' workers load
nothing they would not load in their own projects (their RSS stays theirs).
"""

from __future__ import annotations

import itertools
import os
import time

import redis

COUNTER = "bench:counter"
LATENCY = "bench:latency"

_clients: dict[str, redis.Redis] = {}


def client() -> redis.Redis:
    """One redis-py client (and connection pool) per process, shared by the worker's threads."""
    url = os.environ["BENCH_REDIS_URL"]
    found = _clients.get(url)
    if found is None:
        found = _clients[url] = redis.Redis.from_url(url)
    return found


def incr() -> None:
    client().incr(COUNTER)


# next() on a count is one C call, so a worker's threads cannot lose a run between them as "+= 1" can;
# a lost run would leave the drain's counter short of its target forever. One count per process.
_noop_runs = itertools.count(1)


def noop() -> None:
    """The framework's own cost per job: no Redis call but one INCRBY per 100 runs (how the drain sees progress).

    Each process counts its own runs, so up to 99 runs per worker process never reach the counter:
    bench/compare.py ends a no-op drain at the last full hundred it can be sure of.
    """
    if next(_noop_runs) % 100 == 0:
        client().incrby(COUNTER, 100)


def probe(sent_at: float) -> None:
    """Pickup latency: the moment the job body starts minus the moment the client pushed it."""
    client().rpush(LATENCY, time.time() - sent_at)
