"""What a live worker shows the cluster, and paused queues.

docs/wire.md: Processes, Work, Stats; checks P1-P17, W0-W4, T1-T2.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import signal
import time

from tests import worker_jobs
from tests.helpers_worker import counts, decode, wait_beats, wait_until

FIVE_YEARS = 5 * 365 * 24 * 3600


def test_heartbeat_fields_match_sidekiq(workers, raw_redis):
    # Pushed first, so the raw string is read before any worker can take it.
    worker_jobs.slow.set(queue="low").delay("hb", 2.5)
    (raw,) = raw_redis.lrange("queue:low", 0, -1)
    worker = workers.start("-c", "3", "-q", "default", "-q", "low", "--tag", "t7")
    identity = worker.identity(raw_redis)
    assert raw_redis.sismember("processes", identity)

    # While a job runs, both work hashes describe it.
    wait_until(lambda: raw_redis.hget(identity, "busy") == b"1", 20, "busy=1")
    for key in (f"{identity}:work", f"{identity}:workers"):
        work = {decode(k): decode(v) for k, v in raw_redis.hgetall(key).items()}
        assert len(work) == 1, key
        ((tid, value),) = work.items()
        assert re.fullmatch(r"[0-9a-z]+", tid)
        entry = json.loads(value)
        assert set(entry) == {"queue", "payload", "run_at"}
        assert entry["queue"] == "low"
        assert isinstance(entry["payload"], str) and entry["payload"] == decode(raw)
        assert isinstance(entry["run_at"], int) and abs(entry["run_at"] - time.time()) < 60
        assert 0 < raw_redis.ttl(key) <= 60

    wait_until(lambda: counts(raw_redis).get("hb") == 1, 20, "the slow job to finish")
    wait_until(lambda: raw_redis.hget(identity, "busy") == b"0", 20, "busy=0 again")
    assert not raw_redis.exists(f"{identity}:work", f"{identity}:workers")

    fields = {decode(k): decode(v) for k, v in raw_redis.hgetall(identity).items()}
    assert {"info", "busy", "beat", "quiet", "rss", "rtt_us"} <= set(fields)
    info = json.loads(fields["info"])
    assert info["identity"] == identity
    assert isinstance(info["hostname"], str) and info["hostname"]
    assert identity.startswith(f"{info['hostname']}:{worker.pid}:")
    assert isinstance(info["started_at"], float) and abs(info["started_at"] - time.time()) < 30
    assert isinstance(info["pid"], int) and info["pid"] == worker.pid
    assert info["tag"] == "t7"
    assert isinstance(info["concurrency"], int) and info["concurrency"] == 3
    assert info["queues"] == ["default", "low"]
    assert info["labels"] == []
    assert info["weights"] == [{"default": 0, "low": 0}]
    assert isinstance(info["version"], str) and info["version"]
    assert info["embedded"] is False
    assert fields["busy"] == "0"
    assert abs(float(fields["beat"]) - time.time()) < 60  # a Unix time, recent
    assert fields["quiet"] == "false"
    assert int(fields["rss"]) > 0
    assert int(fields["rtt_us"]) >= 0
    assert 0 < raw_redis.ttl(identity) <= 60

    # Beats keep coming.
    first_beat = float(fields["beat"])
    wait_until(lambda: float(raw_redis.hget(identity, "beat")) > first_beat, 20, "the next beat")

    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    wait_until(lambda: raw_redis.get(f"stat:processed:{today}") == b"1", 20, "today's processed counter")
    assert raw_redis.get("stat:processed") == b"1"
    assert FIVE_YEARS - 60 <= raw_redis.ttl(f"stat:processed:{today}") <= FIVE_YEARS
    assert raw_redis.ttl("stat:processed") == -1

    worker.send(signal.SIGTERM)
    assert worker.wait_exit(10) == 0
    assert raw_redis.scard("processes") == 0


def test_paused_queue_is_not_fetched_until_unpaused(workers, raw_redis):
    raw_redis.sadd("paused", "default")
    worker_jobs.record.delay("paused-job")
    worker = workers.start("-c", "2", "-q", "default", "-q", "low")
    identity = worker.identity(raw_redis)
    # The other queue keeps flowing while default is paused: its job, pushed after the paused one and
    # on a queue fetched after it, has run, and beats later the paused one still waits.
    worker_jobs.record.set(queue="low").delay("low-job")
    wait_until(lambda: counts(raw_redis).get("low-job") == 1, 20, "the job on the unpaused queue")
    wait_beats(raw_redis, identity, 2)
    assert "paused-job" not in counts(raw_redis)
    assert raw_redis.llen("queue:default") == 1

    raw_redis.srem("paused", "default")
    wait_until(lambda: counts(raw_redis).get("paused-job") == 1, 20, "the job once unpaused")
    assert raw_redis.llen("queue:default") == 0
