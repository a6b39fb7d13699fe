"""kill -9 of a worker loses no job (reliable fetch + orphan recovery); a job that kills its worker ends in dead."""

from __future__ import annotations

import json
import signal

import pytest

import djwork
from tests import worker_jobs
from tests.helpers_worker import counts, in_progress_items, wait_until, zset_jobs

JOBS = 1_000
CONCURRENCY = 10


def test_kill_minus_nine_mid_run_loses_no_job(workers, raw_redis):
    worker_jobs.slow.delay_many([(index, 0.05) for index in range(JOBS)])
    first = workers.start("-c", str(CONCURRENCY), overrides={"LOG_JOBS": False}, label="victim")
    identity = first.identity(raw_redis)
    wait_until(lambda: int(raw_redis.get("t:runs") or 0) >= 150, 30, "the victim to be mid-way")
    first.send(signal.SIGKILL)
    assert first.wait_exit(10) == -signal.SIGKILL
    done_at_kill = int(raw_redis.get("t:runs"))
    held = in_progress_items(raw_redis)
    orphaned = sum(len(items) for items in held.values())
    # The victim held jobs at its death, on its own in-progress list only.
    assert orphaned >= 1
    assert all(identity in key for key, items in held.items() if items)
    assert done_at_kill < JOBS

    second = workers.start("-c", str(CONCURRENCY), overrides={"LOG_JOBS": False}, label="rescuer")
    wait_until(lambda: len(counts(raw_redis)) == JOBS, 60, "every job to have completed once")
    wait_until(lambda: raw_redis.llen("queue:default") == 0 and not any(in_progress_items(raw_redis).values()),
               20, "queue and in-progress lists empty")
    second.wait_log("recovered", 20)

    seen = counts(raw_redis)
    assert set(seen) == {str(index) for index in range(JOBS)}
    assert all(count >= 1 for count in seen.values())
    duplicates = sum(seen.values()) - JOBS
    restarts = sum(int(v) for v in raw_redis.hvals("t:starts")) - JOBS
    print(f"kill -9 with {orphaned} job(s) in progress: {duplicates} completed twice, {restarts} started twice")
    # Only a job that finished but whose ack had not reached Redis yet can complete
    # twice, and there are never more of those than processor slots.
    assert 0 <= duplicates <= CONCURRENCY
    assert restarts >= 1  # the jobs cut off mid-run did run again
    assert raw_redis.zcard("dead") == 0
    # Recovery retires its own bookkeeping: acked jobs drop their orphan counters.
    wait_until(lambda: raw_redis.hlen("djwork:orphan-counts") == 0, 10, "orphan counters cleared by acks")
    assert not any(identity in member.decode() for member in raw_redis.smembers("djwork:inprogress"))
    # The dead process's beat stamp goes with its lists; the live one's stays.
    assert raw_redis.zscore("djwork:beats", identity) is None
    assert raw_redis.zscore("djwork:beats", second.identity(raw_redis)) is not None


def test_poison_pill_ends_in_dead_after_max_orphanings(workers, raw_redis):
    max_orphanings = 2
    overrides = {"MAX_ORPHANINGS": max_orphanings, "ORPHAN_THRESHOLD": 2, "HEARTBEAT_INTERVAL": 0.5}
    ref = worker_jobs.kill_self.apply_async(["pill"], ignore_result=False)  # its result record is checked below
    for attempt in range(1, max_orphanings + 2):
        worker = workers.start("-c", "2", overrides=overrides, label=f"pill-{attempt}")
        wait_until(lambda attempt=attempt: len(worker_jobs.notes(raw_redis, job="kill_self")) >= attempt, 30,
                   f"run {attempt} of the poison pill")
        assert worker.wait_exit(10) == -signal.SIGKILL
        assert raw_redis.zcard("dead") == 0

    survivor = workers.start("-c", "2", overrides=overrides, label="survivor")
    ((dead, _score, _raw),) = wait_until(lambda: zset_jobs(raw_redis, "dead"), 30, "the pill in dead")
    assert dead["jid"] == ref.jid
    assert dead["class"] == "tests.worker_jobs.kill_self"
    assert dead["error_class"] == "djwork.PoisonPill"
    assert str(max_orphanings) in dead["error_message"]
    assert isinstance(dead["failed_at"], float) and dead["retry_count"] == 0
    assert len(worker_jobs.notes(raw_redis, job="kill_self")) == max_orphanings + 1
    assert raw_redis.llen("queue:default") == 0
    assert not any(in_progress_items(raw_redis).values())
    assert raw_redis.hget("djwork:orphan-counts", ref.jid) is None
    # Its result record says why it ended (written in the burial's own step).
    assert ref.state == "FAILURE"
    with pytest.raises(djwork.JobError, match="poison pill"):
        ref.get(timeout=1)

    # The survivor was never hurt by it and keeps working.
    worker_jobs.record.delay("after")
    wait_until(lambda: counts(raw_redis).get("after") == 1, 10, "a job after the pill")
    assert survivor.alive()
    survivor.send(signal.SIGTERM)
    assert survivor.wait_exit(10) == 0
    assert json.loads(_raw)["args"] == ["pill"]
