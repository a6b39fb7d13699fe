"""Batch overhead: create and drain 20,000 jobs as one batch vs 20,000 plain jobs (a benchmark, not a test).

    ./dev bench batch [--jobs 20000] [--concurrency 10] [--rounds 3]

Per round, interleaved (plain, then batch): push --jobs one-INCR jobs (plain:
``delay_many`` in chunks of 10,000; batch: the same calls inside one
``with batch.jobs():`` block), then start a worker and time from its first
job to its last (the batch: until its success callback has run). Prints each
round and the medians; overhead = how much lower the batch's rate is.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from common import setup_django, start_redis, start_worker, stop_worker, table, wait_for


def one_round(jobs: int, concurrency: int, batched: bool) -> tuple[float, float]:
    """(jobs/s to create, jobs/s to drain)."""
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
    worker = start_worker(concurrency)
    try:
        wait_for(lambda: int(client.get("bench:counter") or 0) > 0, 60, 0.001)
        began = time.perf_counter()

        def finished() -> bool:
            if int(client.get("bench:counter") or 0) < jobs:
                return False
            return not batched or client.get("bench:batch-done") is not None

        if not wait_for(finished, 300, 0.005):
            raise SystemExit(f"drain incomplete: {client.get('bench:counter')} of {jobs}")
        drain = jobs / (time.perf_counter() - began)
    finally:
        stop_worker(worker)
    return create, drain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = start_redis()
    try:
        setup_django()
        results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        rows = []
        for number in range(1, args.rounds + 1):
            for batched in (False, True):
                create, drain = one_round(args.jobs, args.concurrency, batched)
                results[batched].append((create, drain))
                rows.append((f"round {number} {'batch' if batched else 'plain'}",
                             f"create {create:,.0f} jobs/s   drain {drain:,.0f} jobs/s"))
        medians = {batched: (statistics.median(c for c, _ in found), statistics.median(d for _, d in found))
                   for batched, found in results.items()}
        for batched in (False, True):
            create, drain = medians[batched]
            rows.append((f"median {'batch' if batched else 'plain'}",
                         f"create {create:,.0f} jobs/s   drain {drain:,.0f} jobs/s"))
        rows.append(("batch overhead", f"create {1 - medians[True][0] / medians[False][0]:+.1%}   "
                                       f"drain {1 - medians[True][1] / medians[False][1]:+.1%}"))
        print(table(rows, f"{args.jobs:,} one-INCR jobs, -c {args.concurrency}, {args.rounds} rounds"))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
