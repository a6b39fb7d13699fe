"""Real ``manage.py runworkers`` subprocesses for tests/test_worker_*.py, and deadline-bound waits.

Workers run with DJANGO_SETTINGS_MODULE=tests.settings_worker against the
suite's private Redis (DJWORK_TEST_REDIS_URL) only; each one's output goes to
its own file. The ``workers`` fixture kills, by pid, every process it
started that is still alive when the test ends, and prints the tail of each
log (pytest shows it when the test failed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float, message: str = "condition",
               interval: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {message} (last value {value!r})")
        time.sleep(interval)


def decode(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


class LoggedProcess:
    """A subprocess the tests started, with its output in a file: shared by djwork, gunicorn and Ruby processes."""

    def __init__(self, process: subprocess.Popen[bytes], log_path: Path, label: str) -> None:
        self.process = process
        self.log_path = log_path
        self.label = label
        self._identity: str | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.label} (pid {self.pid}) still running after {timeout}s:\n"
                                 f"{self.log()[-3000:]}") from None

    def wait_log(self, text: str, timeout: float) -> str:
        wait_until(lambda: text in self.log(), timeout, f"{text!r} in the log of {self.label}")
        return self.log()

    def find_identity(self, redis: Any) -> str | None:
        """The identity this process registered in ``processes`` (matched by the pid in its info), if any yet."""
        if not self.alive():
            raise AssertionError(f"{self.label} exited ({self.process.returncode}):\n{self.log()[-4000:]}")
        for member in redis.smembers("processes"):
            info = redis.hget(member, "info")
            if info and json.loads(info).get("pid") == self.pid:
                return decode(member)
        return None


class Worker(LoggedProcess):
    """One ``runworkers`` subprocess."""

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait(10)

    def identity(self, redis: Any, timeout: float = 20.0) -> str:
        if self._identity is None:
            self._identity = wait_until(lambda: self.find_identity(redis), timeout, f"{self.label} to register")
        return self._identity


class Workers:
    """Starts workers for one test and guarantees none outlives it."""

    def __init__(self, directory: Path, redis_url: str) -> None:
        self.directory = directory
        self.redis_url = redis_url
        self.started: list[Worker] = []

    def start(self, *args: str, overrides: dict[str, Any] | None = None, label: str | None = None) -> Worker:
        label = label or f"w{len(self.started) + 1}"
        env = dict(os.environ)
        env.update({
            "DJANGO_SETTINGS_MODULE": "tests.settings_worker",
            "DJWORK_TEST_REDIS_URL": self.redis_url,
            "DJWORK_TEST_OVERRIDES": json.dumps(overrides or {}),
            "PYTHONUNBUFFERED": "1",
        })
        env.pop("REDIS_URL", None)
        log_path = self.directory / f"worker-{label}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "manage.py", "runworkers", *args],
                cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = Worker(process, log_path, label)
        self.started.append(worker)
        return worker

    def cleanup(self) -> None:
        for worker in self.started:
            if worker.alive():
                worker.kill()
            tail = "\n".join(worker.log().splitlines()[-80:])
            print(f"----- worker {worker.label} pid {worker.pid} rc {worker.process.returncode} "
                  f"({worker.log_path}) -----\n{tail}")


@pytest.fixture
def workers(raw_redis, redis_url: str, tmp_path: Path):
    if urlparse(redis_url).port == 6379:
        raise RuntimeError("worker tests run against the private Redis only")
    pool = Workers(tmp_path, redis_url)
    try:
        yield pool
    finally:
        pool.cleanup()


# --- reading what the workers left in Redis ------------------------------------------
def zset_jobs(redis: Any, key: str) -> list[tuple[dict[str, Any], float, str]]:
    """(parsed job, score, raw member) for every member of a sorted set, lowest score first."""
    return [(json.loads(member), score, decode(member)) for member, score in redis.zrange(key, 0, -1, withscores=True)]


def counts(redis: Any, key: str = "t:counts") -> dict[str, int]:
    return {decode(k): int(v) for k, v in redis.hgetall(key).items()}


def in_progress_items(redis: Any) -> dict[str, list[str]]:
    """Every djwork:inprogress:* list and its contents."""
    return {decode(key): [decode(item) for item in redis.lrange(key, 0, -1)]
            for key in redis.scan_iter("djwork:inprogress:*", _type="list")}


def send_remote_signal(redis: Any, identity: str, name: str) -> None:
    """What Sidekiq's Process#quiet!/#stop!/#dump_threads do: MULTI LPUSH + EXPIRE 60."""
    pipe = redis.pipeline(transaction=True)
    pipe.lpush(f"{identity}-signals", name)
    pipe.expire(f"{identity}-signals", 60)
    pipe.execute()
