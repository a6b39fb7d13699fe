"""Celery's machinery where it had gaps, under real ``runworkers``: coroutine jobs' hooks, signals and
``self.request``; ``task_revoked`` for revoked jobs a worker drops; ``track_started``; the result of a job
skipped because its batch was invalidated. Hooks and receivers record each call in Redis
(tests/task_api_jobs.py, tests/task_api_receivers.py); each test waits for those records or states.
"""

from __future__ import annotations

import pytest

import djwork
from djwork.redis import keys
from tests import batch_jobs, celery_gap_jobs, result_jobs
from tests.celery_gap_jobs import release_key
from tests.helpers_worker import blocked_takers, counts, in_progress_items, wait_until
from tests.task_api_jobs import events


@pytest.fixture(autouse=True)
def results_on(settings):
    """These tests read jobs' states and results: stored, as in a Celery project with CELERY_RESULT_BACKEND
    set (RESULTS=True; results are opt-in, docs/celery.md). A test of results off turns them off itself."""
    settings.DJWORK = {**settings.DJWORK, "RESULTS": True}

# The receivers, imported by the worker through a no-op Redis event hook: a server middleware (the other
# tests' way) would run coroutine jobs on threads instead of the event loop.
ON_LOOP_RECEIVERS = {"REDIS_EVENT_HOOK": "tests.task_api_receivers.redis_event"}
RECEIVERS = {"SERVER_MIDDLEWARE": ["tests.task_api_receivers.passthrough"]}

SUCCESS = ["task_received", "task_prerun", "before_start", "body", "on_success", "task_success", "after_return",
           "task_postrun"]
# Celery skips after_return for a retry (its trace does not call it for RETRY); task_postrun is still sent.
RETRY = ["task_received", "task_prerun", "before_start", "body", "on_retry", "task_retry", "task_postrun"]
FAILURE = ["task_received", "task_prerun", "before_start", "body", "on_failure", "task_failure", "after_return",
           "task_postrun"]


def _of(raw_redis, jid: str) -> list[dict]:
    return [row for row in events(raw_redis) if jid in (row.get("task_id"), row.get("request_id"))]


def test_coroutine_jobs_run_hooks_and_signals_in_celerys_order_each_with_its_own_request(workers, raw_redis):
    together = 8  # every first run waits until all eight are inside: all suspended on the loop at once
    oks = [celery_gap_jobs.async_hooked.delay(f"k{index}", together) for index in range(together - 2)]
    failed = celery_gap_jobs.async_hooked.delay("v", together, mode="value")
    retried = celery_gap_jobs.async_hooked.delay("r", together, mode="lookup")
    worker = workers.start("-c", "2", overrides=ON_LOOP_RECEIVERS)
    identity = worker.identity(raw_redis)
    wait_until(lambda: len(events(raw_redis, kind="task_postrun")) == together + 1, 60,
               "every run to end (the retried job twice)")
    assert "event loop started for coroutine jobs" in worker.log()

    bodies = events(raw_redis, kind="body")
    assert {row["thread"] for row in bodies} == {"djwork-coroutines"}  # one thread ran them all
    for row in bodies:
        # The request read before the await is the one read after it, while seven others ran between.
        assert row["before"] == row["after"] and row["after"][0] == row["request_id"]
        assert row["hostname"] == identity

    for index, ref in enumerate(oks):
        assert [row["kind"] for row in _of(raw_redis, ref.id)] == SUCCESS
        assert ref.get(timeout=10) == f"ok k{index}"
    one = oks[0]
    success = events(raw_redis, kind="on_success", task_id=one.id)[0]
    assert (success["retval"], success["request_id"], success["args"][0]) == ("ok k0", one.id, "k0")
    assert events(raw_redis, kind="task_success", task_id=one.id)[0]["result"] == "ok k0"  # sender.request.id
    prerun = events(raw_redis, kind="task_prerun", task_id=one.id)[0]
    assert (prerun["same_task"], prerun["args"]) == (True, ["k0", together])
    assert events(raw_redis, kind="task_postrun", task_id=one.id)[0]["state"] == "SUCCESS"

    assert [row["kind"] for row in _of(raw_redis, failed.id)] == FAILURE
    assert events(raw_redis, kind="task_failure", task_id=failed.id)[0]["exception"] == "ValueError('v')"
    assert events(raw_redis, kind="on_failure", task_id=failed.id)[0]["einfo_type"] == "ValueError"
    assert events(raw_redis, kind="after_return", task_id=failed.id)[0]["status"] == "FAILURE"

    # KeyError is in Recording's autoretry_for, max_retries = 1: one retry, then a failure.
    assert [row["kind"] for row in _of(raw_redis, retried.id)] == RETRY + FAILURE
    assert [row["after"][1] for row in events(raw_redis, kind="body", request_id=retried.id)] == [0, 1]
    assert events(raw_redis, kind="on_retry", task_id=retried.id)[0]["retries"] == 0
    assert events(raw_redis, kind="task_retry", task_id=retried.id)[0]["reason"] == "KeyError('r')"
    assert events(raw_redis, kind="on_failure", task_id=retried.id)[0]["retries"] == 1
    assert [row["state"] for row in events(raw_redis, kind="task_postrun", task_id=retried.id)] == [
        "RETRY", "FAILURE"]
    with pytest.raises(KeyError):
        retried.get(timeout=10)


