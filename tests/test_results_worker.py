"""Celery-style results against real workers: the outcome is written by the Lua step that ends the job.

Each test waits for an observable event (the result's state, a counter), never for time to pass.
"""

from __future__ import annotations

import threading

import pytest

import djwork
from djwork.redis import keys, scripts
from djwork.results import JobError, ResultNotStored
from tests import result_jobs
from tests.faultproxy import FaultProxy
from tests.helpers_worker import counts, in_progress_items, wait_until


@pytest.fixture(autouse=True)
def results_on(settings):
    """These tests read jobs' states and results: stored, as in a Celery project with CELERY_RESULT_BACKEND
    set (RESULTS=True; results are opt-in, docs/celery.md). A test of results off turns them off itself."""
    settings.DJWORK = {**settings.DJWORK, "RESULTS": True}


def test_get_returns_the_value_of_add_under_a_real_worker(workers, raw_redis):
    ref = result_jobs.add.delay(2, 2)
    assert ref.state == "PENDING" and not ref.ready()
    workers.start("-c", "2")
    assert ref.get(timeout=20) == 4
    assert ref.state == ref.status == "SUCCESS" and ref.successful() and not ref.failed() and ref.ready()
    assert ref.result == 4 and ref.traceback is None and ref.date_done is not None
    assert djwork.AsyncResult(ref.id).get(timeout=1) == 4
    # The record lives RESULT_TTL seconds (a day by default) after it was written.
    assert 86_000 < raw_redis.ttl(keys.result(ref.id)) <= 86_400
    ref.forget()
    assert not raw_redis.exists(keys.result(ref.id)) and ref.state == "PENDING"


def test_get_is_woken_by_the_stored_result_not_by_its_polling_interval(workers, raw_redis, settings):
    # Its blocking wait is capped by FETCH_TIMEOUT (the reply timeout it runs under): raised past the timeout here.
    settings.DJWORK = {**settings.DJWORK, "FETCH_TIMEOUT": 60}
    raw_redis.set("t:hold:n", 1)
    ref = result_jobs.held_value.delay("n", 5)
    workers.start("-c", "2")
    wait_until(lambda: raw_redis.hget("t:starts", "n") == b"1", 20, "the job to start")

    def release_once_waiting() -> None:
        wait_until(lambda: raw_redis.hexists(keys.RESULT_WAITERS, ref.id), 20, "get() registered as a waiter")
        raw_redis.delete("t:hold:n")

    releaser = threading.Thread(target=release_once_waiting)
    releaser.start()
    # An interval longer than the timeout: only the notify the ack pushes can end this wait in time.
    assert ref.get(timeout=30, interval=120) == 5
    releaser.join(30)
    assert not raw_redis.hexists(keys.RESULT_WAITERS, ref.id)  # the writer took the registration


def test_the_ack_pushes_the_notify_list_a_registered_waiter_named(workers, raw_redis):
    # The writer's half of get()'s wake-up, seen without a waiter consuming it.
    ref = result_jobs.add.delay(7, 8)
    raw_redis.hset(keys.RESULT_WAITERS, ref.id, keys.result_notify(ref.id))
    workers.start("-c", "2")
    wait_until(lambda: raw_redis.hget(keys.result(ref.id), "state") == b"SUCCESS", 20, "the result")
    assert raw_redis.lrange(keys.result_notify(ref.id), 0, -1) == [b"SUCCESS"]
    assert 0 < raw_redis.ttl(keys.result_notify(ref.id)) <= 60
    assert not raw_redis.hexists(keys.RESULT_WAITERS, ref.id)


def test_a_failure_re_raises_the_original_exception_type_or_returns_it(workers, raw_redis):
    ref = result_jobs.boom.delay("bad input")
    rebuilt = result_jobs.needs_two.delay(7)
    lost = result_jobs.unimportable.delay()
    workers.start("-c", "2")
    with pytest.raises(ValueError, match="bad input"):
        ref.get(timeout=20)
    assert ref.failed() and ref.state == "FAILURE"
    error = ref.get(timeout=1, propagate=False)
    assert isinstance(error, ValueError) and str(error) == "bad input"
    assert "ValueError: bad input" in ref.traceback and "boom" in ref.traceback
    with pytest.raises(result_jobs.NeedsTwo) as caught:
        rebuilt.get(timeout=20)
    assert (caught.value.code, caught.value.detail) == (7, "two")
    # A class nobody can import here: a djwork error carrying its name, message and traceback.
    with pytest.raises(JobError) as caught_lost:
        lost.get(timeout=20)
    assert "Local" in caught_lost.value.exc_type and caught_lost.value.message == "from a class nobody can import"
    assert "Traceback" in caught_lost.value.traceback


def test_a_retried_job_shows_retry_then_success(workers, raw_redis):
    ref = result_jobs.flaky.delay("f1")
    workers.start("-c", "2")
    wait_until(lambda: ref.state == "RETRY", 20, "the RETRY state")
    assert isinstance(ref.result, RuntimeError) and "first try" in ref.traceback
    assert not ref.ready()
    assert ref.get(timeout=30) == "ok after 2"
    assert ref.state == "SUCCESS" and ref.traceback is None


