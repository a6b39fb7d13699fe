"""Enqueue throughput: djwork's delay()/delay_many() against a raw redis-py LPUSH loop.

The "unique delay()" row is a unique job (``unique_for``, docs/unique.md): its
lock's SET NX and the push in one Lua step. Below the table, the round trips
per call of delay() and of the unique delay() (counted at djwork's one wire
exchange function) and the unique row's rate as a share of the plain one's.

    .venv/bin/python -m bench.enqueue [--count 20000] [--batch 1000] [--repeat 3] [--profile delay]

Starts its own private redis-server (never the machine's Redis), configures
Django with nothing but the djwork app, and prints one table row per method:
jobs/s is the best of ``--repeat`` runs, "vs raw" compares with the raw
LPUSH loop (one payload of the same JSON size per call, no job building).
Every run checks that exactly ``--count`` jobs landed in the queue.

Enqueue only: no worker runs here. The drain rate of delay()'d jobs with
results stored against ignored is ``./dev bench cpu_per_job --results both``
(docs/celery.md, Results: Cost).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django
from django.conf import settings

from djwork.testing.redis_server import RedisServer

SERVER = RedisServer()

settings.configure(
    DEBUG=False,
    USE_TZ=True,
    INSTALLED_APPS=["djwork"],
    DATABASES={},
    DJWORK={"REDIS_URL": SERVER.url},
    LOGGING_CONFIG=None,
)
django.setup()

import redis as redis_py  # noqa: E402

import djwork  # noqa: E402
from djwork import redis as redis_layer  # noqa: E402
from djwork.payload import dumps  # noqa: E402
from djwork.redis import keys  # noqa: E402

COUNTER_KEY = "bench:counter"


@djwork.job(name="bench.enqueue.bump")
def bump(amount, label="bench"):
    """The job body a worker would run: INCRBY a counter."""
    return redis_layer.run(lambda conn: conn.incrby(COUNTER_KEY, amount))


@djwork.job(name="bench.enqueue.bump_unique", unique_for=600)
def bump_unique(amount, label="bench"):
    """``bump`` as a unique job: every call below has other arguments, so every one is written."""
    return redis_layer.run(lambda conn: conn.incrby(COUNTER_KEY, amount))


def sample_body() -> str:
    """One job's JSON, as delay() would write it: the raw loops push this, so sizes match."""
    payload, _at = bump.build_payload([1], {"label": "bench"})
    payload["enqueued_at"] = time.time()
    return dumps(payload)


def raw_lpush(raw: redis_py.Redis, count: int) -> None:
    body = sample_body()
    key = keys.queue("default")
    for _ in range(count):
        raw.lpush(key, body)


def raw_pipeline(raw: redis_py.Redis, count: int) -> None:
    """What one push is on the wire (Sidekiq's too): LPUSH + SADD queues in one round trip."""
    body = sample_body()
    key = keys.queue("default")
    for _ in range(count):
        pipe = raw.pipeline(transaction=False)
        pipe.lpush(key, body)
        pipe.sadd(keys.QUEUES, "default")
        pipe.execute()


def delay_loop(_raw: redis_py.Redis, count: int) -> None:
    for index in range(count):
        bump.delay(index, label="bench")


def unique_delay_loop(_raw: redis_py.Redis, count: int) -> None:
    for index in range(count):
        bump_unique.delay(index, label="bench")


def round_trips_per_call(raw: redis_py.Redis, fn: Callable[[redis_py.Redis, int], None],
                         count: int) -> tuple[float, dict[str, float], float]:
    """(round trips per call, commands per call by name, server microseconds per call): the round trips
    counted where djwork makes them (its one wire exchange function: one write, every reply read), the
    commands and their time by the server (INFO commandstats; a script's time includes its commands')."""
    raw.flushdb()
    raw.config_resetstat()
    original = redis_layer.exchange
    seen = [0]

    def counting(connection: object, commands: list) -> list:
        seen[0] += 1
        return original(connection, commands)

    redis_layer.exchange = counting
    try:
        fn(raw, count)
    finally:
        redis_layer.exchange = original
    stats = raw.info("commandstats")
    ours = {name: stat for name, stat in stats.items() if name not in ("cmdstat_config|resetstat", "cmdstat_info")}
    commands = {name.removeprefix("cmdstat_"): stat["calls"] / count for name, stat in ours.items()}
    # Commands a script ran are counted on their own too: time the top-level commands only.
    scripted = any(name.startswith("cmdstat_eval") for name in ours)
    server_us = sum(stat["usec"] for name, stat in ours.items()
                    if not scripted or name.startswith("cmdstat_eval")) / count
    return seen[0] / count, commands, server_us


def delay_many_batches(batch: int) -> Callable[[redis_py.Redis, int], None]:
    def run(_raw: redis_py.Redis, count: int) -> None:
        for start in range(0, count, batch):
            bump.delay_many([((index,), {"label": "bench"}) for index in range(start, min(count, start + batch))])

    return run


