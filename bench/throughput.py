"""Drain throughput and pickup latency of `runworkers` (a benchmark, not a test).

    ./dev bench throughput [--jobs 20000] [--concurrency 10] [--processes 1] [--rate 200] [--probes 1000]
    ./dev bench throughput --results both --rounds 3 --skip-latency   # results stored vs ignored, interleaved

Starts a private redis-server, pre-loads --jobs jobs whose body is one INCR,
starts a worker and times from its first job to its last; then, with the
worker idle, pushes probe jobs at --rate per second and reports how long each
waited before it started (p50/p95/p99). Prints a table.

``--results on|off`` enqueues the drained jobs with results stored (a result
record per job, written by the ack) or ignored (``ignore_result=True``);
``both`` alternates off and on ``--rounds`` times each, so a noisy machine
hits both alike, and prints every run and the medians.
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import preload, setup_django, start_redis, start_worker, stop_worker, table, tree_rss_kb, wait_for


def drain(jobs: int, concurrency: int, processes: int, results: bool = False) -> tuple[float, int]:
    import redis

    from bench.jobs import incr

    preload(incr.set(ignore_result=not results), jobs)
    client = redis.Redis.from_url(__import__("os").environ["BENCH_REDIS_URL"])
    worker = start_worker(concurrency, processes)
    try:
        wait_for(lambda: int(client.get("bench:counter") or 0) > 0, 60, 0.001)
        began = time.perf_counter()
        done = wait_for(lambda: int(client.get("bench:counter") or 0) >= jobs, 300, 0.005)
        elapsed = time.perf_counter() - began
        if not done:
            raise SystemExit(f"drain incomplete: {client.get('bench:counter')} of {jobs}")
        rss = tree_rss_kb(worker.pid)
        return jobs / elapsed, rss
    finally:
        stop_worker(worker)


def latency(rate: float, probes: int, concurrency: int) -> list[float]:
    import os

    import redis

    from bench.jobs import probe

    client = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    client.flushdb()
    worker = start_worker(concurrency)
    try:
        wait_for(lambda: client.scard("processes") > 0, 30)
        time.sleep(0.5)
        interval = 1.0 / rate
        next_at = time.perf_counter()
        for _ in range(probes):
            now = time.perf_counter()
            if now < next_at:
                time.sleep(next_at - now)
            probe.delay(time.time())
            next_at += interval
        wait_for(lambda: client.llen("bench:latency") >= probes, 60)
        return sorted(float(value) * 1000 for value in client.lrange("bench:latency", 0, -1))
    finally:
        stop_worker(worker)


def percentile(values: list[float], fraction: float) -> float:
    return values[min(len(values) - 1, int(len(values) * fraction))]


def compare_results(args: argparse.Namespace) -> list[tuple[str, str]]:
    rates: dict[bool, list[float]] = {False: [], True: []}
    rows = []
    for round_number in range(1, args.rounds + 1):
        for results in ((False, True) if round_number % 2 else (True, False)):  # swapped each round
            rate, _rss = drain(args.jobs, args.concurrency, args.processes, results)
            rates[results].append(rate)
            rows.append((f"round {round_number}, results {'stored' if results else 'ignored'}", f"{rate:,.0f} jobs/s"))
    off, on = statistics.median(rates[False]), statistics.median(rates[True])
    rows.append(("median, results ignored / stored", f"{off:,.0f} / {on:,.0f} jobs/s ({(on - off) / off:+.1%})"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--probes", type=int, default=1000)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--results", choices=("off", "on", "both"), default="off")
    parser.add_argument("--rounds", type=int, default=3, help="drains per setting with --results both")
    args = parser.parse_args()
    server = start_redis()
    try:
        setup_django()
        if args.results == "both":
            print(table(compare_results(args), "djwork drain: results ignored vs stored"))
            return
        rate, rss = drain(args.jobs, args.concurrency, args.processes, args.results == "on")
        rows = [
            (f"drain, {args.processes} process(es), -c {args.concurrency}, {args.jobs:,} jobs", f"{rate:,.0f} jobs/s"),
            ("worker RSS after the drain (all processes)", f"{rss / 1024:.1f} MB"),
        ]
        if not args.skip_latency:
            values = latency(args.rate, args.probes, args.concurrency)
            rows.append((f"pickup latency at {args.rate:.0f} jobs/s, p50 / p95 / p99",
                         f"{percentile(values, .5):.2f} / {percentile(values, .95):.2f} / "
                         f"{percentile(values, .99):.2f} ms (mean {statistics.mean(values):.2f})"))
        print(table(rows, "djwork throughput (reliable fetch)"))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
