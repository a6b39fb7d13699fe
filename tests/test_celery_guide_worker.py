"""Celery's Django example and the user guide's worker examples ("Calling Tasks", "Tasks", "Canvas"),
against ONE real ``manage.py runworkers`` started once for the module.

Every test waits on what it checks (``.get(timeout=)``, a state, an entry in `retry`), never on time
passing. Retry waits of minutes are not waited out: a test reads the retry's time from the `retry`
set, then moves it to now (ZADD XX), and the worker's poller brings it back. Jobs and values are
distinct per test, so the tests share the worker and its Redis without emptying it in between.
docs/celery.md lists every option and API of those pages.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import djwork
from djwork.canvas.refs import results_of
from djwork.redis import keys
from djwork.results import JobRevoked
from tests import celery_demo_jobs as demo
from tests import celery_guide_jobs as guide
from tests.helpers_worker import ROOT, Worker, Workers, wait_until, zset_jobs


@pytest.fixture(autouse=True)
def results_on(settings):
    """These tests read jobs' states and results: stored, as in a Celery project with CELERY_RESULT_BACKEND
    set (RESULTS=True; results are opt-in, docs/celery.md). A test of results off turns them off itself."""
    settings.DJWORK = {**settings.DJWORK, "RESULTS": True}

T = 20  # seconds any single result may take on a busy machine; each wait ends as soon as it is there


@dataclass
class GuideWorker:
    worker: Worker
    redis: Any
    database: Path


@pytest.fixture(scope="module")
def guide_worker(redis, redis_url: str, tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("celery-guide")
    # The worker's database: a file of its own, migrated here (pytest's test database is in memory).
    database = directory / "workers.sqlite3"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings_worker", "DJWORK_EXAMPLE_DB": str(database)}
    subprocess.run([sys.executable, "manage.py", "migrate", "auth", "--noinput"], cwd=ROOT, check=True, env=env,
                   capture_output=True, timeout=120)
    pool = Workers(directory, redis_url)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJWORK_EXAMPLE_DB", str(database))  # inherited by the worker
        worker = pool.start("-c", "10", "-q", "default", "-q", "priority.high", overrides={
            "SERVER_MIDDLEWARE": ["tests.celery_guide_jobs.passthrough"], "LOG_JOBS": False})
    try:
        worker.identity(redis, timeout=60)
        yield GuideWorker(worker, redis, database)
    finally:
        pool.cleanup()


def retry_entry(redis, jid: str, retry_count: int) -> tuple[dict, float, str]:
    def find():
        for job, score, raw in zset_jobs(redis, keys.RETRY):
            if job["jid"] == jid and job.get("retry_count") == retry_count:
                return job, score, raw
        return None

    return wait_until(find, T, f"retry entry {retry_count} of {jid}")


def make_due(redis, raw: str) -> None:
    assert redis.zadd(keys.RETRY, {raw: time.time()}, xx=True, ch=True) == 1


def waited(job: dict, score: float) -> float:
    return round(score - job.get("retried_at", job["failed_at"]), 3)


def dead_entry(redis, jid: str) -> dict:
    return wait_until(lambda: next((job for job, _s, _r in zset_jobs(redis, keys.DEAD) if job["jid"] == jid), None),
                      T, f"{jid} in dead")


# --- Celery's Django example (tests/celery_demo_jobs.py), whole, under the one worker --------------------
def test_celerys_django_example_runs_whole_under_one_worker(guide_worker):
    redis = guide_worker.redis
    assert demo.add.delay(2, 2).get(timeout=10) == 4
    assert demo.mul.delay(3, 4).get(timeout=10) == 12
    assert demo.xsum.delay([1, 2, 3, 4]).get(timeout=10) == 10

    with sqlite3.connect(guide_worker.database) as db:
        widget_id = db.execute("INSERT INTO auth_group (name) VALUES ('before')").lastrowid
        db.execute("INSERT INTO auth_group (name) VALUES ('another')")
    assert demo.count_widgets.delay().get(timeout=10) == 2
    assert demo.rename_widget.delay(widget_id, "after").get(timeout=10) is None
    with sqlite3.connect(guide_worker.database) as db:
        assert db.execute("SELECT name FROM auth_group WHERE id = ?", (widget_id,)).fetchone() == ("after",)
    assert demo.count_widgets.delay().get(timeout=10) == 2

    # error_task: retry_kwargs={"max_retries": 2, "countdown": 600}: RETRY twice, 600 s apart, then FAILURE.
    failing = demo.error_task.delay()
    for count in (0, 1):
        job, score, raw = retry_entry(redis, failing.id, count)
        assert waited(job, score) == 600
        assert failing.state == "RETRY" and repr(failing.result) == "Exception('Test error')"
        make_due(redis, raw)
    error = failing.get(timeout=10, propagate=False)
    assert repr(error) == "Exception('Test error')"
    assert (failing.state, failing.failed(), failing.ready()) == ("FAILURE", True, True)
    with pytest.raises(Exception, match="Test error"):
        failing.get(timeout=1)
    assert dead_entry(redis, failing.id)["retry_count"] == 2  # request.retries of the third and last run

    # error_backoff_test: retry_backoff=5, retry_jitter=False, max_retries=3: waits of 5, 10 and 20 s.
    backoff = demo.error_backoff_test.delay()
    waits = []
    for count in (0, 1, 2):
        job, score, raw = retry_entry(redis, backoff.id, count)
        waits.append(waited(job, score))
        make_due(redis, raw)
    assert waits == [5, 10, 20]
    assert repr(backoff.get(timeout=10, propagate=False)) == "Exception('Test error')"
    assert backoff.state == "FAILURE" and dead_entry(redis, backoff.id)["retry_count"] == 3


# --- Calling Tasks ---------------------------------------------------------------------------------------
def test_calling_countdown_expires_queue_task_id_and_headers(guide_worker):
    sent = time.time()
    later = demo.add.apply_async((2, 2), countdown=3)
    expired = demo.add.apply_async((10, 10), expires=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1))
    fresh = demo.add.apply_async((10, 10), expires=60)
    routed = guide.dump_context.apply_async((1, 2), queue="priority.high", task_id="guide-own-id",
                                            headers={"periodic_task_name": "task_name"})
    assert fresh.get(timeout=T) == 20
    context = djwork.AsyncResult("guide-own-id").get(timeout=T)
    assert routed.id == context["id"] == "guide-own-id"
    assert (context["routing_key"], context["headers"]) == ("priority.high", {"periodic_task_name": "task_name"})
    # A worker that receives an expired job records it REVOKED (Celery: TaskRevokedError).
    with pytest.raises(JobRevoked):
        expired.get(timeout=T)
    assert expired.state == "REVOKED"
    assert later.get(timeout=T) == 4
    assert later.date_done.timestamp() >= sent + 3  # not run before its countdown


def test_calling_links_errbacks_and_results_options(guide_worker):
    redis = guide_worker.redis
    parent = demo.add.apply_async((2, 2), link=demo.add.s(16).set(task_id="guide-link-16"))
    assert parent.get(timeout=T) == 4
    assert djwork.AsyncResult("guide-link-16").get(timeout=T) == 20  # (2 + 2) + 16
    failed = guide.raising_task.apply_async(link_error=guide.log_error.s(tag="calling"))
    with pytest.raises(ValueError, match="something something"):
        failed.get(timeout=T)
    errors = wait_until(lambda: [json.loads(raw) for raw in redis.lrange(guide.ERRORS, 0, -1)
                                 if json.loads(raw)["tag"] == "calling"], T, "the errback")
    assert errors == [{"tag": "calling", "exc": "ValueError", "failed": True}]
    # Results options: ignored -> None at once (Celery's get() of an ignored result); not ignored -> 3.
    assert guide.mytask.apply_async((1, 2), ignore_result=True).get(timeout=T) is None
    assert guide.mytask.apply_async((1, 2), ignore_result=False).get(timeout=T) == 3
    numbers = [(2, 2), (4, 4), (8, 8), (16, 16)]
    assert djwork.group(demo.add.s(i, j) for i, j in numbers).apply_async().get(timeout=T) == [4, 8, 16, 32]


# --- Tasks -------------------------------------------------------------------------------------------------
def test_tasks_request_names_retry_and_states(guide_worker):
    redis = guide_worker.redis
    context = guide.dump_context.delay(3, 4).get(timeout=T)
    assert (context["args"], context["kwargs"], context["retries"], context["task"]) == (
        [3, 4], {}, 0, "tests.celery_guide_jobs.dump_context")
    assert context["hostname"] == guide_worker.worker.identity(redis) and context["routing_key"] == "default"
    assert (context["is_eager"], context["called_directly"], context["eta"], context["expires"]) == (
        False, False, None, None)
    assert context["root_id"] == context["id"] and context["parent_id"] is None
    assert djwork.send_task("sum-of-two-numbers", (2, 2)).get(timeout=T) == 4  # by its explicit name

    # raise self.retry(exc=exc, countdown=60): RETRY with the exception, then SUCCESS.
    assert djwork.AsyncResult("guide-never-sent").state == "PENDING"  # an unknown id is PENDING
    tweet = guide.send_twitter_status.delay("hello", 1)
    job, score, raw = retry_entry(redis, tweet.id, 0)
    assert waited(job, score) == 60 and "FailWhaleError" in job["error_class"]
    assert tweet.state == "RETRY" and isinstance(tweet.result, guide.FailWhaleError) and not tweet.ready()
    assert "FailWhaleError" in tweet.traceback
    make_due(redis, raw)
    assert tweet.get(timeout=T) == "posted hello after 1 retries"
    assert (tweet.state, tweet.successful(), tweet.traceback) == ("SUCCESS", True, None)

    # The handlers, in the worker: after_return runs once, at the end.
    mine = guide.my_task.delay(5, 6)
    assert mine.get(timeout=T) == 11
    wait_until(lambda: f"after_return {mine.id} SUCCESS" in guide.calls(), T, "after_return")
    assert [call for call in guide.calls() if mine.id in call] == [
        f"before_start {mine.id} [5, 6]", f"on_success {mine.id} 11", f"after_return {mine.id} SUCCESS"]


# --- Canvas ------------------------------------------------------------------------------------------------
def test_canvas_signatures_partials_and_callbacks(guide_worker):
    assert demo.add.s(2, 2).delay().get(timeout=T) == 4
    assert demo.add.signature((2, 2), countdown=1).apply_async().get(timeout=T) == 4
    assert demo.add.s(2).delay(4).get(timeout=T) == 6
    assert demo.add.s(2).apply_async((4,)).get(timeout=T) == 6
    assert guide.subtract.s(10).delay(30).get(timeout=T) == 20  # prepended: subtract(30, 10)
    assert ~demo.add.s(3, 3) == 6
    assert demo.add.apply_async((2, 2), link=demo.add.s(8).set(task_id="guide-link-8")).get(timeout=T) == 4
    assert djwork.AsyncResult("guide-link-8").get(timeout=T) == 12  # 4 + 8
    assert demo.add.apply_async((2, 2), link=demo.mul.s(16).set(task_id="guide-link-mul")).get(timeout=T) == 4
    assert djwork.AsyncResult("guide-link-mul").get(timeout=T) == 64
    immutable = demo.add.apply_async((2, 2), link=guide.reset_buffers.si("guide-si"))
    assert immutable.get(timeout=T) == 4
    wait_until(lambda: "reset_buffers guide-si" in guide.calls(), T, "the immutable callback")
    assert demo.add.s(2, 2).on_error(guide.log_error.s()).delay().get(timeout=T) == 4


def test_canvas_chains(guide_worker):
    assert djwork.chain(demo.add.s(2, 2), demo.add.s(4), demo.add.s(8))().get(timeout=T) == 16
    assert (demo.add.s(2, 2) | demo.add.s(4) | demo.add.s(8))().get(timeout=T) == 16
    independent = (demo.add.si(2, 2) | demo.add.si(4, 4) | demo.add.si(8, 8))()
    assert independent.get(timeout=T) == 16
    assert independent.parent.get(timeout=T) == 8 and independent.parent.parent.get(timeout=T) == 4
    assert (demo.add.s(4) | demo.mul.s(8))(16).get(timeout=T) == 160  # (16 + 4) * 8
    c2 = demo.add.s(4, 16) | demo.mul.s(2) | (demo.add.s(4) | demo.mul.s(8))
    assert c2().get(timeout=T) == 352  # ((4 + 16) * 2 + 4) * 8
    res = djwork.chain(demo.add.s(4, 4), demo.mul.s(8), demo.mul.s(10))()
    assert res.get(timeout=T) == 640
    assert (res.parent.get(timeout=T), res.parent.parent.get(timeout=T)) == (64, 8)
    assert res.id == res.jids[-1] and res.parent.parent.parent is None  # the chain's id: its last task's
    assert (demo.add.s(2, 2) | demo.mul.s(8) | demo.mul.s(10)).apply_async().get(timeout=T) == 320


def test_canvas_groups_chords_maps_and_chunks(guide_worker):
    assert djwork.group(demo.add.s(i, i) for i in range(10))().get(timeout=T) == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]
    assert djwork.group(demo.add.s(2, 2), demo.add.s(4, 4))().get(timeout=T) == [4, 8]
    result = djwork.group([demo.add.s(2, 2), demo.add.s(4, 4), demo.add.s(8, 8), demo.add.s(16, 16),
                           demo.add.s(32, 32)]).apply_async()
    assert result.join(timeout=T) == [4, 8, 16, 32, 64]
    assert (result.ready(), result.successful(), result.failed(), result.waiting()) == (True, True, False, False)
    assert result.completed_count() == 5

    assert djwork.chord((demo.add.s(i, i) for i in range(10)), guide.tsum.s())().get(timeout=T) == 90
    assert djwork.chord(demo.add.s(i, i) for i in range(100))(guide.tsum.s()).get(timeout=T) == 9900
    assert (djwork.group(demo.add.s(i, i) for i in range(10)) | guide.tsum.s())().get(timeout=T) == 90
    assert (djwork.group(demo.add.s(i, i) for i in range(10)) | guide.tsum.s().on_error(
        guide.log_error.s(tag="never"))).delay().get(timeout=T) == 90
    notified = djwork.chord((demo.add.s(c, c) for c in range(3)), guide.notify_complete.si("import-7")).apply_async()
    assert notified.get(timeout=T) == "import-7"  # immutable body: the header's results are not passed

    broken = djwork.chord([demo.add.s(4, 4), guide.raising_task.s(), demo.add.s(8, 8)])(
        guide.tsum.s().on_error(guide.log_error.s(tag="chord")))
    with pytest.raises(ValueError, match="something something"):  # the failed header task's own exception
        broken.get(timeout=T)
    # The other header members still ran (the third one too).
    wait_until(lambda: results_of(broken.header.bid) == [8, None, 16], T, "the header's results")
    errors = wait_until(lambda: [json.loads(raw) for raw in guide_worker.redis.lrange(guide.ERRORS, 0, -1)
                                 if json.loads(raw)["tag"] == "chord"], T, "the chord's errback")
    # The body's errback, once, as Celery's chord_error_from_stack calls it: a ChordError naming the header's failure.
    assert errors == [{"tag": "chord", "exc": "ChordError", "failed": True}]

    assert ~guide.tsum.map([list(range(10)), list(range(100))]) == [45, 4950]
    assert ~demo.add.starmap(zip(range(10), range(10), strict=True)) == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]
    chunked = demo.add.chunks(zip(range(100), range(100), strict=True), 10)().get(timeout=T)
    assert chunked == [[2 * i for i in range(start, start + 10)] for start in range(0, 100, 10)]


def test_group_revoke_removes_members_that_wait(guide_worker):
    waiting = djwork.group(demo.add.s(1, 1).set(countdown=3600), demo.add.s(2, 2).set(countdown=3600))()
    assert waiting.revoke() == [True, True]
    with pytest.raises(djwork.JobRevoked):  # Celery's TaskRevokedError: the revoked member's own outcome
        waiting.get(timeout=T)
    assert waiting.failed() and waiting.completed_count() == 0
