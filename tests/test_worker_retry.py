"""Retries, dead set, scheduled jobs and bad data, with real workers.

docs/wire.md: Scheduled/retry/dead sets; checks R1-R5.
"""

from __future__ import annotations

import itertools
import json
import signal
import time

from djwork.payload import dumps, new_jid
from tests import worker_jobs
from tests.helpers_worker import counts, history_runs, wait_until, zset_jobs

# How late a due job may run: the poller checks about twice a second here, and a loaded machine delays
# it further. A failure bound, not a speed claim: it only has to tell seconds from the 15 s+ of a
# default backoff.
POLL_LAG = 10.0


def _make_due(redis, raw: str) -> None:
    """Move a retry entry's score to now (ZADD XX) instead of waiting out the backoff."""
    assert redis.zadd("retry", {raw: time.time()}, xx=True, ch=True) == 1


def test_failures_follow_sidekiq_backoff_and_end_in_dead(workers, raw_redis):
    ref = worker_jobs.always_fail.delay("f")
    workers.start("-c", "2")

    ((first, score, raw),) = wait_until(lambda: zset_jobs(raw_redis, "retry"), 20, "the first retry entry")
    assert first["jid"] == ref.jid
    assert first["retry_count"] == 0
    assert "retried_at" not in first
    assert isinstance(first["failed_at"], float)
    assert first["error_class"] == "RuntimeError"
    assert first["error_message"] == "always_fail f fails"
    assert first["queue"] == "default"
    # count**4 + 15 + rand(10) * (count + 1) with count 0: 15..24 s.
    assert 15 <= score - first["failed_at"] <= 25
    _make_due(raw_redis, raw)

    def second_entry():
        entries = zset_jobs(raw_redis, "retry")
        return entries if entries and entries[0][0].get("retry_count") == 1 else None

    ((second, score, raw),) = wait_until(second_entry, 20, "the second retry entry")
    assert second["failed_at"] == first["failed_at"]
    assert isinstance(second["retried_at"], float) and second["retried_at"] > first["failed_at"]
    assert 16 <= score - second["retried_at"] <= 35  # 1 + 15 + rand(10) * 2
    assert len(worker_jobs.notes(raw_redis, job="always_fail")) == 2
    _make_due(raw_redis, raw)

    ((dead, _score, _raw),) = wait_until(lambda: zset_jobs(raw_redis, "dead"), 20, "the dead entry")
    assert dead["jid"] == ref.jid
    assert dead["retry_count"] == 2
    assert dead["error_class"] == "RuntimeError"
    assert raw_redis.zcard("retry") == 0
    assert len(worker_jobs.notes(raw_redis, job="always_fail")) == 3
    wait_until(lambda: raw_redis.get("stat:failed") == b"3", 20, "stat:failed == 3")
    assert raw_redis.get("stat:processed") == b"3"
    # The history is flushed every quarter second, apart from the dead entry's own write: waited for (its
    # last run was not there yet, beside two CPU burners).
    wait_until(lambda: [run.status for run in history_runs(raw_redis)] == ["retry", "retry", "dead"], 20,
               "the three runs in the history")


def test_bound_retry_countdown_and_max_retries(workers, raw_redis):
    ref = worker_jobs.bound_retry.delay("b")
    workers.start("-c", "2")

    ((entry, score, _raw),) = wait_until(lambda: zset_jobs(raw_redis, "retry"), 20, "the countdown retry")
    assert entry["error_class"] == "djwork.jobs.Retry"
    assert 0.9 <= score - entry["failed_at"] <= 1.1  # countdown=1
    ((dead, _score, _raw),) = wait_until(lambda: zset_jobs(raw_redis, "dead"), 20, "max retries to run out")
    runs = worker_jobs.notes(raw_redis, job="bound_retry")
    assert [run["retries"] for run in runs] == [0, 1, 2]
    gaps = [later["time"] - earlier["time"] for earlier, later in itertools.pairwise(runs)]
    # Never early; the upper bound allows a loaded machine's poller lag, and still rejects a default
    # backoff (15 s and more) in place of the countdown.
    assert all(1.0 <= gap <= 1.0 + POLL_LAG for gap in gaps), gaps
    assert dead["jid"] == ref.jid
    assert dead["error_class"] == "djwork.jobs.MaxRetriesExceededError"
    assert dead["retry_count"] == 2


