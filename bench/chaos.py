"""The chaos table (a benchmark, not a test): every scenario of tests/chaos/scenarios.py, larger than the tests run it.

    ./dev bench chaos [--only kill,swarm,restart,connections,poison,poison-single,term,sentinel]

Starts a private redis-server (djwork.testing.redis_server, never the
machine's Redis): the workers' server in the crash scenarios and, in every
scenario, the ledger the jobs count into (tests/chaos/jobs.py). The Redis
restart and connection-kill scenarios give the workers a dedicated server of
their own, so the fault never touches the counting. Each scenario gets fresh
worker processes (``manage.py runworkers`` with tests/settings_worker.py: a
beat a second, ORPHAN_THRESHOLD 3 s, REAPER_INTERVAL 1 s) and an emptied
Redis. Prints one markdown table (docs/reliability.md defines its columns),
then each scenario's details; workers' logs stay in the printed directory.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from djwork.testing.redis_server import RedisServer  # noqa: E402
from tests.support import private_redis  # noqa: E402


class Skipped(Exception):
    """A scenario that can't run here; the message says why."""


def sentinel_failover(chaos: Any, *, jobs_count: int = 2000, concurrency: int = 10, seconds: float = 0.02,
                      timeout: float = 120) -> Any:
    """The Sentinel failover scenario: a master, a replica and three sentinels; a failover forced mid-drain."""
    try:
        from djwork.testing.sentinel import SentinelTopology
    except ImportError as error:
        raise Skipped(f"no Sentinel test topology: {error}") from None
    from redis.sentinel import Sentinel

    from tests.chaos import jobs, scenarios
    from tests.chaos.ledger import Fault, outcome
    from tests.helpers_worker import wait_until

    # As docs/deployment.md advises: the old master refuses writes once its replica is gone, which
    # bounds how much work lands on it between the failover and its demotion (each of those jobs
    # runs again from the new master's copy of the queue).
    topology = SentinelTopology(str(chaos.directory / "sentinel"),
                                master_options=["--min-replicas-to-write", "1", "--min-replicas-max-lag", "10"]).start()
    try:
        url = topology.url()
        work = Sentinel([("127.0.0.1", port) for port in topology.sentinel_ports]).master_for(topology.service)
        workers = [chaos.start("-c", str(concurrency), label=f"sentinel-{n}", redis_url=url,
                               overrides=scenarios.PATIENT) for n in (1, 2)]
        for worker in workers:
            scenarios.registered(worker, work)
        jids = scenarios.enqueue(url, jobs.work, [(seconds,)] * jobs_count)  # every delay() acknowledged first
        wait_until(lambda: chaos.finished() >= jobs_count // 3, 60, "a third of the jobs done")
        at = time.time()
        old = topology.failover()
        wait_until(lambda: topology.master_port_agreed() not in (None, old), 30, "the sentinels to agree")
        ended = time.time()
        drained = scenarios.wait_drained(chaos, work, jids, timeout)
        return outcome("Sentinel failover", chaos.ledger, work, jids, [Fault(at, ended)], drained_in_time=drained)
    finally:
        topology.stop()


def scenario_table() -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
    """name -> (scenario, its bench size). The tests run the same functions at their defaults."""
    from tests.chaos import scenarios

    return {
        "kill": (scenarios.kill_worker, {"jobs_count": 3000, "concurrency": 10, "seconds": 0.05}),
        "swarm": (scenarios.kill_swarm_children, {"kills": 5, "concurrency": 10, "seconds": 0.1, "batch": 400}),
        "restart": (scenarios.redis_restart, {"jobs_count": 3000, "concurrency": 10, "seconds": 0.02}),
        "connections": (scenarios.connection_kills, {"jobs_count": 8000, "concurrency": 10, "seconds": 0.1,
                                                     "period": 0.2, "duration": 30.0, "timeout": 120}),
        "poison": (scenarios.poison_pill, {"bystanders": 100, "seconds": 1.0, "concurrency": 10}),
        "poison-single": (scenarios.poison_pill, {"bystanders": 30, "seconds": 1.0, "concurrency": 5,
                                                  "processes": 1}),
        "term": (scenarios.term_with_long_jobs, {"stuck": 5, "late": 5, "short": 500, "deadline": 1.0}),
        "sentinel": (sentinel_failover, {}),
    }


def seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def machine() -> str:
    server = redis.Redis.from_url(os.environ["DJWORK_TEST_REDIS_URL"]).info("server")
    return (f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} vCPUs ({platform.machine()}), "
            f"Python {platform.python_version()}, Redis {server['redis_version']} on loopback")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated scenario names (default: all)")
    args = parser.parse_args()
    server = RedisServer().start()
    os.environ[private_redis.URL_ENV] = server.url
    os.environ[private_redis.OWNER_ENV] = private_redis.this_pytest_process()  # ours: the suite's settings keep it
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    import django

    django.setup()
    from tests.chaos.scenarios import Chaos
    from tests.helpers_worker import Workers

    table = scenario_table()
    wanted = [name for name in args.only.split(",") if name] or list(table)
    unknown = set(wanted) - set(table)
    if unknown:
        raise SystemExit(f"unknown scenario(s) {sorted(unknown)}; choose from {sorted(table)}")
    directory = Path(tempfile.mkdtemp(prefix="djwork-chaos-"))
    client = redis.Redis.from_url(server.url)
    rows, details = [], []
    try:
        header = machine()
        for name in wanted:
            run, size = table[name]
            client.flushdb()
            pool = Workers(directory / name, server.url)
            (directory / name).mkdir()
            began = time.monotonic()
            try:
                result = run(Chaos(pool, server.url, directory / name), **size)
            except Skipped as skipped:
                rows.append(f"| {name} | skipped: {skipped} | | | | | | |")
                continue
            finally:
                with open(directory / name / "tails.log", "w") as tails, contextlib.redirect_stdout(tails):
                    pool.cleanup()
            rows.append(f"| {result.scenario} | {result.jobs:,} | {len(result.lost)} | {len(result.finished_twice)} "
                        f"| {len(result.started_twice)} | {seconds(result.resumed)} | {seconds(result.recovered)} "
                        f"| {seconds(result.drained)} |")
            details.append(f"[{name}, {time.monotonic() - began:.0f} s]\n{result.report()}")
            print(f"done: {name}", file=sys.stderr, flush=True)
        print(f"djwork chaos table ({header}; `./dev bench chaos`)\n")
        print("| scenario | jobs | lost | finished twice | started twice | resumed s | recovered s | drained s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        print("\n".join(rows))
        print("\n" + "\n\n".join(details))
        print(f"\nworker logs: {directory}")
    finally:
        server.stop()
        if not details:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
