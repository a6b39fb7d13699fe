"""The ceiling of any threaded Python worker for the benchmark's job body (a benchmark, not a test).

    ./dev bench thread_ceiling

N threads doing nothing but redis-py INCR against a private redis-server:
what a thread pool can reach with this job body on this machine before any
job system adds its own work. docs/performance.md compares djwork's drain
with it.
"""

from __future__ import annotations

import threading
import time

import redis
from common import start_redis, table

JOBS = 20_000


def run(url: str, threads: int) -> tuple[float, float]:
    client = redis.Redis.from_url(url)
    share = JOBS // threads

    def work() -> None:
        for _ in range(share):
            client.incr("ceiling")

    workers = [threading.Thread(target=work) for _ in range(threads)]
    began, cpu_began = time.perf_counter(), time.process_time()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    done = share * threads
    return done / elapsed, cpu / done * 1e6


def main() -> None:
    server = start_redis()
    try:
        rows = []
        for threads in (1, 2, 4, 10):
            rate, cpu_us = run(server.url, threads)
            rows.append((f"{threads} thread(s), {JOBS:,} INCR", f"{rate:,.0f} INCR/s, {cpu_us:.0f} us CPU each"))
        print(table(rows, "threaded redis-py INCR ceiling"))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
