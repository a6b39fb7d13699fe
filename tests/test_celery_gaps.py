"""Celery's machinery where it had gaps, against the private Redis (no worker): ``task_revoked`` from
``djwork.revoke()``, ``self.request`` per asyncio task, ``track_started``'s write and option, and the result
of a poison pill buried by orphan recovery. The worker-level tests are in tests/test_celery_gaps_worker.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest

import djwork
from djwork import signals
from djwork.payload import dumps
from djwork.redis import keys
from djwork.results import JobError
from djwork.settings.conf import get_config
from djwork.worker import job_start
from djwork.worker.reaper import POISON_ERROR, Reaper
from tests import celery_gap_jobs, result_jobs


@pytest.fixture(autouse=True)
def results_on(settings):
    """These tests read jobs' states and results: stored, as in a Celery project with CELERY_RESULT_BACKEND
    set (RESULTS=True; results are opt-in, docs/celery.md). A test of results off turns them off itself."""
    settings.DJWORK = {**settings.DJWORK, "RESULTS": True}


@pytest.fixture
def revoked_signals():
    seen: list[dict] = []

    def receiver(sender, request, terminated, signum, expired, **rest):
        seen.append({"sender": sender, "request": request, "terminated": terminated, "signum": signum,
                     "expired": expired})

    signals.task_revoked.connect(receiver, dispatch_uid="tests.test_celery_gaps")
    try:
        yield seen
    finally:
        signals.task_revoked.disconnect(dispatch_uid="tests.test_celery_gaps")


# --- task_revoked from revoke() ---------------------------------------------------------------------------
def test_revoke_sends_task_revoked_for_each_job_it_removes(raw_redis, revoked_signals):
    queued = result_jobs.add.apply_async((2, 3), queue="default")
    scheduled = result_jobs.add.apply_async((4, 5), countdown=3600)
    payload, _at = result_jobs.add.build_payload([6, 7])
    raw_redis.zadd(keys.RETRY, {dumps({**payload, "retry_count": 1}): time.time() + 3600})
    assert queued.revoke() and djwork.revoke(scheduled.id) and djwork.AsyncResult(payload["jid"]).revoke()

    assert [seen["request"].id for seen in revoked_signals] == [queued.id, scheduled.id, payload["jid"]]
    for seen in revoked_signals:
        assert seen["sender"] is result_jobs.add  # the job, as for the run signals
        assert (seen["terminated"], seen["signum"], seen["expired"]) == (False, None, False)
        assert seen["request"].task == "tests.result_jobs.add" and seen["request"].queue == "default"
    assert [seen["request"].args for seen in revoked_signals] == [[2, 3], [4, 5], [6, 7]]
    assert revoked_signals[2]["request"].retries == 2  # Celery's retries: the payload's retry_count + 1
    # A receiver runs after the step: the job is gone and its record says REVOKED.
    assert queued.state == "REVOKED"


def test_revoke_of_a_job_not_waiting_sends_nothing(raw_redis, revoked_signals):
    # Running somewhere, or run already, or unknown: only the flag is set (Celery sends nothing
    # without terminate either).
    assert djwork.revoke("running-elsewhere") is False
    unknown_class = {"class": "gone.module.Job", "jid": "by-name", "args": [1], "queue": "default", "retry": True}
    raw_redis.lpush(keys.queue("default"), json.dumps(unknown_class, separators=(",", ":")))
    assert djwork.revoke("by-name", queue="default") is True
    # The only signal: the job removed, sent with its class name when no job of that name is known here.
    ((seen,),) = [revoked_signals]
    assert seen["sender"] == "gone.module.Job" and seen["request"].id == "by-name"


# --- self.request per asyncio task --------------------------------------------------------------------------
def test_a_bound_coroutine_jobs_request_is_its_own_across_awaits_beside_others_on_one_thread():
    from djwork.jobs.task_class import Request

    job = celery_gap_jobs.reads_request

    async def main() -> list[tuple]:
        gate = asyncio.Event()
        runs = [asyncio.ensure_future(job.run(Request(id=f"j{index}", retries=index, args=[gate])))
                for index in range(5)]
        await asyncio.sleep(0)  # every run is suspended inside its body, its request set
        gate.set()
        return await asyncio.gather(*runs)

    seen = asyncio.run(main())
    assert seen == [(f"j{index}", index, f"j{index}", index) for index in range(5)]
    assert job.request.called_directly  # nothing left behind in this thread's context


# --- track_started -------------------------------------------------------------------------------------------
def test_mark_started_writes_started_with_the_workers_pid_and_keeps_a_revoked_record(raw_redis):
    config = get_config()
    ref = result_jobs.add.delay(1, 2)
    job_start.mark_started(ref.id, "host:1:abc", config)
    assert ref.state == "STARTED" and not ref.ready()
    info = ref.result
    assert info["hostname"] == "host:1:abc" and isinstance(info["pid"], int)
    assert 0 < raw_redis.ttl(keys.result(ref.id)) <= config.result_ttl
    ref.revoke()
    job_start.mark_started(ref.id, "host:1:abc", config)  # a start that raced the revoke does not undo it
    assert ref.state == "REVOKED"


def test_tracked_follows_the_job_then_the_setting_and_never_without_results(settings):
    payload, _at = result_jobs.add.build_payload([1, 2])
    ignored, _at = result_jobs.add.build_payload([1, 2], ignore_result=True)
    assert payload["djwork_result"] is True and "djwork_result" not in ignored
    config = get_config()
    assert not job_start.tracked(result_jobs.add, payload, config)  # None on the job, TRACK_STARTED off
    assert job_start.tracked(celery_gap_jobs.tracked, payload, config)
    assert not job_start.tracked(celery_gap_jobs.tracked, ignored, config)
    assert not job_start.tracked(celery_gap_jobs.not_tracked, payload, config)
    settings.DJWORK = {**settings.DJWORK, "TRACK_STARTED": True}
    config = get_config()
    assert job_start.tracked(result_jobs.add, payload, config)
    assert not job_start.tracked(celery_gap_jobs.not_tracked, payload, config)  # the job's own False wins


def test_track_started_must_be_a_boolean_or_none():
    with pytest.raises(TypeError, match="track_started must be True, False or None"):
        djwork.job(track_started="yes")(lambda: None)

    class Tracking(djwork.Task):
        track_started = True

    assert djwork.job(base=Tracking)(lambda: None).track_started is True
    assert djwork.job(lambda: None).track_started is None


# --- a buried poison pill's result ---------------------------------------------------------------------------
def test_a_buried_poison_pill_ends_failure_saying_why(raw_redis):
    config = get_config()
    ref = result_jobs.add.apply_async((1, 1), unique_for=600)
    ignored = result_jobs.add.apply_async((2, 2), ignore_result=True)
    raws = raw_redis.lrange(keys.queue("default"), 0, -1)
    raw_redis.delete(keys.queue("default"))
    dead_identity = "host:9:crashed"
    in_progress = keys.in_progress(dead_identity, "default")
    raw_redis.rpush(in_progress, *raws)  # as if a process that died had fetched them
    raw_redis.sadd(keys.IN_PROGRESS_REGISTRY, in_progress)
    for jid in (ref.id, ignored.id):  # recovered MAX_ORPHANINGS times already: this recovery buries them
        raw_redis.hset(keys.ORPHAN_COUNTS, jid, config.max_orphanings)

    Reaper(config, []).recover()

    assert {json.loads(member)["jid"] for member in raw_redis.zrange(keys.DEAD, 0, -1)} == {ref.id, ignored.id}
    assert raw_redis.llen(in_progress) == 0 and not raw_redis.exists(keys.ORPHAN_COUNTS)
    assert [key for key in raw_redis.scan_iter("unique:*")] == []
    assert ref.state == "FAILURE" and ref.failed()
    with pytest.raises(JobError) as raised:
        ref.get(timeout=1)
    assert raised.value.exc_type == POISON_ERROR
    assert f"recovered more than {config.max_orphanings} times" in raised.value.message
    assert 0 < raw_redis.ttl(keys.result(ref.id)) <= config.result_ttl
    assert not raw_redis.exists(keys.result(ignored.id))  # ignore_result: nothing written


def test_celerys_state_constants_and_task_logger_are_djworks():
    from djwork.jobs.task_log import get_task_logger

    ref = result_jobs.add.delay(1, 2)
    assert djwork.AsyncResult(ref.id).state == djwork.states.PENDING
    assert djwork.states.SUCCESS == "SUCCESS" and djwork.states.FAILURE in djwork.states.PROPAGATE_STATES
    assert {"SUCCESS", "FAILURE", "REVOKED"} == djwork.states.READY_STATES
    assert get_task_logger("tests.celery") is logging.getLogger("tests.celery")