def test_ignore_result_writes_nothing(workers, raw_redis, settings):
    silent = result_jobs.quiet.delay("q1")  # the decorator's ignore_result=True
    per_call = result_jobs.add.apply_async((1, 1), ignore_result=True)
    preset = result_jobs.add.set(ignore_result=True).delay(3, 3)
    settings.DJWORK = {**settings.DJWORK, "RESULTS": False}
    globally_off = result_jobs.add.delay(5, 5)
    back_on = result_jobs.add.apply_async((6, 6), ignore_result=False)
    workers.start("-c", "2")
    assert back_on.get(timeout=20) == 12  # after the others: one worker, FIFO
    wait_until(lambda: {"q1", "add-1-1", "add-3-3", "add-5-5"} <= set(counts(raw_redis)), 20, "every job to run")
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "every ack")
    for ref in (silent, per_call, preset, globally_off):
        assert not raw_redis.exists(keys.result(ref.id)), ref
    # Asked for no result (the job, the call, the preset): None at once and PENDING, as Celery's ignored result.
    for ref in (silent, per_call, preset):
        assert (ref.get(timeout=20), ref.state, ref.result) == (None, "PENDING", None)
    # Off by the setting alone: not a PENDING for ever, an error saying how to turn results on.
    with pytest.raises(djwork.ResultsOff, match=r"RESULTS'\] = True.*ignore_result=False"):
        globally_off.get(timeout=20)
    with pytest.raises(djwork.ResultsOff):
        globally_off.state  # noqa: B018
    assert [key.decode() for key in raw_redis.scan_iter("djwork:result:*")] == [keys.result(back_on.id)]


def test_a_return_value_json_cannot_carry_or_too_large_is_a_clear_failure_record(workers, raw_redis):
    odd = result_jobs.returns.delay("object")
    big = result_jobs.returns.delay("big")
    workers.start("-c", "2")
    with pytest.raises(ResultNotStored, match="not JSON-serialisable"):
        odd.get(timeout=20)
    with pytest.raises(ResultNotStored, match="over RESULT_MAX_BYTES"):
        big.get(timeout=20)
    # The job itself succeeded: acked once, not retried.
    assert counts(raw_redis) == {"returns-object": 1, "returns-big": 1}
    assert raw_redis.zcard(keys.RETRY) == 0 and raw_redis.zcard(keys.DEAD) == 0


def test_get_on_a_refused_duplicate_follows_the_holder(workers, raw_redis):
    first = result_jobs.add.apply_async((4, 4), unique_for=600)
    second = result_jobs.add.apply_async((4, 4), unique_for=600)
    assert second.duplicate_of == first.id and not second.enqueued
    workers.start("-c", "2")
    assert second.get(timeout=20) == 8


def test_a_cut_reply_of_the_fetch_carrying_the_result_stores_it_once_and_runs_the_job_once(
        workers, raw_redis, redis_url):
    raw_redis.set("t:hold:r", 1)
    ref = result_jobs.held_value.delay("r", 42)
    with FaultProxy.in_front_of(redis_url) as proxy:
        # One slot: while the job runs the dispatcher has nothing to fetch for, so the next
        # fetch is the one that carries this job's ack, and with it its result.
        worker = workers.start("-c", "1", overrides={"REDIS_URL": proxy.url})
        wait_until(lambda: raw_redis.hget("t:starts", "r") == b"1", 20, "the job to start")
        fired = proxy.drop_next("EVALSHA", argument=scripts.sha("fetch"))
        raw_redis.delete("t:hold:r")
        assert fired.wait(20), "no fetch carried the ack"
        worker.wait_log("fetch failed; reconciling", 20)
        # The cut fetch ran: the result went with the ack.
        assert raw_redis.hget(keys.result(ref.id), "state") == b"SUCCESS"
        assert ref.get(timeout=20) == 42
        later = result_jobs.add.delay(1, 2)
        assert later.get(timeout=20) == 3
        wait_until(lambda: not any(in_progress_items(raw_redis).values()), 20, "every ack")
    assert counts(raw_redis)["r"] == 1 and raw_redis.hget("t:starts", "r") == b"1"


def test_default_jobs_drained_leave_no_per_job_key(workers, raw_redis, settings):
    # The default, not an override: what a user who set nothing gets (RESULTS off).
    settings.DJWORK = {key: value for key, value in settings.DJWORK.items() if key != "RESULTS"}
    workers.start("-c", "4")
    # A first job, drained, so the keys a worker writes once (its process hash, stats, history...) exist before.
    result_jobs.add.delay(0, 1)
    wait_until(lambda: counts(raw_redis).get("add-0-1") == 1, 30, "the first job to run")
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 30, "its ack")
    before = set(raw_redis.scan_iter(count=1000))
    # 2,000 proves what 20,000 would: a per-job key adds one key per job, so 2,000 jobs would show
    # as 2,000 new keys, far above the handful a day or minute rolling over may add.
    refs = result_jobs.add.delay_many([(0, 0)] * 2000)
    wait_until(lambda: counts(raw_redis).get("add-0-0") == 2000, 120, "every job to run")
    wait_until(lambda: not any(in_progress_items(raw_redis).values()), 30, "every ack")
    new_keys = sorted(key.decode() for key in set(raw_redis.scan_iter(count=1000)) - before)
    jids = {ref.id for ref in refs}
    assert not [key for key in new_keys if any(part in jids for part in key.split(":"))], new_keys
    assert len(new_keys) < 20, new_keys
    with pytest.raises(djwork.ResultsOff, match="ignore_result=False"):
        refs[0].get(timeout=1)
