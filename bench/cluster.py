"""A drain on one Redis against a 3-primary Redis Cluster (docs/cluster.md, Measured; a benchmark, not a test).

    .venv/bin/python bench/cluster.py [--jobs 50000] [--queues 12] [--concurrency 10] [--processes 1] [--runs 1]

For each mode (one redis-server; 3 primaries + 3 replicas on loopback, tests/support/redis_cluster.py)
it pushes --jobs no-op jobs spread round-robin over --queues queues, starts one `runworkers` on all of
them, and from the moment the first job leaves a queue until every queue and in-progress list is empty
reads the drain's rate and the CPU time of the worker and of each redis-server (from /proc), so
"Redis CPU per job" is per node. The end is found by polling the queues' lengths every 50 ms, which
the Redis CPU includes (a few hundred small reads against tens of thousands of jobs). Linux only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

from common import ROOT, start_worker, stop_worker
from cpu_per_job import cpu_seconds, tree_cpu_seconds

from tests.support.redis_cluster import LoopbackCluster, cluster_client  # on the path through common

POLL = 0.05


def queue_names(count: int) -> list[str]:
    return [f"bench{index}" for index in range(count)]


def client_for(url: str) -> Any:
    import redis

    return cluster_client(url) if "+cluster" in url else redis.Redis.from_url(url)


def left(conn: Any, queues: list[str]) -> int:
    """Jobs still queued or in progress: the queues, then every registered in-progress list."""
    pipe = conn.pipeline(transaction=False)
    for name in queues:
        pipe.llen(f"queue:{name}")
    queued = sum(pipe.execute())
    lists = list(conn.smembers("djwork:inprogress"))
    if not lists:
        return queued
    pipe = conn.pipeline(transaction=False)
    for key in lists:
        pipe.llen(key)
    return queued + sum(pipe.execute())


def preload(url: str, jobs: int, queues: list[str]) -> None:
    """Push ``jobs`` no-op jobs round-robin over ``queues`` through djwork's own client (per node on a cluster)."""
    os.environ["BENCH_REDIS_URL"] = url
    from django.conf import settings
    from django.test.utils import override_settings

    from djwork import client
    from djwork import redis as redis_layer
    from djwork.payload import new_jid

    with override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": url}):
        redis_layer.reset()
        for start in range(0, jobs, 5_000):
            client.push_bulk([{"class": "bench.jobs.noop", "args": [], "queue": queues[index % len(queues)],
                               "jid": new_jid(), "retry": False}
                              for index in range(start, min(jobs, start + 5_000))])
        redis_layer.reset()


def drain(url: str, pids: dict[str, int], jobs: int, queues: list[str], concurrency: int, processes: int) -> dict:
    preload(url, jobs, queues)
    conn = client_for(url)
    extra = [argument for name in queues for argument in ("-q", name)]
    worker = start_worker(concurrency, processes, extra=extra)
    try:
        while left(conn, queues) >= jobs:  # the worker's boot: nothing taken yet
            time.sleep(0.005)
        started, remaining = time.monotonic(), left(conn, queues)
        worker_cpu = tree_cpu_seconds(worker.pid)
        redis_cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
        while left(conn, queues) > 0:
            time.sleep(POLL)
        elapsed = time.monotonic() - started
        worker_cpu = tree_cpu_seconds(worker.pid) - worker_cpu
        redis_cpu = {name: cpu_seconds(pid) - redis_cpu[name] for name, pid in pids.items()}
    finally:
        stop_worker(worker)
    return {"jobs": remaining, "seconds": elapsed, "rate": remaining / elapsed,
            "worker_us": worker_cpu / remaining * 1e6,
            "redis_us": {name: cpu / remaining * 1e6 for name, cpu in redis_cpu.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--queues", type=int, default=12)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--runs", type=int, default=1)
    options = parser.parse_args()
    queues = queue_names(options.queues)

    from djwork.testing.redis_server import RedisServer

    single = RedisServer().start()
    cluster = LoopbackCluster(tempfile.mkdtemp(prefix="djwork-bench-cluster-")).start()
    os.environ["BENCH_REDIS_URL"] = single.url
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()
    results: dict[str, list[dict]] = {"one server": [], "cluster (3 primaries)": []}
    try:
        primaries = set(cluster.primary_ports())
        modes = {"one server": (single.url, {f"{single.port}": single.process.pid}),
                 "cluster (3 primaries)": (cluster.url(), {f"{node.port}": node.process.pid
                                                          for node in cluster.nodes if node.port in primaries})}
        for _run in range(options.runs):
            for mode, (url, pids) in modes.items():
                if "+cluster" in url:
                    cluster.flush()
                else:
                    client_for(url).flushall()
                os.environ["BENCH_REDIS_URL"] = url
                results[mode].append(drain(url, pids, options.jobs, queues, options.concurrency,
                                           options.processes))
    finally:
        cluster.stop()
        single.stop()
    print(f"drain of {options.jobs:,} no-op jobs over {options.queues} queues, runworkers -c {options.concurrency}"
          f" --processes {options.processes}, {options.runs} run(s) each (median); load average at the end: "
          f"{os.getloadavg()[0]:.2f}")
    for mode, runs in results.items():
        rate = statistics.median(run["rate"] for run in runs)
        worker_us = statistics.median(run["worker_us"] for run in runs)
        nodes = runs[0]["redis_us"].keys()
        per_node = {node: statistics.median(run["redis_us"][node] for run in runs) for node in nodes}
        shown = ", ".join(f"{node}: {value:.1f}" for node, value in per_node.items())
        print(f"{mode:>22}: {rate:8,.0f} jobs/s; worker CPU {worker_us:6.1f} us/job; Redis CPU per job "
              f"{sum(per_node.values()):5.1f} us in all ({shown})")


if __name__ == "__main__":
    assert ROOT.exists()
    main()
