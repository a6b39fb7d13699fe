"""A web view's latency while the embedded worker in the same gunicorn process drains a backlog.

    ./dev bench embedded_gunicorn [--jobs 20000] [--rate 100] [--requests 2000] [--yield 0]
                                  [--max-jobs-per-second N] [--concurrency 10] [--switch-interval S]
                                  [--worker-class djwork.gunicorn.EmbeddedWorker] [--profile] [--standalone]

Starts a private redis-server and one gunicorn worker (bench/gunicorn_conf.py: djwork embedded
through djwork.gunicorn) serving bench/urls.py's trivial view. A load generator sends GET /ping at a
fixed --rate (a new connection each, as a sync worker closes them): --requests with the worker idle
and as many while the worker drains, in turns: 400 idle, then --jobs no-op jobs land on the queue at
once (COPYed from a staged list) and the load goes on until they are all done, then 400 idle again,
and so on. Reports the view's p50/p90/p99 idle and draining, and the drain rate. --yield sets
EMBEDDED_YIELD, --max-jobs-per-second EMBEDDED_MAX_JOBS_PER_SECOND, --switch-interval the process's
sys.setswitchinterval(). --standalone is the control case: gunicorn without djwork and a separate
`runworkers -c` process draining on the same machine (no GIL shared). --profile marks each
request's path in the server (select() returned, the connection accepted, pre_request, the view:
bench/request_marks.py) and prints where the slowest 1 % spent their time against the middle ones.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, setup_django, start_redis, start_worker, stop_worker, table, wait_for

from djwork.testing.redis_server import free_port

# A request's path: (step, from, to) over [sent, then request_marks.MARKS, then the client's done].
STEPS = [("connect, select() returns, GIL", 0, 1), ("accept", 1, 2), ("parse", 2, 3), ("Django to the view", 3, 4),
         ("the view to the client's read of the response", 4, 7)]
Result = tuple[float, list[float]]
IDLE_STRETCH = 400  # idle requests between two drains (4 s at 100/s)


def get(port: int) -> Result:
    """One GET /ping: its latency in ms, and [sent, done] as perf_counter values."""
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
    done = time.perf_counter()
    return (done - began) * 1000, [began, done]


def load(port: int, rate: float, until) -> list[Result]:
    """GETs at a fixed rate (each sent at its scheduled time, or at once if late) until ``until(count)``."""
    results: list[Result] = []
    interval, next_at = 1.0 / rate, time.perf_counter()
    while not until(len(results)):
        now = time.perf_counter()
        if now < next_at:
            time.sleep(next_at - now)
        results.append(get(port))
        next_at += interval
    return results


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def breakdown(results: list[Result]) -> list[tuple[str, str]]:
    """Per step: mean ms over the middle requests (p40-p60) and over the slowest 1 %, and in how many of
    the slowest 1 % it was the longest step (a mean alone hides which step made each one slow)."""
    ordered = sorted(results, key=lambda each: each[0])
    slowest = ordered[int(len(ordered) * 0.99):] or ordered[-1:]
    middle = ordered[int(len(ordered) * 0.4):int(len(ordered) * 0.6)] or ordered

    def mean(group: list[Result], start: int, end: int) -> float:
        return sum((path[end] - path[start]) * 1000 for _, path in group) / len(group)

    def longest(path: list[float]) -> str:
        return max(STEPS, key=lambda step: path[step[2]] - path[step[1]])[0]

    worst = [longest(path) for _, path in slowest]
    return [(f"  {name}", f"{mean(middle, start, end):.2f} ms (p40-p60) / {mean(slowest, start, end):.2f} ms "
                          f"(slowest {len(slowest)}), the longest step in {worst.count(name)} of them")
            for name, start, end in STEPS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=100)
    parser.add_argument("--requests", type=int, default=2_000, help="timed requests per phase (idle, draining)")
    parser.add_argument("--yield", dest="yield_", type=float, default=0, help="EMBEDDED_YIELD (seconds, 0 = off)")
    parser.add_argument("--max-jobs-per-second", type=float, default=None)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--switch-interval", type=float, default=None)
    parser.add_argument("--worker-class", default=None, help="gunicorn worker_class (default: sync)")
    parser.add_argument("--profile", action="store_true", help="mark each request's path in the server")
    parser.add_argument("--nice", type=int, default=None,
                        help="experiment: renice the embedded worker's threads by this much after its boot")
    parser.add_argument("--standalone", action="store_true",
                        help="control case: no embedded worker; a separate runworkers process drains")
    args = parser.parse_args()
    if args.jobs % 100:
        raise SystemExit("--jobs must be a multiple of 100 (the jobs count themselves by the hundred)")
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
        if args.worker_class:
            env["BENCH_WORKER_CLASS"] = args.worker_class
        if args.profile:
            env["BENCH_PROFILE"] = str(Path(server.directory) / "paths.json")
        # Staged once; each round COPYs it onto the (drained, hence absent) queue: the drain starts
        # from a full queue at once, not at the pushes' pace, and the load never stops to push.
        for start in range(0, args.jobs, 10_000):
            nearly_noop.set(queue="staging").delay_many([()] * min(10_000, args.jobs - start))
        if args.standalone:
            env["BENCH_STANDALONE"] = "1"
        if args.nice:
            env["BENCH_NICE"] = str(args.nice)
        web = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "bench/gunicorn_conf.py", "bench.wsgi"],
                               cwd=ROOT, env=env)
        standalone = start_worker(args.concurrency) if args.standalone else None
        try:
            if not wait_for(lambda: client.scard("processes") > 0, 60, 0.05):
                raise SystemExit("the worker never registered")
            time.sleep(1)  # the worker's takers settle onto the empty queue
            warm_up = [get(port) for _ in range(50)]  # imports, the URL resolver
            # Idle stretches and drains take turns, so both phases see the same share of whatever
            # else the machine runs (its load moves within a minute; one long idle phase first did not).
            idle: list[Result] = []
            busy: list[Result] = []
            sequence = list(warm_up)  # every request in the order sent: the server's marks come in this order
            rounds, drain_seconds = 0, 0.0
            while len(idle) < args.requests or len(busy) < args.requests:
                if len(idle) < args.requests:
                    wanted = min(args.requests - len(idle), IDLE_STRETCH)
                    idle += load(port, args.rate, lambda count, wanted=wanted: count >= wanted)
                    sequence += idle[-wanted:]
                if len(busy) >= args.requests:
                    continue
                rounds += 1
                landed = time.perf_counter()
                client.copy("queue:staging", "queue:bench")
                target = rounds * args.jobs
                drained = load(port, args.rate,
                               lambda count, target=target: int(client.get("bench:counter") or 0) >= target)
                drain_seconds += time.perf_counter() - landed
                busy += drained
                sequence += drained
        finally:
            stop_worker(web)
            if standalone is not None:
                stop_worker(standalone)
        if args.profile:
            # The server's marks, one list per request in the client's order: [sent, *marks, done].
            paths = json.loads(Path(env["BENCH_PROFILE"]).read_text())
            if len(paths) != len(sequence):
                raise SystemExit(f"the server marked {len(paths)} requests, the client sent {len(sequence)}")
            for (_, path), marks in zip(sequence, paths, strict=True):
                path[1:1] = marks
        idle_ms, busy_ms = [each[0] for each in idle], [each[0] for each in busy]
        rows = [
            (f"GET /ping at {args.rate:.0f}/s, worker idle, p50 / p90 / p99 ({len(idle)} requests)",
             f"{percentile(idle_ms, .5):.2f} / {percentile(idle_ms, .9):.2f} / {percentile(idle_ms, .99):.2f} ms"),
            (f"GET /ping at {args.rate:.0f}/s, draining, p50 / p90 / p99 ({len(busy)} requests)",
             f"{percentile(busy_ms, .5):.2f} / {percentile(busy_ms, .9):.2f} / {percentile(busy_ms, .99):.2f} ms"),
            ("draining p99 / idle p99", f"{percentile(busy_ms, .99) / percentile(idle_ms, .99):.2f}x"),
            (f"drain of {rounds} x {args.jobs:,} no-op jobs",
             f"{rounds * args.jobs / drain_seconds:,.0f} jobs/s"),
        ]
        if args.profile:
            rows += [("idle requests' path", "")] + breakdown(idle)
            rows += [("draining requests' path", "")] + breakdown(busy)
        where = "a separate runworkers process" if args.standalone else "embedded worker in gunicorn"
        title = (f"{where} ({args.worker_class or 'sync'}): -c {args.concurrency}, "
                 f"EMBEDDED_YIELD {args.yield_}, EMBEDDED_MAX_JOBS_PER_SECOND {args.max_jobs_per_second}, "
                 f"switch interval {args.switch_interval or sys.getswitchinterval()}, nice {args.nice or 0}")
        print(table(rows, title))
        print(f"load average: {Path('/proc/loadavg').read_text().strip()}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
