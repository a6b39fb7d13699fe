"""Where a drain's CPU goes: worker and Redis CPU per job, and context switches (a benchmark, not a test).

    ./dev bench cpu_per_job [--jobs 20000] [--concurrency 10] [--processes 1] [--job incr|nearly_noop] [--runs 3]
                            [--metrics on|off|both] [--heartbeat-interval 10] [--results on|off|both]

Pre-loads --jobs jobs, starts one `runworkers` process and, between its
first and last job, reads the CPU time of the worker and of redis-server
from /proc, and the voluntary and involuntary context switches of every
worker thread. `--job nearly_noop` leaves out the job body's own Redis call,
so what remains is djwork's own cost per job. `--metrics both` alternates
runs with execution metrics off and on (docs/metrics.md) and prints the
medians of each; `--results both` does the same for results stored (a result
record per job, written by its ack) and ignored (`ignore_result=True`). Linux only (/proc).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from common import (
    descendants,
    noop_target,
    preload,
    setup_django,
    start_redis,
    start_worker,
    stop_worker,
    table,
    wait_for,
)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """A worker and its forked children (``--processes N``)."""
    return sum(cpu_seconds(each) for each in [pid, *descendants(pid)])


def context_switches(root: int) -> tuple[int, int]:
    voluntary = involuntary = 0
    threads = [(pid, thread) for pid in [root, *descendants(root)] for thread in os.listdir(f"/proc/{pid}/task")]
    for pid, thread in threads:
        try:
            lines = Path(f"/proc/{pid}/task/{thread}/status").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("voluntary_ctxt_switches"):
                voluntary += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches"):
                involuntary += int(line.split()[1])
    return voluntary, involuntary


def run(job_name: str, jobs: int, concurrency: int, processes: int,
        results: bool = False) -> tuple[float, float, float, float, float]:
    import redis

    from bench import jobs as bench_jobs

    job = getattr(bench_jobs, job_name)
    preload(job.set(ignore_result=not results), jobs)
    client = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    redis_pid = int(client.info("server")["process_id"])
    worker = start_worker(concurrency, processes)
    try:
        wait_for(lambda: int(client.get("bench:counter") or 0) > 0, 60, 0.001)
        worker_cpu, redis_cpu = tree_cpu_seconds(worker.pid), cpu_seconds(redis_pid)
        switches = context_switches(worker.pid)
        began = time.perf_counter()
        # A nearly_noop worker process counts its runs by the hundred, so its last < 100 may never show.
        target = noop_target(jobs, processes) if job_name == "nearly_noop" else jobs
        if not wait_for(lambda: int(client.get("bench:counter") or 0) >= target, 300, 0.005):
            raise SystemExit(f"drain incomplete: {client.get('bench:counter')} of {target}")
        elapsed = time.perf_counter() - began
        done = int(client.get("bench:counter"))
        worker_cpu = tree_cpu_seconds(worker.pid) - worker_cpu
        redis_cpu = cpu_seconds(redis_pid) - redis_cpu
        after = context_switches(worker.pid)
        return (done / elapsed, worker_cpu / done * 1e6, redis_cpu / done * 1e6,
                (after[0] - switches[0]) / done, (after[1] - switches[1]) / done)
    finally:
        stop_worker(worker)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--job", choices=["incr", "nearly_noop"], default="incr")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--metrics", choices=["on", "off", "both"], default="on")
    parser.add_argument("--heartbeat-interval", type=float, default=10.0)
    parser.add_argument("--results", choices=["on", "off", "both"], default="off")
    options = parser.parse_args()
    if options.results == "both" and options.metrics == "both":
        raise SystemExit("compare one thing at a time: --metrics both or --results both")
    os.environ["BENCH_HEARTBEAT_INTERVAL"] = str(options.heartbeat_interval)
    server = start_redis()
    try:
        setup_django()
        rows = []
        seen: dict[str, list[tuple[float, float, float]]] = {"off": [], "on": []}
        compared = "results" if options.results == "both" else "metrics"
        os.environ["BENCH_METRICS"] = "1" if options.metrics != "off" else "0"
        for number in range(1, options.runs + 1):
            # Each round swaps which goes first, so a drift of the machine over the runs hits both alike.
            pair = ("off", "on") if number % 2 else ("on", "off")
            for mode in (pair if "both" in (options.metrics, options.results) else (options.metrics,)):
                results = (mode == "on") if compared == "results" else options.results == "on"
                if compared == "metrics":
                    os.environ["BENCH_METRICS"] = "1" if mode == "on" else "0"
                rate, worker_us, redis_us, voluntary, involuntary = run(options.job, options.jobs,
                                                                        options.concurrency, options.processes, results)
                seen[mode].append((rate, worker_us, redis_us))
                rows.append((f"run {number}: {options.job}, {options.processes}p -c {options.concurrency}, "
                             f"{options.jobs:,} jobs, {compared} {mode}",
                             f"{rate:,.0f} jobs/s; worker {worker_us:.0f} us CPU/job, redis-server {redis_us:.0f} us; "
                             f"{voluntary:.1f} + {involuntary:.1f} context switches/job"))
        if "both" in (options.metrics, options.results):
            for mode, values in seen.items():
                rows.append((f"median, {compared} {mode}",
                             f"{statistics.median(v[0] for v in values):,.0f} jobs/s; worker "
                             f"{statistics.median(v[1] for v in values):.1f} us CPU/job, redis-server "
                             f"{statistics.median(v[2] for v in values):.1f} us"))
        print(table(rows, "CPU per job during a drain"))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
