"""A worker through a 30 s Redis outage: a few log lines, not one per retry; "back after N s"; each job runs once.

The outage is a fault proxy in front of the suite's server refusing every dial
(and cutting the live connections), so the suite's own Redis never stops.
"""

from __future__ import annotations

import logging
import re
import signal
import time

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from djwork.redis.outage import OutageTracker
from tests import worker_jobs
from tests.faultproxy import FaultProxy
from tests.helpers_worker import counts, in_progress_items, wait_until

OUTAGE = 30.0
RECORD_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ \d+ .*$", re.MULTILINE)
BACK = re.compile(r"djwork: Redis is back after (\d+\.\d)s \(redis://127\.0\.0\.1:\d+/\d+\)")


def test_a_30s_outage_writes_a_few_lines_says_when_redis_is_back_and_every_job_runs_once(
        workers, raw_redis, redis_url):
    with FaultProxy.in_front_of(redis_url) as proxy:
        # A 5 s beat: pauses grow 1, 2, 4 s up to one beat (the tests' usual 1 s beat would cap them at 1 s).
        worker = workers.start("-c", "2", "-q", "default", overrides={
            "REDIS_URL": proxy.url, "HEARTBEAT_INTERVAL": 5, "ORPHAN_THRESHOLD": 60})
        wait_until(lambda: worker.find_identity(raw_redis), 20, "the worker to register")
        # Enqueued before the outage: two run across it (their acks wait in the buffer), the rest are queued.
        worker_jobs.slow.delay_many([(f"slow-{n}", 3) for n in range(2)])
        wait_until(lambda: raw_redis.hlen(worker_jobs.STARTS) == 2, 20, "the slow jobs to start")
        worker_jobs.record.delay_many([(f"queued-{n}",) for n in range(10)])
        before = len(worker.log())
        proxy.refuse()
        proxy.cut_all()
        started = time.monotonic()
        worker.wait_log("is unreachable", 20)
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - started)))  # the outage itself lasts 30 s
        during = worker.log()[before:]
        proxy.allow()
        back = BACK.search(worker.wait_log("Redis is back after", 30)[before:])
        assert back, worker.log()[before:]
        assert float(back.group(1)) >= OUTAGE - 5
        # Retry noise only: a finished job's INFO line is not noise, nor is a line that names data the
        # outage lost (history entries, a stats window: one per lost batch, and the jobs here are done).
        noise = [line for line in RECORD_LINE.findall(during)
                 if " INFO " not in line and "history entries lost" not in line and "stats window lost" not in line]
        assert len(noise) <= 5, during
        assert "unreachable" in during and f"127.0.0.1:{proxy.url.rsplit(':', 1)[1].split('/')[0]}" in during
        expected = {f"slow-{n}" for n in range(2)} | {f"queued-{n}" for n in range(10)}
        wait_until(lambda: set(counts(raw_redis)) >= expected, 30, "every job enqueued before the outage")
        wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "every ack")
        ran = counts(raw_redis)
        assert {name: ran[name] for name in expected if ran[name] != 1} == {}
        worker.send(signal.SIGTERM)
        assert worker.wait_exit(15) == 0


def _tracker() -> OutageTracker:
    tracker = OutageTracker()
    tracker.configure("redis://127.0.0.1:1/0", max_pause=10)
    return tracker


def _outage_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "djwork.redis"]


def test_a_single_failure_is_not_an_outage(caplog):
    caplog.set_level(logging.DEBUG, logger="djwork.redis")
    tracker = _tracker()
    cut = RedisConnectionError("Connection closed by server.")
    assert tracker.failed("fetch", cut) is False  # the caller logs its own line, at its own level
    assert tracker.pause("fetch") == 0.0  # and retries at once
    assert tracker.succeeded("fetch") is False
    assert tracker.failed("fetch", cut) is False  # a success in between: a new single failure
    assert _outage_lines(caplog) == []


def test_a_bad_command_is_never_an_outage():
    tracker = _tracker()
    for _ in range(5):
        assert tracker.failed("fetch", ResponseError("WRONGTYPE")) is False
    assert not tracker.declared


def test_a_second_failure_in_a_row_declares_it_once_pauses_grow_to_the_cap_and_the_end_is_said(caplog):
    caplog.set_level(logging.DEBUG, logger="djwork.redis")
    tracker = _tracker()
    refused = RedisConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")
    assert tracker.failed("heartbeat", refused) is False
    assert tracker.failed("heartbeat", refused) is True
    assert tracker.failed("fetch", refused) is True  # other loops are quiet too once it is declared
    pauses = []
    for _ in range(8):
        tracker.failed("heartbeat", refused)
        pauses.append(tracker.pause("heartbeat"))
    assert all(0.5 <= pause <= 10 for pause in pauses), pauses
    assert pauses[-1] >= 5  # grew to the cap (jittered within its upper half)
    lines = _outage_lines(caplog)
    assert len(lines) == 1 and lines[0].startswith("djwork: Redis at redis://127.0.0.1:1/0 is unreachable")
    assert tracker.succeeded("heartbeat") is True
    assert re.match(r"djwork: Redis is back after \d+\.\ds \(redis://127\.0\.0\.1:1/0\)", _outage_lines(caplog)[-1])
    assert not tracker.declared and tracker.pause("heartbeat") == 0.0


def test_a_second_failed_dial_declares_it_and_nothing_happens_while_off(caplog):
    caplog.set_level(logging.DEBUG, logger="djwork.redis")
    tracker = _tracker()
    refused = RedisConnectionError("refused")
    tracker.dial_failed(refused)
    assert not tracker.declared
    tracker.dial_failed(refused)
    assert tracker.declared
    tracker.disable()
    assert not tracker.declared
    tracker.dial_failed(refused)
    tracker.dial_failed(refused)
    assert tracker.failed("fetch", refused) is False and tracker.failed("fetch", refused) is False
    assert not tracker.declared
