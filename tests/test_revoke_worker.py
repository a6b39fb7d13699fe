"""djwork.revoke against real workers: a revoked job never runs, one fetched despite its revoke (by a
fetch or by an idle worker's taker) is dropped unrun with its lock released, and a running job sees
``self.request.is_revoked()``. Each test waits for an event (a log line, a counter, a state).
"""

from __future__ import annotations

import datetime as dt

import pytest

import djwork
from djwork.redis import keys
from tests import result_jobs
from tests.helpers_worker import blocked_takers, counts, in_progress_items, wait_until


@pytest.fixture(autouse=True)
def results_on(settings):
    """These tests read jobs' states and results: stored, as in a Celery project with CELERY_RESULT_BACKEND
    set (RESULTS=True; results are opt-in, docs/celery.md). A test of results off turns them off itself."""
    settings.DJWORK = {**settings.DJWORK, "RESULTS": True}


def unique_keys(raw_redis) -> list[str]:
    return [key.decode() for key in raw_redis.scan_iter("unique:*", count=1000)]


def test_a_revoked_queued_job_never_runs(workers, raw_redis):
    ref = result_jobs.add.delay(2, 2)
    scheduled = result_jobs.add.apply_async((3, 3), countdown=1)
    assert ref.revoke() and scheduled.revoke()
    # Celery records a task that expired before it ran as REVOKED too.
    expired = result_jobs.add.apply_async((5, 5), expires=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1))
    after = result_jobs.add.apply_async((4, 4), countdown=2)  # due after the revoked one would have been
    workers.start("-c", "1")
    assert after.get(timeout=30) == 8
    assert not {"add-2-2", "add-3-3", "add-5-5"} & set(counts(raw_redis))
    assert ref.state == scheduled.state == expired.state == "REVOKED"


def test_a_job_fetched_despite_its_revoke_is_dropped_unrun_and_its_lock_released(workers, raw_redis):
    # The revoke searched another queue only: the flag alone must stop the job when it is fetched.
    ref = result_jobs.add.apply_async((2, 2), unique_for=600)
    assert djwork.revoke(ref.id, queue="elsewhere") is False
    assert raw_redis.llen(keys.queue("default")) == 1 and unique_keys(raw_redis)
    sentinel = result_jobs.add.delay(1, 1)
    worker = workers.start("-c", "1")
    assert sentinel.get(timeout=20) == 2
    worker.wait_log(f"dropped revoked job {ref.id}", 20)
    assert "add-2-2" not in counts(raw_redis)
    assert unique_keys(raw_redis) == [] and ref.state == "REVOKED"
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "every ack")


def test_a_job_an_idle_workers_taker_takes_despite_its_revoke_is_dropped_unrun(workers, raw_redis):
    worker = workers.start("-c", "2")
    wait_until(lambda: blocked_takers(raw_redis), 20, "a taker blocked on the queue")
    assert djwork.revoke("revoked-before-push", queue="elsewhere") is False
    result_jobs.add.apply_async((6, 6), jid="revoked-before-push")
    worker.wait_log("dropped revoked job revoked-before-push", 20)
    assert result_jobs.add.delay(1, 1).get(timeout=20) == 2
    assert "add-6-6" not in counts(raw_redis)
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "the drop to leave nothing in progress")


def test_a_running_job_sees_is_revoked_and_its_state_stays_revoked(workers, raw_redis):
    ref = result_jobs.waits_for_revoke.delay("w1")
    workers.start("-c", "2")
    wait_until(lambda: raw_redis.hget("t:starts", "w1") == b"1", 20, "the job to start")
    assert ref.revoke() is False  # running: not waiting anywhere, only flagged
    wait_until(lambda: raw_redis.hget("t:saw-revoke", "w1") == b"1", 20, "the job to see its revoke")
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "its ack")
    assert ref.state == "REVOKED"  # its return did not overwrite the revoke
    with pytest.raises(djwork.JobRevoked):
        ref.get(timeout=1)
