"""Cost of a limiter decision: round trips, wall and client CPU per acquire+release, Redis time per script call.

    .venv/bin/python -m bench.limiter [--count 5000] [--repeat 3] [--cpu N]

Starts its own private redis-server (never the machine's Redis), configures
Django with nothing but the djwork app, and runs --count uncontended
``within_limit`` blocks per kind (limits high enough never to refuse), best
of --repeat. Prints one row per kind: round trips per block (djwork's own
odometer), wall and client CPU microseconds per block, and the server's
microseconds per Lua call (INFO commandstats, evalsha). A PING loop is the
floor a round trip costs on this machine.

TODO(worker integration): the drain of 20,000 jobs under ``limits=[limiter.unlimited()]``
against the same jobs with no limiter (the issue's "< 10 % overhead" figure)
needs ``@djwork.job(limits=...)``, which the worker does not read yet. Once it
does, start a worker per variant as bench/throughput.py does and print both
drain rates here.
"""

from __future__ import annotations

import argparse
import os
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

from djwork import limiter  # noqa: E402
from djwork import redis as redis_layer  # noqa: E402


def kinds() -> list[tuple[str, Callable[[int], None]]]:
    big = 10**9  # never refuses (points spent across every run and repeat included)
    stripe = limiter.concurrent("bench-concurrent", big, lock_timeout=60)
    api = limiter.bucket("bench-bucket", big, "day")
    mail = limiter.window("bench-window", big, "hour")
    shop = limiter.leaky("bench-leaky", big, "hour")
    github = limiter.points("bench-points", big, "hour")
    free = limiter.unlimited()

    def blocks(chosen) -> Callable[[int], None]:
        def run(_index: int) -> None:
            with chosen.within_limit():
                pass
        return run

    def points_refund(_index: int) -> None:
        with github.within_limit(estimate=5) as handle:
            handle.points_used(3)

    def tenant_window(index: int) -> None:
        # A new per-tenant name each time: every call registers a limiter.
        with limiter.window(f"bench-tenant-{index}", 10, "minute").within_limit():
            pass

    def ping(_index: int) -> None:
        redis_layer.run(lambda conn: conn.ping(), idempotent=True)

    return [
        ("PING (one round trip, the floor)", ping),
        ("concurrent", blocks(stripe)),
        ("bucket", blocks(api)),
        ("window", blocks(mail)),
        ("leaky", blocks(shop)),
        ("points, estimate only", blocks(github)),
        ("points + points_used(actual)", points_refund),
        ("window, new tenant name each", tenant_window),
        ("unlimited()", blocks(free)),
    ]


def evalsha_usec(raw: redis_py.Redis) -> tuple[int, float]:
    stats = raw.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), float(stats.get("usec", 0))


def measure(raw: redis_py.Redis, fn: Callable[[int], None], count: int) -> tuple[float, float, float, float]:
    """(round trips, wall us, client CPU us, server us per script call) per block."""
    raw.config_resetstat()
    trips = redis_layer.round_trips()
    cpu = time.process_time()
    began = time.perf_counter()
    for index in range(count):
        fn(index)
    wall = time.perf_counter() - began
    cpu = time.process_time() - cpu
    trips = redis_layer.round_trips() - trips
    calls, usec = evalsha_usec(raw)
    return trips / count, wall / count * 1e6, cpu / count * 1e6, usec / calls if calls else 0.0


def pin(cpu: int | None) -> int | None:
    """redis-server and this process on one CPU, as bench/enqueue.py does: loopback round trips swing
    2-3x from run to run across CPUs on a small VM."""
    if cpu == -1 or not hasattr(os, "sched_setaffinity") or SERVER.process is None:
        return None
    chosen = sorted(os.sched_getaffinity(0))[-1] if cpu is None else cpu
    os.sched_setaffinity(SERVER.process.pid, {chosen})
    os.sched_setaffinity(0, {chosen})
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=5_000, help="blocks per kind and run (default 5000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per kind; the best counts (default 3)")
    parser.add_argument("--cpu", type=int, default=None,
                        help="pin redis-server and this process to this CPU (default: the last one; -1: no pinning)")
    options = parser.parse_args(argv)
    SERVER.start()
    try:
        pinned = pin(options.cpu)
        raw = redis_py.Redis.from_url(SERVER.url)
        redis_layer.run(lambda conn: conn.ping(), idempotent=True)  # dial before measuring
        rows = kinds()
        for _label, fn in rows:
            fn(-1)  # warm: scripts cached, limiters registered
        best: dict[str, tuple[float, float, float, float]] = {}
        for _ in range(options.repeat):
            for label, fn in rows:
                result = measure(raw, fn, options.count)
                if label not in best or result[1] < best[label][1]:
                    best[label] = result
        print(f"redis-server {raw.info('server')['redis_version']}; {options.count:,} within_limit blocks per kind, "
              f"best of {options.repeat}; "
              + (f"server and client pinned to CPU {pinned}" if pinned is not None else "not pinned"))
        print(f"{'kind':<34} {'round trips':>11} {'wall us':>9} {'client CPU us':>14} {'Redis us/call':>14}")
        for label, (trips, wall, cpu, server) in best.items():
            print(f"{label:<34} {trips:>11.2f} {wall:>9.1f} {cpu:>14.1f} {server:>14.1f}")
        raw.close()
    finally:
        redis_layer.reset()
        SERVER.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
