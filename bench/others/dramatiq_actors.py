"""Dramatiq broker and actors for bench/compare.py: RedisBroker, default middleware, queue "bench"."""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench.others import counter

broker = RedisBroker(url=os.environ["BENCH_REDIS_URL"])
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name="bench", actor_name="bench_incr")
def incr() -> None:
    counter.incr()


@dramatiq.actor(queue_name="bench", actor_name="bench_noop")
def noop() -> None:
    counter.noop()


@dramatiq.actor(queue_name="bench", actor_name="bench_probe")
def probe(sent_at: float) -> None:
    counter.probe(sent_at)
