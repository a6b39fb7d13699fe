"""Cost of a limiter: per decision (round trips, wall and client CPU per block, Redis time per script call),
and per job in a worker's drain (issue #13: a limiter that never limits costs under 10 %).

    .venv/bin/python -m bench.limiter [--count 5000] [--repeat 3] [--cpu N]
    .venv/bin/python -m bench.limiter --drain [--jobs 20000] [--rounds 3] [--concurrency 10]

Both start their own private redis-server (never the machine's Redis).

Per decision (the default): Django configured with nothing but the djwork
app, --count uncontended ``within_limit`` blocks per kind (limits high enough
never to refuse), best of --repeat. Prints one row per kind: round trips per
block (djwork's own odometer), wall and client CPU microseconds per block,
and the server's microseconds per Lua call (INFO commandstats, evalsha). A
PING loop is the floor a round trip costs on this machine.

Per job (``--drain``): the bench/jobs.py job ``drain_plain`` (no Redis call
but one INCRBY per 100 runs), the same body as ``drain_unlimited``
(``limits=[limiter.unlimited()]``) and as ``drain_window`` (``limits=`` a
window limiter that never refuses: one real Lua call per job). Per round and
variant, --jobs jobs are pre-loaded and drained by one ``runworkers``
process (bench/settings.py, as ``./dev bench throughput`` does), timed from
its first hundred jobs to its last, with the worker's and redis-server's CPU
from /proc over the same span. The variants take turns within each round,
in an order that rotates every round, so the machine's swings hit all of
them. Prints every drain, then per variant the median jobs/s and CPU per job
and the overhead against the plain job: the extra time per job, from the
medians, with the range of each round's own pairing in brackets. Last, the
CPU ``run_within([unlimited()])`` adds to one job measured in a loop in this
process, against the plain drain's worker CPU per job: on a busy machine the
drains swing by more than that whole cost.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

# The other benchmarks run as scripts and import their plumbing as `common`; do the same under -m, so there
# is one copy of it (and the repository, which common puts on the path, is importable as a script too).
sys.path.insert(0, str(Path(__file__).resolve().parent))

import redis as redis_py
from common import preload, setup_django, start_redis, start_worker, stop_worker, wait_for
from cpu_per_job import cpu_seconds, tree_cpu_seconds

from djwork.testing.redis_server import RedisServer

# (label, job name in bench/jobs.py); the first is the baseline the others are compared with.
DRAIN_VARIANTS = [
    ("plain", "drain_plain"),
    ("limits=[unlimited()]", "drain_unlimited"),
    ("limits=[window, never refuses]", "drain_window"),
]
PROGRESS_STEP = 100  # the drain jobs report their runs in hundreds


def configure_bare_django(server: RedisServer) -> None:
    import django
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        USE_TZ=True,
        INSTALLED_APPS=["djwork"],
        DATABASES={},
        DJWORK={"REDIS_URL": server.url},
        LOGGING_CONFIG=None,
    )
    django.setup()


def kinds() -> list[tuple[str, Callable[[int], None]]]:
    from djwork import limiter
    from djwork import redis as redis_layer

    big = 10**9  # never refuses (points spent across every run and repeat included)
    stripe = limiter.concurrent("bench-concurrent", big, lock_timeout=60)
    api = limiter.bucket("bench-bucket", big, "day")
    mail = limiter.window("bench-window", big, "hour")
    shop = limiter.leaky("bench-leaky", big, "hour")
    github = limiter.points("bench-points", big, "hour")
    free = limiter.unlimited()

    def blocks(chosen) -> Callable[[int], None]:
        def run(_index: int) -> None:
            with chosen.within_limit():
                pass
        return run

    def points_refund(_index: int) -> None:
        with github.within_limit(estimate=5) as handle:
            handle.points_used(3)

    def tenant_window(index: int) -> None:
        # A new per-tenant name each time: every call registers a limiter.
        with limiter.window(f"bench-tenant-{index}", 10, "minute").within_limit():
            pass

    def ping(_index: int) -> None:
        redis_layer.run(lambda conn: conn.ping(), idempotent=True)

    return [
        ("PING (one round trip, the floor)", ping),
        ("concurrent", blocks(stripe)),
        ("bucket", blocks(api)),
        ("window", blocks(mail)),
        ("leaky", blocks(shop)),
        ("points, estimate only", blocks(github)),
        ("points + points_used(actual)", points_refund),
        ("window, new tenant name each", tenant_window),
        ("unlimited()", blocks(free)),
    ]


def evalsha_usec(raw: redis_py.Redis) -> tuple[int, float]:
    stats = raw.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), float(stats.get("usec", 0))


def measure(raw: redis_py.Redis, fn: Callable[[int], None], count: int) -> tuple[float, float, float, float]:
    """(round trips, wall us, client CPU us, server us per script call) per block."""
    from djwork import redis as redis_layer

    raw.config_resetstat()
    trips = redis_layer.round_trips()
    cpu = time.process_time()
    began = time.perf_counter()
    for index in range(count):
        fn(index)
    wall = time.perf_counter() - began
    cpu = time.process_time() - cpu
    trips = redis_layer.round_trips() - trips
    calls, usec = evalsha_usec(raw)
    return trips / count, wall / count * 1e6, cpu / count * 1e6, usec / calls if calls else 0.0


def pin(server: RedisServer, cpu: int | None) -> int | None:
    """redis-server and this process on one CPU, as bench/enqueue.py does: loopback round trips swing
    2-3x from run to run across CPUs on a small VM."""
    if cpu == -1 or not hasattr(os, "sched_setaffinity") or server.process is None:
        return None
    chosen = sorted(os.sched_getaffinity(0))[-1] if cpu is None else cpu
    os.sched_setaffinity(server.process.pid, {chosen})
    os.sched_setaffinity(0, {chosen})
    return chosen


def per_decision(options: argparse.Namespace) -> None:
    server = RedisServer()
    configure_bare_django(server)
    from djwork import redis as redis_layer

    server.start()
    try:
        pinned = pin(server, options.cpu)
        raw = redis_py.Redis.from_url(server.url)
        redis_layer.run(lambda conn: conn.ping(), idempotent=True)  # dial before measuring
        rows = kinds()
        for _label, fn in rows:
            fn(-1)  # warm: scripts cached, limiters registered
        best: dict[str, tuple[float, float, float, float]] = {}
        for _ in range(options.repeat):
            for label, fn in rows:
                result = measure(raw, fn, options.count)
                if label not in best or result[1] < best[label][1]:
                    best[label] = result
        print(f"redis-server {raw.info('server')['redis_version']}; {options.count:,} within_limit blocks per kind, "
              f"best of {options.repeat}; "
              + (f"server and client pinned to CPU {pinned}" if pinned is not None else "not pinned"))
        print(f"{'kind':<34} {'round trips':>11} {'wall us':>9} {'client CPU us':>14} {'Redis us/call':>14}")
        for label, (trips, wall, cpu, server_us) in best.items():
            print(f"{label:<34} {trips:>11.2f} {wall:>9.1f} {cpu:>14.1f} {server_us:>14.1f}")
        raw.close()
    finally:
        redis_layer.reset()
        server.stop()


def drain_once(client: redis_py.Redis, job_name: str, jobs: int, concurrency: int) -> tuple[float, float, float]:
    """(jobs/s, worker CPU us per job, redis-server CPU us per job) of one worker draining ``jobs`` jobs."""
    from bench import jobs as bench_jobs

    preload(getattr(bench_jobs, job_name), jobs)
    redis_pid = int(client.info("server")["process_id"])

    def done() -> int:
        return int(client.get("bench:counter") or 0)

    worker = start_worker(concurrency)
    try:
        # Timed from the first hundred, so the worker's start-up (Django, imports, dialling) is not counted.
        if not wait_for(lambda: done() > 0, 60, 0.001):
            raise SystemExit(f"{job_name}: the worker ran no job within 60 s")
        began, first = time.perf_counter(), done()
        worker_cpu, redis_cpu = tree_cpu_seconds(worker.pid), cpu_seconds(redis_pid)
        if not wait_for(lambda: done() >= jobs, 300, 0.002):
            raise SystemExit(f"{job_name}: drain incomplete: {done()} of {jobs}")
        elapsed = time.perf_counter() - began
        worker_cpu = tree_cpu_seconds(worker.pid) - worker_cpu
        redis_cpu = cpu_seconds(redis_pid) - redis_cpu
        timed = jobs - first
        return timed / elapsed, worker_cpu / timed * 1e6, redis_cpu / timed * 1e6
    finally:
        stop_worker(worker)


def overhead(baseline_rate: float, rate: float) -> float:
    """Extra time per job against the baseline, in %."""
    return (baseline_rate / rate - 1) * 100


def unlimited_floor(calls: int = 200_000, repeat: int = 3) -> float:
    """Microseconds of CPU ``run_within([unlimited()])`` adds to a job, in this process, best of ``repeat``:
    the drains' own figure swings with the machine by more than this whole cost."""
    from djwork import limiter
    from djwork.worker.limits import run_within

    limits = [limiter.unlimited()]

    def body() -> None:
        return None

    best = float("inf")
    for _ in range(repeat):
        began = time.process_time()
        for _index in range(calls):
            body()
        bare = time.process_time() - began
        began = time.process_time()
        for _index in range(calls):
            run_within(limits, "bench", body)
        best = min(best, (time.process_time() - began - bare) / calls * 1e6)
    return best