def test_autoretry_for_retries_only_the_listed_exception(workers, raw_redis):
    listed = worker_jobs.auto_retry.delay("v", "value")
    other = worker_jobs.auto_retry.delay("t", "type")
    workers.start("-c", "2")

    def both_dead():
        dead = {job["jid"]: job for job, _score, _raw in zset_jobs(raw_redis, "dead")}
        return dead if len(dead) == 2 else None

    dead = wait_until(both_dead, 30, "both jobs in dead")
    assert dead[other.jid]["error_class"] == "TypeError"
    assert dead[other.jid]["retry_count"] == 0
    assert len(worker_jobs.notes(raw_redis, job="auto_retry", key="t")) == 1
    assert dead[listed.jid]["error_class"] == "ValueError"
    assert dead[listed.jid]["retry_count"] == 2
    runs = worker_jobs.notes(raw_redis, job="auto_retry", key="v")
    assert len(runs) == 3
    # retry_backoff=1 without jitter: 1 s, then 2 s (plus the poller's lag). The lower bounds show the
    # backoff doubling; the upper ones only reject a default backoff (15 s and more).
    gaps = [later["time"] - earlier["time"] for earlier, later in itertools.pairwise(runs)]
    assert 1.0 <= gaps[0] <= 1.0 + POLL_LAG and 2.0 <= gaps[1] <= 2.0 + POLL_LAG, gaps


def test_scheduled_job_runs_on_time(workers, raw_redis):
    workers.start("-c", "2")
    before = time.time()
    worker_jobs.stamp.perform_in(2, "s")
    after = time.time()
    ((_member, due),) = raw_redis.zrange("schedule", 0, -1, withscores=True)
    assert before + 2 <= due <= after + 2
    (run,) = wait_until(lambda: worker_jobs.notes(raw_redis, job="stamp"), 30, "the scheduled job")
    assert due <= run["time"] <= due + POLL_LAG, run["time"] - due
    assert raw_redis.zcard("schedule") == 0


def test_bad_payloads_go_to_dead_and_the_worker_keeps_going(workers, raw_redis):
    unknown = dumps({"class": "tests.worker_jobs.no_such_job", "args": [1], "queue": "default",
                     "jid": new_jid(), "retry": True, "created_at": time.time(), "enqueued_at": time.time()})
    raw_redis.lpush("queue:default", "not json{")
    raw_redis.lpush("queue:default", unknown)
    worker_jobs.record.delay("after-bad")
    worker = workers.start("-c", "1")

    wait_until(lambda: counts(raw_redis).get("after-bad") == 1, 20, "the good job behind the bad ones")
    dead = {job["error_class"]: (job, raw) for job, _score, raw in zset_jobs(raw_redis, "dead")}
    assert set(dead) == {"djwork.InvalidPayload", "djwork.UnknownJobClass"}
    invalid, _raw = dead["djwork.InvalidPayload"]
    assert invalid["args"] == ["not json{"]
    assert invalid["raw_payload"] == "not json{"
    assert isinstance(invalid["failed_at"], float)
    lost, _raw = dead["djwork.UnknownJobClass"]
    assert {key: lost[key] for key in ("class", "args", "jid", "created_at")} == {
        key: json.loads(unknown)[key] for key in ("class", "args", "jid", "created_at")}
    assert "tests.worker_jobs.no_such_job" in lost["error_message"]
    assert lost["retry_count"] == 0
    assert raw_redis.zcard("retry") == 0
    assert raw_redis.llen("queue:default") == 0
    assert worker.alive()


def test_unknown_class_goes_the_retry_way_when_shared(workers, raw_redis):
    # UNKNOWN_CLASS="retry": a worker sharing its queue with Ruby hands a class it can't load to the
    # retry set under the same error name as the dead path, for a worker that knows the class.
    payload = {"class": "RubyOnlyJob", "args": ["r"], "queue": "default", "jid": new_jid(), "retry": 5,
               "created_at": time.time(), "enqueued_at": time.time()}
    raw_redis.lpush("queue:default", dumps(payload))
    worker_jobs.record.delay("after-unknown")
    worker = workers.start("-c", "1", overrides={"UNKNOWN_CLASS": "retry"})
    wait_until(lambda: counts(raw_redis).get("after-unknown") == 1, 20, "the job behind the unknown one")
    (entry, score, _raw), = zset_jobs(raw_redis, "retry")
    assert entry["jid"] == payload["jid"] and entry["class"] == "RubyOnlyJob" and entry["args"] == ["r"]
    assert entry["error_class"] == "djwork.UnknownJobClass" and entry["retry_count"] == 0
    assert "RubyOnlyJob" in entry["error_message"]
    assert score > time.time() + 10  # Sidekiq's backoff: 15 s and more for the first retry
    assert raw_redis.zcard("dead") == 0
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(10) == 0
