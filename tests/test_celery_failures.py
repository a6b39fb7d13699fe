"""Celery's failure rules for a job declared the Celery way, Sidekiq's for ``@djwork.job`` (docs/celery.md).

The decision itself (djwork/worker/retry.py ``decide``) is pinned without a worker; one worker test proves the
outcome a Celery user reads: FAILURE at once, ``get()`` raising the task's own exception, the traceback kept.
"""

from __future__ import annotations

import time

import pytest
from django.test import override_settings

import djwork
from djwork.worker.retry import decide
from tests import celery_failure_jobs as jobs
from tests.helpers_worker import wait_until, zset_jobs
from tests.settings import DJWORK

NOW = 1_000_000.0


def failed(job, error=None, **fields):
    payload = {"class": job.name, "jid": "j1", "queue": "default", "args": [], "retry": job.payload_retry, **fields}
    return decide(payload, error or jobs.Expected("boom"), job, "default", 25, now=NOW)


@pytest.mark.parametrize("job", [jobs.celery_fails, jobs.based_fails], ids=["shared_task", "base=Task subclass"])
def test_a_job_declared_the_celery_way_fails_at_once_on_an_exception(job):
    decision = failed(job)
    assert decision.target == "dead"
    assert (decision.payload["error_class"], decision.payload["retry_count"]) == (
        "tests.celery_failure_jobs.Expected", 0)


def test_a_djwork_job_keeps_sidekiqs_retries_and_failures_sidekiq_gives_them_to_a_shared_task():
    for job in (jobs.sidekiq_retries, jobs.shared_but_sidekiq):
        assert job.payload_retry is True
        decision = failed(job)
        assert decision.target == "retry" and NOW + 15 <= decision.score <= NOW + 24


def test_a_celery_job_retries_what_it_asks_for_up_to_celerys_three():
    assert jobs.asks_to_retry.payload_retry == 3
    requested = djwork.Retry(exc=jobs.Expected("again"), countdown=60)
    decision = failed(jobs.asks_to_retry, requested)
    assert (decision.target, decision.score) == ("retry", NOW + 60)
    assert failed(jobs.asks_to_retry, requested, retry_count=1).target == "retry"
    assert failed(jobs.asks_to_retry, requested, retry_count=2).target == "dead"  # the 4th failure: 3 retries done
    assert failed(jobs.autoretried).target == "retry"
    assert failed(jobs.autoretried, retry_count=2).target == "dead"
    # max_retries as Celery means it: the limit of the retries asked for, not a license to retry anything.
    assert jobs.seven_retries.payload_retry == 7
    assert failed(jobs.seven_retries).target == "dead"


def test_the_failures_setting_makes_celerys_rules_the_projects_default():
    with override_settings(DJWORK={**DJWORK, "FAILURES": "celery"}):
        assert failed(jobs.sidekiq_retries).target == "dead"
        assert jobs.sidekiq_retries.payload_retry == 3
        # A job that chose Sidekiq's rules keeps them.
        assert failed(jobs.shared_but_sidekiq).target == "retry"
    assert failed(jobs.sidekiq_retries).target == "retry"


def test_failures_takes_celery_or_sidekiq_only():
    with pytest.raises(TypeError, match="failures must be 'celery'"):
        djwork.job(failures="never")(lambda: None)


def test_eager_apply_follows_the_same_rules():
    result = jobs.celery_fails.apply(["eager"])
    assert (result.state, type(result.result)) == ("FAILURE", jobs.Expected)
    assert "Expected: eager" in result.traceback


def test_a_celery_task_that_raises_reads_failure_at_once_under_a_worker(workers, raw_redis):
    ref = jobs.celery_fails.apply_async(["from the worker"], ignore_result=False)
    workers.start("-c", "1")
    with pytest.raises(jobs.Expected, match="from the worker"):
        ref.get(timeout=30)
    result = djwork.AsyncResult(ref.id)
    assert (result.state, result.failed(), result.successful()) == ("FAILURE", True, False)
    assert isinstance(result.result, jobs.Expected)
    assert "Expected: from the worker" in result.traceback
    dead = wait_until(lambda: [job for job, _score, _raw in zset_jobs(raw_redis, "dead") if job["jid"] == ref.id],
                      30, "the failed task in dead")
    assert dead[0]["retry_count"] == 0
    assert not [job for job, _score, _raw in zset_jobs(raw_redis, "retry") if job["jid"] == ref.id]


def test_self_retry_expires_sets_the_retried_runs_expiry_from_when_it_is_due():
    requested = djwork.Retry(exc=jobs.Expected("again"), countdown=60, expires=120)
    now = time.time()  # expires_at never counts from a moment in the past
    payload = {"class": jobs.asks_to_retry.name, "jid": "j1", "queue": "default", "args": [], "retry": 3}
    decision = decide(payload, requested, jobs.asks_to_retry, "default", 25, now=now)
    assert (decision.score, decision.payload["expires_at"]) == (now + 60, now + 180)
    with pytest.raises(TypeError, match="unsupported option"):
        jobs.asks_to_retry.retry(queue="low")