def pin(cpu: int | None) -> int | None:
    """Put redis-server and this process on one CPU: on a small VM, cross-CPU wake-ups swing loopback
    round trips by 2-3x from run to run; on one core the methods compare like for like."""
    if cpu == -1 or not hasattr(os, "sched_setaffinity") or SERVER.process is None:
        return None
    available = sorted(os.sched_getaffinity(0))
    chosen = available[-1] if cpu is None else cpu
    os.sched_setaffinity(SERVER.process.pid, {chosen})
    os.sched_setaffinity(0, {chosen})
    return chosen


def measure_once(raw: redis_py.Redis, fn: Callable[[redis_py.Redis, int], None], count: int) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) for one run; checks every job landed."""
    raw.flushdb()
    cpu_started = time.process_time()
    started = time.perf_counter()
    fn(raw, count)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    landed = raw.llen(keys.queue("default"))
    if landed != count:
        raise SystemExit(f"{fn.__name__}: expected {count} jobs in queue:default, found {landed}")
    return elapsed, cpu


def profile(raw: redis_py.Redis, count: int, what: str, sort: str = "tottime") -> None:
    import cProfile
    import pstats

    fn = {"delay": delay_loop, "unique": unique_delay_loop}.get(what) or delay_many_batches(1000)
    raw.flushdb()
    profiler = cProfile.Profile()
    profiler.enable()
    fn(raw, count)
    profiler.disable()
    pstats.Stats(profiler).sort_stats(sort).print_stats(40)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000, help="jobs per run (default 20000)")
    parser.add_argument("--batch", type=int, default=1_000, help="delay_many batch size (default 1000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per method; the best counts (default 5)")
    parser.add_argument("--profile", choices=["delay", "unique", "delay_many"], help="cProfile one method instead")
    parser.add_argument("--cpu", type=int, default=None,
                        help="pin redis-server and this process to this CPU (default: the last one; -1: no pinning)")
    options = parser.parse_args(argv)
    SERVER.start()
    try:
        pinned = pin(options.cpu)
        raw = redis_py.Redis.from_url(SERVER.url)
        # Warm both clients' connections so no run pays the dial.
        raw.ping()
        redis_layer.run(lambda conn: conn.ping(), idempotent=True)
        if options.profile:
            profile(raw, options.count, options.profile)
            return 0
        count = options.count
        rows = [
            ("raw redis-py LPUSH loop", raw_lpush),
            ("raw redis-py LPUSH+SADD pipeline", raw_pipeline),
            ("delay() x1 thread", delay_loop),
            ("unique delay() x1 thread", unique_delay_loop),
            (f"delay_many() batches of {options.batch:,}", delay_many_batches(options.batch)),
            (f"delay_many() one batch of {count:,}", delay_many_batches(count)),
        ]
        # Interleave the repeats, in a fresh random order each round, so a noisy
        # neighbour or a periodic stall slows every method alike.
        best = {label: (float("inf"), float("inf")) for label, _fn in rows}
        order = list(rows)
        for _ in range(options.repeat):
            random.shuffle(order)
            for label, fn in order:
                wall, cpu = measure_once(raw, fn, count)
                best[label] = (min(best[label][0], wall), min(best[label][1], cpu))
        sample = raw.lrange(keys.queue("default"), 0, 0)
        raw_rate = count / best[rows[0][0]][0]
        print(f"redis-server {raw.info('server')['redis_version']} at {SERVER.url}; "
              f"{count:,} jobs per run, best of {options.repeat}; payload {len(sample[0]) if sample else 0} bytes; "
              + (f"server and client pinned to CPU {pinned}" if pinned is not None else "not pinned"))
        print(f"{'method':<36} {'seconds':>9} {'jobs/s':>10} {'vs raw':>8} {'client CPU us/job':>18}")
        for label, (seconds, cpu) in best.items():
            rate = count / seconds
            print(f"{label:<36} {seconds:>9.3f} {rate:>10,.0f} {rate / raw_rate:>7.0%} {cpu / count * 1e6:>18.1f}")
        share = best["delay() x1 thread"][0] / best["unique delay() x1 thread"][0]
        for label, fn in (("delay()", delay_loop), ("unique delay()", unique_delay_loop)):
            trips, commands, server_us = round_trips_per_call(raw, fn, 1000)
            print(f"{label}: {trips:.2f} round trips per call; per call the server ran "
                  + ", ".join(f"{calls:.2f} {name.upper()}" for name, calls in sorted(commands.items()))
                  + f" in {server_us:.1f} us of its CPU")
        print(f"unique delay() runs at {share:.0%} of delay()'s rate (target: 80 % or more)")
        raw.close()
    finally:
        redis_layer.reset()
        SERVER.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
