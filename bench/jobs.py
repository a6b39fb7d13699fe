"""Benchmark job bodies: the same as the comparison table's (one INCR on a counter)."""

import time

import redis

import djwork

_clients: dict[str, redis.Redis] = {}


def _client() -> redis.Redis:
    import os

    url = os.environ["BENCH_REDIS_URL"]
    client = _clients.get(url)
    if client is None:
        client = _clients[url] = redis.Redis.from_url(url)
    return client


@djwork.job(queue="bench")
def incr():
    _client().incr("bench:counter")


@djwork.job(queue="bench")
def probe(sent_at):
    """Records pickup latency: start of the job minus the moment it was pushed."""
    _client().rpush("bench:latency", time.time() - sent_at)


_nearly_noop_runs = [0]


@djwork.job(queue="bench")
def nearly_noop():
    """djwork's own cost per job: no Redis call but one INCRBY per 100 runs (how the drain sees progress)."""
    _nearly_noop_runs[0] += 1
    if _nearly_noop_runs[0] % 100 == 0:
        _client().incrby("bench:counter", 100)
