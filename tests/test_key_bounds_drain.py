"""After a real worker drains jobs of every kind, each key left in Redis is declared and has its declared TTL.

The other half of tests/test_key_bounds.py: the declarations say what a key
may hold; this checks what djwork really leaves behind.
"""

from __future__ import annotations

import pytest

import djwork
from djwork.redis import key_bounds, keys
from tests import batch_jobs, iterable_jobs, limiter_jobs, unique_jobs, worker_jobs
from tests.helpers_worker import counts, in_progress_items, wait_beats, wait_until

pytestmark = pytest.mark.slow

TEST_KEYS = ("t:", "i:")  # what the test jobs write to count themselves (tests/worker_jobs.py, iterable_jobs.py)


def test_a_drain_leaves_no_undeclared_key_and_no_declared_ttl_missing(workers, raw_redis):
    worker_jobs.record.delay_many([(f"plain-{n}",) for n in range(20)])
    for n in range(5):
        unique_jobs.sync_account.delay(n)
        limiter_jobs.concurrent_job.delay(f"limited-{n}", 0)
        limiter_jobs.windowed_job.delay(f"windowed-{n}")
    # Fails at its 6th item: its saved cursor waits for the retry in djwork:iteration:<jid>.
    iterating = iterable_jobs.CountTo.delay("bounds", 10, fail_at=5).jid
    batch = djwork.Batch(description="bounds", on_success=batch_jobs.on_event, keep_results=True)
    with batch.jobs():
        batch_jobs.member.delay_many([(n,) for n in range(5)])
    worker = workers.start("-q", "default", "-c", "3", overrides={"HEARTBEAT_INTERVAL": 1})
    identity = worker.identity(raw_redis)

    def drained() -> bool:
        done = counts(raw_redis)
        return (sum(1 for key in done if key.startswith(("plain-", "limited-", "windowed-"))) == 30
                and len(counts(raw_redis, batch_jobs.RUNS)) == 5
                and counts(raw_redis, f"{batch_jobs.CALLBACKS}:{batch.bid}").get("success") == 1
                and not raw_redis.llen("queue:default") and not any(in_progress_items(raw_redis).values()))

    wait_until(drained, 60, "every job and the batch's success callback to run")
    wait_until(lambda: len(counts(raw_redis)) >= 35, 30, "the unique jobs to run")  # 30 above + 5 accounts
    wait_until(lambda: raw_redis.exists(keys.iteration(iterating)), 30, "the iterable job's saved cursor")
    wait_beats(raw_redis, identity, beats=2)  # the heartbeat's metrics and the history's flush are written
    undeclared, missing_ttl = [], []
    for raw in raw_redis.scan_iter(count=1000):
        key = raw.decode()
        if key.startswith(TEST_KEYS):
            continue
        bound = key_bounds.bound_of(key)
        if bound is None:
            undeclared.append(key)
        elif bound.ttl and raw_redis.pttl(key) < 0:
            missing_ttl.append((key, bound.ttl))
    assert undeclared == [], "keys left in Redis that djwork/redis/key_bounds.py does not declare"
    assert missing_ttl == [], "keys declared with a TTL but left without one"