def per_job(options: argparse.Namespace) -> None:
    server = start_redis()
    try:
        setup_django()
        client = redis_py.Redis.from_url(server.url)
        results: dict[str, list[tuple[float, float, float]]] = {label: [] for label, _ in DRAIN_VARIANTS}
        print(f"redis-server {client.info('server')['redis_version']}; {options.jobs:,} jobs per drain, "
              f"one runworkers process -c {options.concurrency}, {options.rounds} rounds, variants interleaved")
        print(f"{'round':<6} {'variant':<32} {'jobs/s':>8} {'worker CPU us/job':>18} {'Redis CPU us/job':>17}")
        for round_number in range(options.rounds):
            shift = round_number % len(DRAIN_VARIANTS)
            for label, job_name in DRAIN_VARIANTS[shift:] + DRAIN_VARIANTS[:shift]:
                rate, worker_us, redis_us = drain_once(client, job_name, options.jobs, options.concurrency)
                results[label].append((rate, worker_us, redis_us))
                print(f"{round_number + 1:<6} {label:<32} {rate:>8,.0f} {worker_us:>18.1f} {redis_us:>17.1f}",
                      flush=True)
        client.close()
        print()
        print(f"{'variant':<32} {'median jobs/s':>13} {'overhead (per round)':>26} "
              f"{'worker CPU us/job':>18} {'Redis CPU us/job':>17}")
        baseline = results[DRAIN_VARIANTS[0][0]]
        baseline_rate = statistics.median(rate for rate, _, _ in baseline)
        for label, runs in results.items():
            rate = statistics.median(each[0] for each in runs)
            worker_us = statistics.median(each[1] for each in runs)
            redis_us = statistics.median(each[2] for each in runs)
            if runs is baseline:
                spread = "-"
            else:
                paired = [overhead(base[0], run[0]) for base, run in zip(baseline, runs, strict=True)]
                spread = f"{overhead(baseline_rate, rate):+.1f} % [{min(paired):+.1f} .. {max(paired):+.1f}]"
            print(f"{label:<32} {rate:>13,.0f} {spread:>26} {worker_us:>18.1f} {redis_us:>17.1f}")
        floor = unlimited_floor()
        plain_cpu = statistics.median(each[1] for each in baseline)
        print(f"\nin this process, no worker: run_within([unlimited()]) adds {floor:.2f} us of CPU per job, "
              f"{floor / plain_cpu * 100:.1f} % of the plain drain's median worker CPU per job")
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=5_000, help="blocks per kind and run (default 5000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per kind; the best counts (default 3)")
    parser.add_argument("--cpu", type=int, default=None,
                        help="pin redis-server and this process to this CPU (default: the last one; -1: no pinning)")
    parser.add_argument("--drain", action="store_true",
                        help="measure a worker's drain rate per job variant instead of single decisions")
    parser.add_argument("--jobs", type=int, default=20_000,
                        help=f"--drain: jobs per drain, a multiple of {PROGRESS_STEP} (default 20000)")
    parser.add_argument("--rounds", type=int, default=3, help="--drain: drains per variant (default 3)")
    parser.add_argument("--concurrency", type=int, default=10, help="--drain: the worker's -c (default 10)")
    options = parser.parse_args(argv)
    if options.drain:
        if options.jobs < 2 * PROGRESS_STEP or options.jobs % PROGRESS_STEP:
            # The jobs count their runs in hundreds: any other total would never be seen as drained.
            parser.error(f"--jobs must be a multiple of {PROGRESS_STEP} and at least {2 * PROGRESS_STEP}")
        if options.rounds < 1 or options.concurrency < 1:
            parser.error("--rounds and --concurrency must be at least 1")
        per_job(options)
    else:
        per_decision(options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
