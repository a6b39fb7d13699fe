"""djwork.revoke against the private Redis: the job is taken off its queue, `schedule` or `retry` in one
step, its unique lock released, its batch told it died, REVOKED recorded; terminate=True refused; the
dashboard's Revoked list (Django's test client).
"""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

import djwork
from djwork.payload import dumps
from djwork.redis import keys
from djwork.results import JobRevoked
from tests import result_jobs


@pytest.fixture(autouse=True)
def results_on(settings):
    """These tests read jobs' states and results: stored, as in a Celery project with CELERY_RESULT_BACKEND
    set (RESULTS=True; results are opt-in, docs/celery.md). A test of results off turns them off itself."""
    settings.DJWORK = {**settings.DJWORK, "RESULTS": True}


def unique_keys(raw_redis) -> list[str]:
    return [key.decode() for key in raw_redis.scan_iter("unique:*", count=1000)]


def assert_revoked(ref, raw_redis) -> None:
    assert ref.state == "REVOKED" and ref.ready() and not ref.successful()
    with pytest.raises(JobRevoked, match="revoked"):
        ref.get(timeout=1)
    assert isinstance(ref.get(timeout=1, propagate=False), JobRevoked)
    assert djwork.revoked(ref.id)
    assert 0 < raw_redis.ttl(keys.REVOKED) <= 86_400


def test_revoking_a_queued_job_removes_it_and_releases_its_unique_lock(raw_redis):
    other = result_jobs.add.delay(1, 1)
    ref = result_jobs.add.apply_async((2, 2), unique_for=600)
    assert unique_keys(raw_redis)
    assert ref.revoke() is True
    assert [item for item in raw_redis.lrange(keys.queue("default"), 0, -1) if ref.id.encode() in item] == []
    assert raw_redis.llen(keys.queue("default")) == 1  # the other job stays
    assert unique_keys(raw_redis) == []
    assert_revoked(ref, raw_redis)
    assert other.state == "PENDING" and not djwork.revoked(other.id)
    assert result_jobs.add.apply_async((2, 2), unique_for=600).enqueued  # the lock is free again


def test_revoking_a_scheduled_job_and_a_retry_by_id_removes_them(raw_redis):
    scheduled = result_jobs.add.apply_async((3, 3), countdown=3600)
    payload, _at = result_jobs.add.build_payload([5, 5])
    raw_redis.zadd(keys.RETRY, {dumps({**payload, "retry_count": 0}): time.time() + 3600})
    assert djwork.AsyncResult(scheduled.id).revoke() is True
    assert djwork.revoke(payload["jid"]) is True
    assert raw_redis.zcard(keys.SCHEDULE) == 0 and raw_redis.zcard(keys.RETRY) == 0
    assert_revoked(scheduled, raw_redis)
    assert_revoked(djwork.AsyncResult(payload["jid"]), raw_redis)


def test_revoking_a_batch_member_counts_it_as_died(raw_redis):
    batch = djwork.Batch(description="revoke")
    with batch.jobs():
        first = result_jobs.add.delay(1, 2)
        result_jobs.add.delay(3, 4)
    assert first.revoke() is True
    status = djwork.Batch.status(batch.bid)
    assert (status.total, status.pending, status.dead) == (2, 1, 1)


def test_revoke_of_a_finished_job_keeps_its_result_and_of_an_unknown_one_records_revoked(raw_redis):
    ref = result_jobs.add.delay(1, 1)
    raw_redis.hset(keys.result(ref.id), mapping={"state": "SUCCESS", "result": "2", "date_done": "1.0"})
    raw_redis.delete(keys.queue("default"))  # as if a worker ran it
    assert djwork.revoke(ref.id) is False
    assert ref.get(timeout=1) == 2
    assert djwork.revoke("not-enqueued-yet") is False
    assert djwork.AsyncResult("not-enqueued-yet").state == "REVOKED"


def test_terminate_is_refused_with_the_reason(raw_redis):
    ref = result_jobs.add.delay(1, 1)
    with pytest.raises(djwork.TerminateNotSupported, match="thread"):
        ref.revoke(terminate=True)
    with pytest.raises(djwork.TerminateNotSupported):
        djwork.revoke(ref.id, signal="SIGKILL")
    assert raw_redis.llen(keys.queue("default")) == 1 and not djwork.revoked(ref.id)  # nothing was done


def test_a_bad_jid_is_refused(raw_redis):
    with pytest.raises(ValueError, match="jid"):
        djwork.revoke("has spaces *")


@pytest.mark.django_db
def test_the_history_page_lists_revoked_jobs(raw_redis, django_user_model):
    ref = result_jobs.add.delay(1, 1)
    ref.revoke()
    client = Client()
    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="djwork_dashboard",
                                                         codename="view_dashboard"))
    client.force_login(user)
    page = client.get(reverse("djwork_dashboard:history")).content.decode()
    assert 'id="revoked"' in page and ref.id in page and "REVOKED" in page
    raw_redis.delete(keys.REVOKED)
    assert 'id="revoked"' not in client.get(reverse("djwork_dashboard:history")).content.decode()


def test_a_job_revoked_while_it_ran_is_not_filed_for_a_retry_when_it_fails(raw_redis):
    from djwork import dead, job_locks

    ref = result_jobs.add.apply_async((9, 9), unique_for=600)
    raw = raw_redis.rpoplpush(keys.queue("default"), "t:inprogress")  # as a worker's fetch took it
    assert ref.revoke() is False  # running: only flagged
    payload = json.loads(raw)
    dead.file_failure("t:inprogress", raw, "retry", {**payload, "retry_count": 0}, time.time() + 60, ref.id,
                      locks=job_locks.encode(job_locks.locks_of(payload)),
                      result=(keys.result(ref.id), "86400\nRETRY\n\n{}\n")).evaluate(raw_redis)
    assert raw_redis.zcard(keys.RETRY) == 0 and raw_redis.llen("t:inprogress") == 0
    assert unique_keys(raw_redis) == [] and ref.state == "REVOKED"