def test_revoked_jobs_a_worker_drops_send_task_revoked(workers, raw_redis):
    # Revoked with a search of another queue only: the flag alone stops it, at the worker's first fetch.
    fetched = result_jobs.add.apply_async((2, 2))
    assert djwork.revoke(fetched.id, queue="elsewhere") is False
    sentinel = result_jobs.add.delay(1, 1)
    worker = workers.start("-c", "2", overrides=RECEIVERS)
    identity = worker.identity(raw_redis)
    assert sentinel.get(timeout=20) == 2
    worker.wait_log(f"dropped revoked job {fetched.id}", 20)
    # Then an idle worker's taker takes one: dropped by drop_revoked.lua.
    wait_until(lambda: blocked_takers(raw_redis), 20, "a taker blocked on the queue")
    assert djwork.revoke("taken-revoked", queue="elsewhere") is False
    result_jobs.add.apply_async((6, 6), jid="taken-revoked")
    worker.wait_log("dropped revoked job taken-revoked", 20)

    seen = wait_until(lambda: len(events(raw_redis, kind="task_revoked")) == 2 and events(
        raw_redis, kind="task_revoked"), 20, "task_revoked for both")
    # Keyed by id: the two drops may run on different threads, so their records need not be in order.
    assert {row["task_id"]: row["args"] for row in seen} == {fetched.id: [2, 2], "taken-revoked": [6, 6]}
    for row in seen:
        assert (row["sender"], row["expired"], row["terminated"], row["signum"], row["hostname"]) == (
            "tests.result_jobs.add", False, False, None, identity)
    assert not {"add-2-2", "add-6-6"} & set(counts(raw_redis))
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "nothing left in progress")


def _started(raw_redis, key: str) -> None:
    wait_until(lambda: events(raw_redis, kind="tracked_body", key=key), 30, f"job {key} to start")


def test_track_started_reads_started_while_the_job_runs_then_success(workers, raw_redis):
    tracked = celery_gap_jobs.tracked.delay("t1")
    on_loop = celery_gap_jobs.tracked_async.delay("a1")
    untracked = celery_gap_jobs.untracked.delay("u1")  # TRACK_STARTED is off: PENDING while it runs
    ignored = celery_gap_jobs.tracked.apply_async(["i1"], ignore_result=True)
    worker = workers.start("-c", "4")
    identity = worker.identity(raw_redis)
    for key in ("t1", "a1", "u1", "i1"):
        _started(raw_redis, key)
    # STARTED is written before the body runs, and each body waits for its release key.
    assert tracked.state == on_loop.state == "STARTED"
    assert not tracked.ready()
    assert tracked.result["hostname"] == identity and isinstance(tracked.result["pid"], int)
    assert 0 < raw_redis.ttl(keys.result(tracked.id)) <= 86_400  # RESULT_TTL, as every record
    assert untracked.state == "PENDING"
    assert not raw_redis.exists(keys.result(ignored.id))
    for key in ("t1", "a1", "u1", "i1"):
        raw_redis.set(release_key(key), 1)
    assert tracked.get(timeout=30) == "t1" and on_loop.get(timeout=30) == "a1" and untracked.get(timeout=30) == "u1"
    assert tracked.state == on_loop.state == "SUCCESS"
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "the ignored job's ack")
    assert not raw_redis.exists(keys.result(ignored.id))


def test_the_track_started_setting_applies_to_jobs_that_say_nothing(workers, raw_redis):
    untracked = celery_gap_jobs.untracked.delay("u2")
    opted_out = celery_gap_jobs.not_tracked.delay("o2")
    workers.start("-c", "2", overrides={"TRACK_STARTED": True})
    _started(raw_redis, "u2")
    _started(raw_redis, "o2")
    assert untracked.state == "STARTED"
    assert opted_out.state == "PENDING"  # the job's own track_started=False wins over the setting
    raw_redis.set(release_key("u2"), 1)
    raw_redis.set(release_key("o2"), 1)
    assert untracked.get(timeout=30) == "u2" and opted_out.get(timeout=30) == "o2"


def test_a_job_skipped_because_its_batch_was_invalidated_reads_revoked(workers, raw_redis):
    stopped = djwork.Batch(description="stopped")
    with stopped.jobs():
        skipped = batch_jobs.member.delay("never")
    stopped.invalidate()
    after = result_jobs.add.delay(3, 4)
    workers.start("-c", "1")
    assert after.get(timeout=30) == 7
    wait_until(lambda: skipped.state == "REVOKED", 20, "the skipped job's record")
    with pytest.raises(djwork.JobRevoked, match="batch was invalidated"):
        skipped.get(timeout=1)
    assert "never" not in counts(raw_redis, batch_jobs.RUNS)
