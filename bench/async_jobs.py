"""I/O-bound coroutine jobs: 10,000 jobs each awaiting asyncio.sleep(0.1), drained by one `runworkers` process.

    ./dev bench async_jobs [--jobs 10000] [--sleep 0.1] [--places 500] [--concurrency 10] [--sidekiq]

Starts a private redis-server, pre-loads --jobs `async def` jobs, starts one
worker with ASYNC_CONCURRENCY=--places and times from the first hundred
jobs done to the last; samples the worker's RSS every 50 ms and reports the
peak. With --sidekiq, also drains the same number of Ruby jobs that sleep
--sleep with `sidekiq -c 50` (bench/ruby/jobs.rb) on the same server. Prints
the thread bound for comparison: -c threads can finish at most
-c / sleep jobs per second.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from common import ROOT, setup_django, start_redis, start_worker, stop_worker, table, tree_rss_kb, wait_for


class PeakRss:
    """Samples a process tree's RSS on a thread until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak_kb = max(self.peak_kb, tree_rss_kb(self.pid))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak_kb


def counter(client) -> int:
    return int(client.get("bench:counter") or 0)


def timed_drain(client, jobs: int, process) -> tuple[float, int]:
    """jobs/s from the first 100 done to the last (the counter moves by 100), and the peak RSS."""
    rss = PeakRss(process.pid)
    try:
        if not wait_for(lambda: counter(client) >= 100, 120, 0.001):
            raise SystemExit("no job finished within 120 s")
        began, first = time.perf_counter(), counter(client)
        done = wait_for(lambda: counter(client) >= jobs, 600, 0.002)
        elapsed = time.perf_counter() - began
        if not done:
            raise SystemExit(f"drain incomplete: {counter(client)} of {jobs}")
        return (jobs - first) / elapsed, rss.stop()
    finally:
        rss.stop()


def djwork_drain(jobs: int, sleep: float, places: int, concurrency: int) -> tuple[float, int]:
    import redis

    from bench.jobs import sleep_async

    client = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    client.flushdb()
    for start in range(0, jobs, 10_000):
        sleep_async.delay_many([(sleep,)] * min(10_000, jobs - start))
    os.environ["BENCH_ASYNC_CONCURRENCY"] = str(places)
    worker = start_worker(concurrency)
    try:
        return timed_drain(client, jobs, worker)
    finally:
        stop_worker(worker)


def sidekiq_drain(jobs: int, sleep: float, concurrency: int) -> tuple[float, int] | str:
    import redis

    if not shutil.which("sidekiq"):
        return "sidekiq not installed (apt-get install ruby-sidekiq)"
    client = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    client.flushdb()
    push = f"Sidekiq::Client.push_bulk('class' => SleepJob, 'args' => Array.new({jobs}) {{ [{sleep}] }})"
    pushed = subprocess.run(["ruby", "-r", str(ROOT / "bench/ruby/jobs.rb"), "-e", push],
                            cwd=ROOT, capture_output=True, text=True)
    if pushed.returncode != 0:
        return f"pushing the Ruby jobs failed: {pushed.stderr.strip()[-300:]}"
    worker = subprocess.Popen(["sidekiq", "-r", str(ROOT / "bench/ruby/jobs.rb"), "-c", str(concurrency),
                               "-q", "bench"], cwd=ROOT, env=dict(os.environ), stdout=subprocess.DEVNULL)
    try:
        return timed_drain(client, jobs, worker)
    finally:
        stop_worker(worker)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--sleep", type=float, default=0.1)
    parser.add_argument("--places", type=int, default=500, help="ASYNC_CONCURRENCY of the worker")
    parser.add_argument("--concurrency", type=int, default=10, help="processor threads (-c)")
    parser.add_argument("--sidekiq", action="store_true", help="also drain Ruby sleep jobs with sidekiq -c 50")
    args = parser.parse_args()
    server = start_redis()
    try:
        setup_django()
        rate, rss = djwork_drain(args.jobs, args.sleep, args.places, args.concurrency)
        rows = [
            (f"djwork, 1 process, -c {args.concurrency}, ASYNC_CONCURRENCY {args.places}",
             f"{rate:,.0f} jobs/s, peak RSS {rss / 1024:.1f} MB"),
            (f"bound of {args.concurrency} threads each sleeping (no event loop)",
             f"{args.concurrency / args.sleep:,.0f} jobs/s"),
            (f"bound of ASYNC_CONCURRENCY {args.places} places", f"{args.places / args.sleep:,.0f} jobs/s"),
        ]
        if args.sidekiq:
            found = sidekiq_drain(args.jobs, args.sleep, 50)
            shown = found if isinstance(found, str) else f"{found[0]:,.0f} jobs/s, peak RSS {found[1] / 1024:.1f} MB"
            rows.append(("sidekiq -c 50, 1 process (threads), same sleep", shown))
            rows.append(("bound of 50 threads each sleeping", f"{50 / args.sleep:,.0f} jobs/s"))
        print(table(rows, f"djwork coroutine jobs: {args.jobs:,} jobs awaiting sleep({args.sleep})"))
        print(f"load average: {Path('/proc/loadavg').read_text().strip()}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
