"""The job bodies every system runs, so all of them do the same work: one INCR, or one RPUSH of a latency.

Kept free of Django and djwork imports so the other systems' workers load
nothing they would not load in their own projects (their RSS stays theirs).
"""

from __future__ import annotations

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


def probe(sent_at: float) -> None:
    """Pickup latency: the moment the job body starts minus the moment the client pushed it."""
    client().rpush(LATENCY, time.time() - sent_at)
