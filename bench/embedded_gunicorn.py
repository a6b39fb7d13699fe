"""A web view's latency while the embedded worker in the same gunicorn process drains a backlog.

    ./dev bench embedded_gunicorn [--jobs 20000] [--rate 100] [--idle-seconds 10] [--yield 0]
                                  [--max-jobs-per-second N] [--concurrency 10] [--switch-interval S]

Starts a private redis-server and one gunicorn sync worker (bench/gunicorn_conf.py: djwork embedded
through djwork.gunicorn) serving bench/urls.py's trivial view. A load generator sends GET /ping at a
fixed --rate (a new connection each, as a sync worker closes them) for --idle-seconds with the worker
idle, then lands --jobs no-op jobs on the queue at once (pushed to a staging list, then RENAMEd) and
keeps the same rate until the worker has run them all. Reports the view's p50/p99 idle and draining,
and the drain rate. --yield sets EMBEDDED_YIELD, --max-jobs-per-second EMBEDDED_MAX_JOBS_PER_SECOND,
--switch-interval the process's sys.setswitchinterval().
"""

from __future__ import annotations

import argparse
import http.client
import os
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, setup_django, start_redis, stop_worker, table, wait_for

from djwork.testing.redis_server import free_port


def get(port: int) -> float:
    """One GET /ping; its latency in ms."""
    began = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/ping")
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"GET /ping answered {response.status}")
    finally:
        connection.close()
    return (time.perf_counter() - began) * 1000


def load(port: int, rate: float, until) -> list[float]:
    """GETs at a fixed rate (each sent at its scheduled time, or at once if late) until ``until()``."""
    latencies: list[float] = []
    interval, next_at = 1.0 / rate, time.perf_counter()
    while not until():
        now = time.perf_counter()
        if now < next_at:
            time.sleep(next_at - now)
        latencies.append(get(port))
        next_at += interval
    return latencies


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=100)
    parser.add_argument("--idle-seconds", type=float, default=10)
    parser.add_argument("--yield", dest="yield_", type=float, default=0, help="EMBEDDED_YIELD (seconds, 0 = off)")
    parser.add_argument("--max-jobs-per-second", type=float, default=None)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--switch-interval", type=float, default=None)
    args = parser.parse_args()
    server = start_redis()
    try:
        setup_django()
        import redis

        from bench.jobs import nearly_noop

        client = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
        client.flushdb()
        port = free_port()
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench.settings", "BENCH_BIND": f"127.0.0.1:{port}",
               "BENCH_EMBEDDED_YIELD": str(args.yield_), "BENCH_CONCURRENCY": str(args.concurrency),
               "PYTHONUNBUFFERED": "1"}
        if args.max_jobs_per_second:
            env["BENCH_EMBEDDED_MAX_JOBS"] = str(args.max_jobs_per_second)
        if args.switch_interval:
            env["BENCH_SWITCH_INTERVAL"] = str(args.switch_interval)
        web = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "bench/gunicorn_conf.py", "bench.wsgi"],
                               cwd=ROOT, env=env)
        try:
            if not wait_for(lambda: client.scard("processes") > 0, 60, 0.05):
                raise SystemExit("the embedded worker never registered")
            time.sleep(1)  # the worker's takers settle onto the empty queue
            for _ in range(50):  # warm-up: imports, the URL resolver
                get(port)
            idle_until = time.monotonic() + args.idle_seconds
            idle = load(port, args.rate, lambda: time.monotonic() >= idle_until)
            # Staged, then landed at once: the drain starts from a full queue, not from the pushes' pace.
            for start in range(0, args.jobs, 10_000):
                nearly_noop.set(queue="staging").delay_many([()] * min(10_000, args.jobs - start))
            landed = time.perf_counter()
            client.rename("queue:staging", "queue:bench")
            busy = load(port, args.rate, lambda: int(client.get("bench:counter") or 0) >= args.jobs)
            drain_seconds = time.perf_counter() - landed
        finally:
            stop_worker(web)
        rows = [
            (f"GET /ping at {args.rate:.0f}/s, worker idle, p50 / p99 ({len(idle)} requests)",
             f"{percentile(idle, .5):.2f} / {percentile(idle, .99):.2f} ms"),
            (f"GET /ping at {args.rate:.0f}/s, draining, p50 / p99 ({len(busy)} requests)",
             f"{percentile(busy, .5):.2f} / {percentile(busy, .99):.2f} ms"),
            (f"drain of {args.jobs:,} no-op jobs by the embedded worker", f"{args.jobs / drain_seconds:,.0f} jobs/s"),
        ]
        title = (f"embedded worker in gunicorn: -c {args.concurrency}, EMBEDDED_YIELD {args.yield_}, "
                 f"EMBEDDED_MAX_JOBS_PER_SECOND {args.max_jobs_per_second}, switch interval "
                 f"{args.switch_interval or sys.getswitchinterval()}")
        print(table(rows, title))
        print(f"load average: {Path('/proc/loadavg').read_text().strip()}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
