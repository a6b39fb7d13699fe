"""What a worker writes when Redis is gone at boot or goes away during its shutdown: a few lines, no tracebacks.

Each test runs a real ``manage.py runworkers`` against a redis-server of its own, which it stops; the
assertions count log lines (bounded), never time.
"""

from __future__ import annotations

import logging
import re
import signal

import pytest
import redis as redis_py
from redis.exceptions import ConnectionError as RedisConnectionError

from djwork import payload
from djwork.redis.outage import OutageTracker
from djwork.testing.redis_server import RedisServer
from tests.helpers_worker import in_progress_items, wait_until

RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ \d+ (\w+) ", re.MULTILINE)


def _records(log: str) -> list[str]:
    return [match.group(0) for match in RECORD.finditer(log)]


def _push_naps(client: redis_py.Redis, count: int, seconds: float) -> list[str]:
    jobs = [payload.build("tests.outage_jobs.nap", [seconds], None) for _ in range(count)]
    client.sadd("queues", "default")
    client.lpush("queue:default", *[payload.dumps(job) for job in jobs])
    return [job["jid"] for job in jobs]


@pytest.mark.slow
@pytest.mark.parametrize("redis_stops", ["before the TERM", "during the drain"])
def test_a_shutdown_that_cannot_reach_redis_says_once_what_it_could_not_do(workers, own_redis, redis_stops):
    # During the drain: Redis is killed once the drain said it waits, well inside its 15 s.
    drain = 2 if redis_stops == "before the TERM" else 15
    worker = workers.start("-c", "3", "-q", "default", redis_url=own_redis.url,
                           overrides={"TIMEOUT": drain}, label="worker")
    client = redis_py.Redis.from_url(own_redis.url)
    try:
        worker.identity(client)
        _push_naps(client, 3, 60)
        wait_until(lambda: sum(len(items) for items in in_progress_items(client).values()) == 3, 20,
                   "three jobs in progress")
        # Taken is not yet running: a TERM between the two found 2 running jobs, not 3.
        wait_until(lambda: worker.log().count(" start jid=") == 3, 20, "three jobs started")
    finally:
        client.close()
    before = len(worker.log())
    if redis_stops == "before the TERM":
        own_redis.kill()
        worker.send(signal.SIGTERM)
    else:
        worker.send(signal.SIGTERM)
        worker.wait_log("waiting for 3 running job(s)", 10)
        own_redis.kill()
    assert worker.wait_exit(drain + 30) == 0
    shutdown = worker.log()[before:]
    assert "Traceback" not in shutdown
    # The drain says what it waits for, between "quiet" and "stopped".
    assert f"INFO djwork.worker MainThread djwork: waiting for 3 running job(s), up to {drain}s" in shutdown
    # Before: 333 lines and 26 tracebacks in 2 s (a retry line per attempt, a traceback per step and loop).
    assert len(_records(shutdown)) <= 12, shutdown
    assert re.search(r"could not push back 3 job\(s\): Redis unreachable; they stay in \S+ and come back by "
                     r"orphan recovery", shutdown), shutdown


@pytest.mark.slow
def test_booting_with_redis_down_writes_a_few_lines_not_one_per_retry(workers, tmp_path, monkeypatch):
    late = RedisServer(directory=str(tmp_path / "late-redis"))  # a reserved port, nothing listening yet
    # DEBUG lines are the test's clock: each boot retry writes one, so "ten retries happened" is observable.
    monkeypatch.setenv("DJWORK_TEST_LOG_LEVEL", "DEBUG")
    worker = workers.start("-c", "1", "-q", "default", redis_url=late.url, label="worker")
    try:
        wait_until(lambda: worker.log().count("djwork: Redis unreachable at boot") >= 10, 60, "ten boot retries")
        booting = worker.log()
        louder = [line for line in RECORD.finditer(booting) if line.group(1) in ("WARNING", "ERROR")]
        # The outage said once, the boot's own line once, a retry line or two before the outage is declared:
        # not one line per retry (ten here, one every ~1.3 s before).
        assert len(louder) <= 4, booting
        assert "Redis unreachable at boot" in booting and "is unreachable (" in booting
        late.start()
        worker.wait_log("starting: identity=", 30)
        assert "Redis is back after" in worker.log()
    finally:
        late.stop()
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(15) == 0


def test_during_a_shutdown_the_first_failure_is_the_outage_said_once(caplog):
    caplog.set_level(logging.DEBUG, logger="djwork.redis")
    tracker = OutageTracker()
    tracker.configure("redis://127.0.0.1:1/0", max_pause=10)
    tracker.shutting_down()
    refused = RedisConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")
    # No streak to wait for: a shutdown has seconds, and each step would log its own retries and traceback.
    assert tracker.failed("heartbeat", refused) is True
    assert tracker.failed("reaper", refused) is True
    tracker.dial_failed(refused)
    lines = [record.getMessage() for record in caplog.records if record.name == "djwork.redis"]
    assert len(lines) == 1 and "is unreachable during the shutdown" in lines[0], lines
    tracker.disable()  # the worker stopped: the next one starts with a tracker that waits for streaks again
    tracker.configure("redis://127.0.0.1:1/0")
    assert tracker.failed("heartbeat", refused) is False
