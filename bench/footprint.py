"""Redis memory per job, by kind of job, and what bounds it (a benchmark, not a test; docs/capacity.md).

    ./dev bench footprint [--jobs 20000] [--kinds plain,results,...]

Per kind, on an emptied private Redis with one worker (-c 10, a 1 s beat):
a warm-up of 1,000 jobs (so the keys a kind creates once, such as a
limiter's or a job class's metrics, exist before the baseline), then
``--jobs`` jobs pushed and drained, then two beats (the metrics' and the
history's flushes land). Prints Redis's ``used_memory`` growth per job, and
per family of keys (djwork/redis/key_bounds.py) the bytes per job it holds and the
TTL or cap that bounds them: the numbers docs/capacity.md turns into a sizing
rule. The history stream is left out of the per-job figures (it is capped, not
per job) and reported at its cap; the metrics keys per job class and minute.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from common import setup_django, start_redis, start_worker, stop_worker, wait_for

WARM_UP = 1_000
BATCH_SIZE = 100
HISTORY = "djwork:history"


@dataclass(frozen=True)
class Kind:
    name: str
    label: str
    push: Callable[[int, int], None]  # (first index, count)
    settings: dict[str, object] = field(default_factory=dict)  # DJWORK overrides, client and worker alike


def _plain(first: int, count: int) -> None:
    from bench.jobs import drain_plain

    for start in range(0, count, 10_000):
        drain_plain.delay_many([()] * min(10_000, count - start))


def _unique(first: int, count: int) -> None:
    from bench.jobs import drain_unique

    drain_unique.delay_many([(first + n,) for n in range(count)])


def _batched(first: int, count: int) -> None:
    import djwork
    from bench.jobs import drain_plain

    for start in range(0, count, BATCH_SIZE):
        batch = djwork.Batch(description="footprint")
        with batch.jobs():
            drain_plain.delay_many([()] * min(BATCH_SIZE, count - start))


def _periodic(first: int, count: int) -> None:
    from djwork.api import Periodic

    periodic = Periodic()
    for _ in range(count):
        periodic.run_now("footprint")


def _concurrent(first: int, count: int) -> None:
    from bench.jobs import drain_concurrent

    drain_concurrent.delay_many([()] * count)


def _window(first: int, count: int) -> None:
    from bench.jobs import drain_window

    drain_window.delay_many([()] * count)


OFF = {"RESULTS": False, "METRICS": True}
KINDS = [
    Kind("plain", "plain, RESULTS=False", _plain, OFF),
    Kind("results", "plain, RESULTS=True", _plain, {**OFF, "RESULTS": True}),
    Kind("no-metrics", "plain, RESULTS=False, METRICS=False", _plain, {**OFF, "METRICS": False}),
    Kind("unique", "unique (unique_for=3600)", _unique, OFF),
    Kind("batch", f"in a batch ({BATCH_SIZE} jobs a batch)", _batched, OFF),
    Kind("periodic", "periodic (a run of one entry each)", _periodic, {**OFF, "PERIODIC": [
        {"cron": "0 0 1 1 *", "job": "bench.jobs.drain_plain", "name": "footprint"}]}),
    Kind("concurrent", "limited: concurrent, 5 at once", _concurrent, OFF),
    Kind("window", "limited: window, 10^9 a second", _window, OFF),
]


def _worker_env(settings: dict[str, object]) -> None:
    os.environ["BENCH_RESULTS"] = "1" if settings.get("RESULTS") else "0"
    os.environ["BENCH_METRICS"] = "1" if settings.get("METRICS") else "0"
    os.environ["BENCH_HEARTBEAT_INTERVAL"] = "1"
    if "PERIODIC" in settings:
        os.environ["BENCH_PERIODIC"] = "1"
    else:
        os.environ.pop("BENCH_PERIODIC", None)


def snapshot(client) -> tuple[int, dict[str, list[int]]]:
    """(used_memory less clients' buffers, bound name -> [key count, bytes]) of every djwork key (MEMORY USAGE)."""
    from djwork.redis import key_bounds

    groups: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    names = [raw.decode() for raw in client.scan_iter(count=5000) if not raw.startswith(b"bench:")]
    for start in range(0, len(names), 2000):
        chunk = names[start:start + 2000]
        pipe = client.pipeline(transaction=False)
        for name in chunk:
            pipe.memory_usage(name, samples=0)
        for name, usage in zip(chunk, pipe.execute(), strict=True):
            bound = key_bounds.bound_of(name)
            group = groups[bound.name if bound else f"(undeclared) {name}"]
            group[0] += 1
            group[1] += usage or 0
    # Less the clients' buffers: a pipeline of 10,000 pushes leaves a large query buffer for a while, which is
    # the client's, not the jobs'.
    memory = client.info("memory")
    return int(memory["used_memory"]) - int(memory.get("mem_clients_normal", 0)), dict(groups)


def wait_beats(client, beats: int = 2) -> None:
    identity = next(iter(client.smembers("processes")))
    seen = [client.hget(identity, "beat")]

    def advanced() -> bool:
        beat = client.hget(identity, "beat")
        if beat != seen[-1]:
            seen.append(beat)
        return len(seen) > beats

    if not wait_for(advanced, 30, 0.05):
        raise RuntimeError("the worker stopped beating")


def drain(client, kind: Kind, first: int, count: int, target: int) -> None:
    from django.conf import settings
    from django.test import override_settings

    with override_settings(DJWORK={**settings.DJWORK, **kind.settings}):
        kind.push(first, count)

    def done() -> bool:
        counted = int(client.get("bench:counter") or 0)
        busy = any(client.llen(key) for key in client.scan_iter("djwork:inprogress:*", _type="list"))
        return counted >= target and not client.llen("queue:bench") and not busy

    if not wait_for(done, 600, 0.05):
        raise RuntimeError(f"{kind.name}: the drain did not finish")
    wait_beats(client)


def measure(kind: Kind, jobs: int) -> dict[str, object]:
    import redis

    from djwork.redis import key_bounds

    client = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    client.flushdb()
    _worker_env(kind.settings)
    worker = start_worker(concurrency=10)
    try:
        if not wait_for(lambda: client.scard("processes") > 0, 60, 0.05):
            raise RuntimeError("the worker did not start")
        drain(client, kind, 0, WARM_UP, WARM_UP)
        used_before, before = snapshot(client)
        drain(client, kind, WARM_UP, jobs, WARM_UP + jobs)
        used_after, after = snapshot(client)
    finally:
        stop_worker(worker)
        client.close()
    families = []
    for name in sorted(set(before) | set(after)):
        keys_delta = after.get(name, [0, 0])[0] - before.get(name, [0, 0])[0]
        bytes_delta = after.get(name, [0, 0])[1] - before.get(name, [0, 0])[1]
        if name == HISTORY or abs(bytes_delta) < 0.5 * jobs:
            # The history is capped, not per job (reported apart); the rest did not grow with jobs (a new
            # minute's metrics key is a key more, not bytes per job).
            continue
        bound = key_bounds.bound_of(name.split(" ")[-1]) if name.startswith("(") else None
        declared = next((b for b in key_bounds.BOUNDS if b.name == name), bound)
        lives = " / ".join(part for part in (declared.ttl, declared.cap) if part) if declared else "UNDECLARED"
        families.append((name, keys_delta, bytes_delta / jobs, lives))
    history_bytes = after.get(HISTORY, [0, 0])[1] - before.get(HISTORY, [0, 0])[1]
    return {"kind": kind, "per_job": (used_after - used_before - history_bytes) / jobs, "families": families,
            "history": after.get(HISTORY, [0, 0])[1]}


def queued_per_job(jobs: int) -> float:
    """used_memory per job waiting in its queue (no worker running): what a backlog costs while it lasts."""
    import redis
    from django.conf import settings
    from django.test import override_settings

    client = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    client.flushdb()
    with override_settings(DJWORK={**settings.DJWORK, **OFF}):
        _plain(0, WARM_UP)
        used_before, _ = snapshot(client)
        _plain(0, jobs)
        used_after, _ = snapshot(client)
    client.flushdb()
    client.close()
    return (used_after - used_before) / jobs


def metrics_per_class(client_url: str) -> str:
    """Bytes the metrics keys of one job class hold at steady state: 8 h of minutes, 72 h of 10 minutes."""
    import redis

    client = redis.Redis.from_url(client_url)
    _, groups = snapshot(client)
    client.close()
    rows = []
    total = 0.0
    for name, keep in (("j|YYMMDD|H:MM", 8 * 60), ("h|<Class>-<D>-<H>:<M>", 8 * 60), ("j|YYMMDD|H:M", 72 * 6)):
        count, size = groups.get(name, [0, 0])
        if count:
            total += size / count * keep
            rows.append(f"{name}: {size / count:.0f} B a key x {keep} kept")
    return f"{'; '.join(rows)} => {total / 1e6:.2f} MB per job class at steady state (one class, one queue)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--kinds", default=",".join(kind.name for kind in KINDS))
    args = parser.parse_args()
    if args.jobs % 100:
        parser.error("--jobs must be a multiple of 100 (the drain counts runs by the hundred)")
    chosen = [kind for kind in KINDS if kind.name in args.kinds.split(",")]
    server = start_redis()
    setup_django()
    print(f"bench/footprint.py --jobs {args.jobs}, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, "
          f"{chosen and os.uname().nodename}")
    try:
        print(f"\nqueued, not yet run (a backlog): {queued_per_job(args.jobs):.1f} bytes of used_memory per job")
        results = []
        for kind in chosen:
            began = time.monotonic()
            result = measure(kind, args.jobs)
            results.append(result)
            print(f"\n{kind.label}: {result['per_job']:.1f} bytes of used_memory per job "
                  f"({time.monotonic() - began:.0f} s)")
            for name, keys_delta, per_job, lives in result["families"]:
                print(f"    {name:42} {keys_delta:+7d} keys {per_job:8.1f} B/job  lives: {lives}")
            if kind.name == "plain":
                print(f"    (djwork:history holds {result['history'] / 1e6:.2f} MB at its cap, "
                      f"HISTORY_MAX_LENGTH runs; capped, not per job)")
                print(f"    metrics: {metrics_per_class(server.url)}")
        print("\n| kind | bytes per job | held by | lives |\n| --- | ---: | --- | --- |")
        for result in results:
            held = "; ".join(f"`{name}` {per_job:.0f} B".replace("|", "\\|")
                             for name, _, per_job, _ in result["families"]) or "—"
            lives = "; ".join(sorted({lives for *_, lives in result["families"]})) or "—"
            print(f"| {result['kind'].label} | {result['per_job']:.0f} | {held} | {lives} |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
