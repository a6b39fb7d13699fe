"""Redis and worker CPU per run of the execution-history writer (a benchmark, not a test).

    ./dev bench history_write [--runs 20000] [--flush 500] [--max-length 10000] [--rounds 5]

Writes ``--runs`` runs through ``HistoryRecorder.flush()`` in flushes of
``--flush`` runs into a private redis-server's ``djwork:history`` capped at
``--max-length`` runs, and reads redis-server's CPU from ``INFO cpu`` before
and after (its own process time: the client's parsing is not in it). The
worker's column is this process's CPU inside ``flush()``: packing the runs and
sending them. Medians of ``--rounds``; each round starts from an empty stream,
so the cap's trimming is in the numbers once a round has written more than
``--max-length`` runs. docs/history.md quotes a run of it.
"""

from __future__ import annotations

import argparse
import statistics
import time

import redis
from common import setup_django, start_redis


def cpu_seconds(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def one_round(client: redis.Redis, runs: int, flush: int, max_length: int) -> tuple[float, float]:
    from djwork.redis import keys
    from djwork.worker.history import HistoryRecorder

    client.delete(keys.HISTORY)
    recorder = HistoryRecorder("bench-host:1:0123456789ab", max_length)
    recorder.record("warm-up", "app.jobs.Warm", "default", "ok", time.time(), 0.1)
    recorder.flush()  # the script is cached before the measured window
    worker = 0.0
    before = cpu_seconds(client)
    for batch in range(runs // flush):
        now = time.time()
        for number in range(flush):
            recorder.record(f"{batch:06d}{number:018d}", "app.jobs.SomeJob", "default", "ok", now, 0.123456)
        began = time.process_time()
        recorder.flush()
        worker += time.process_time() - began
    return (cpu_seconds(client) - before) / runs * 1e6, worker / runs * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--flush", type=int, default=500, help="runs per flush")
    parser.add_argument("--max-length", type=int, default=10_000, help="HISTORY_MAX_LENGTH")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    server = start_redis()
    try:
        setup_django()
        client = redis.Redis.from_url(server.url)
        results = [one_round(client, options.runs, options.flush, options.max_length)
                   for _ in range(options.rounds)]
        for number, (on_redis, on_worker) in enumerate(results, 1):
            print(f"round {number}: redis-server {on_redis:.2f} µs/run, worker flush {on_worker:.2f} µs/run")
        print(f"median of {options.rounds}: redis-server {statistics.median(r for r, _ in results):.2f} µs/run, "
              f"worker flush {statistics.median(w for _, w in results):.2f} µs/run "
              f"({options.runs} runs, flushes of {options.flush}, cap {options.max_length} runs)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
