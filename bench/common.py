"""Shared benchmark plumbing: a private redis-server and a Django setup pointing at it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from djwork.testing.redis_server import RedisServer  # noqa: E402
from djwork.worker.memory import rss_kb  # noqa: E402


def start_redis() -> RedisServer:
    server = RedisServer().start()
    os.environ["BENCH_REDIS_URL"] = server.url
    return server


def setup_django() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()


def noop_target(total: int, processes: int) -> int:
    """Where a no-op drain of `total` jobs ends: each worker process adds 100 per 100 of its own runs, so up
    to 99 runs per process never reach the counter; the last full hundred it is sure to reach is this."""
    floor = max(100, total - 99 * processes)
    return -(-floor // 100) * 100


def start_worker(concurrency: int = 10, processes: int = 1, extra: list[str] | None = None) -> subprocess.Popen:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench.settings", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, str(ROOT / "manage.py"), "runworkers", "-c", str(concurrency), "-q", "bench"]
    if processes > 1:
        command += ["--processes", str(processes)]
    return subprocess.Popen(command + (extra or []), cwd=ROOT, env=env)


def stop_worker(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def children_map() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree, found, todo = children_map(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree_rss_kb(pid: int) -> int:
    """RSS of a process and all its descendants (a swarm parent and its forked workers)."""
    return sum(rss_kb(each) for each in [pid, *descendants(pid)])


def wait_for(predicate, timeout: float, interval: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def preload(job, count: int) -> None:
    """Empty the benchmark Redis and push ``count`` argument-less ``job`` jobs, in bulk."""
    import redis

    redis.Redis.from_url(os.environ["BENCH_REDIS_URL"]).flushdb()
    for start in range(0, count, 10_000):
        job.delay_many([()] * min(10_000, count - start))


def table(rows: list[tuple[str, str]], title: str) -> str:
    width = max(len(name) for name, _ in rows)
    lines = [title, "-" * len(title)]
    lines += [f"{name.ljust(width)}  {value}" for name, value in rows]
    return "\n".join(lines)
