"""Batch overhead: create and drain 20,000 jobs as one batch vs 20,000 plain jobs (a benchmark, not a test).

    ./dev bench batch [--jobs 20000] [--concurrency 10] [--rounds 3]

Per round, interleaved (plain, then batch): push --jobs one-INCR jobs (plain:
``delay_many`` in chunks of 10,000; batch: the same calls inside one
``with batch.jobs():`` block), then start a worker and time from its first
job to its last (the batch: until its success callback has run). Prints each
round and the medians; overhead = how much lower the batch's rate is. The
drain also reports the worker's and Redis's CPU per job (from /proc), which
other load on the machine disturbs far less than the rates.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from common import setup_django, start_redis, start_worker, stop_worker, table, wait_for
from cpu_per_job import cpu_seconds, tree_cpu_seconds


def one_round(jobs: int, concurrency: int, batched: bool) -> tuple[float, float, float, float]:
    """(jobs/s to create, jobs/s to drain, worker CPU µs per job, Redis CPU µs per job)."""
    import redis

    import djwork
    from bench.jobs import batch_done, incr

    client = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    client.flushdb()
    began = time.perf_counter()
    if batched:
        batch = djwork.Batch(description="bench", on_success=batch_done, callback_queue="bench")
        with batch.jobs():
            for start in range(0, jobs, 10_000):
                incr.delay_many([()] * min(10_000, jobs - start))
    else:
        for start in range(0, jobs, 10_000):
            incr.delay_many([()] * min(10_000, jobs - start))
    create = jobs / (time.perf_counter() - began)
    redis_pid = int(client.info("server")["process_id"])
    worker = start_worker(concurrency)
    try:
        wait_for(lambda: int(client.get("bench:counter") or 0) > 0, 60, 0.001)
        worker_cpu, redis_cpu = tree_cpu_seconds(worker.pid), cpu_seconds(redis_pid)
        began = time.perf_counter()

        def finished() -> bool:
            if int(client.get("bench:counter") or 0) < jobs:
                return False
            return not batched or client.get("bench:batch-done") is not None

        if not wait_for(finished, 300, 0.005):
            raise SystemExit(f"drain incomplete: {client.get('bench:counter')} of {jobs}")
        drain = jobs / (time.perf_counter() - began)
        worker_cpu = (tree_cpu_seconds(worker.pid) - worker_cpu) / jobs * 1e6
        redis_cpu = (cpu_seconds(redis_pid) - redis_cpu) / jobs * 1e6
    finally:
        stop_worker(worker)
    return create, drain, worker_cpu, redis_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = start_redis()
    try:
        setup_django()
        results: dict[bool, list[tuple[float, float, float, float]]] = {False: [], True: []}
        rows = []

        def line(values: tuple[float, float, float, float]) -> str:
            return (f"create {values[0]:,.0f} jobs/s   drain {values[1]:,.0f} jobs/s   "
                    f"CPU/job worker {values[2]:.0f} µs, Redis {values[3]:.0f} µs")

        for number in range(1, args.rounds + 1):
            for batched in (False, True):
                found = one_round(args.jobs, args.concurrency, batched)
                results[batched].append(found)
                rows.append((f"round {number} {'batch' if batched else 'plain'}", line(found)))
        medians = {batched: tuple(statistics.median(values[i] for values in found) for i in range(4))
                   for batched, found in results.items()}
        for batched in (False, True):
            rows.append((f"median {'batch' if batched else 'plain'}", line(medians[batched])))  # type: ignore[arg-type]
        plain, batch = medians[False], medians[True]
        rows.append(("batch overhead", f"create {1 - batch[0] / plain[0]:+.1%}   drain {1 - batch[1] / plain[1]:+.1%}"
                                       f"   CPU/job worker {batch[2] / plain[2] - 1:+.1%}, "
                                       f"Redis {batch[3] / plain[3] - 1:+.1%}"))
        print(table(rows, f"{args.jobs:,} one-INCR jobs, -c {args.concurrency}, {args.rounds} rounds"))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
