"""The dashboard's Batches pages through Django's test client, against real batches in the private Redis."""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

import djwork
from djwork import dead, job_locks, keys
from tests import batch_jobs


def url(name: str, *args: str) -> str:
    return reverse(f"djwork_dashboard:{name}", args=args)


@pytest.fixture
def made(raw_redis) -> dict[str, djwork.Batch]:
    """A running batch with one failing and one dead job, and a finished one with a <script> description."""
    running = djwork.Batch(description="import 2026-12", on_success=batch_jobs.on_event, callback_queue="cb")
    with running.jobs():
        for index in range(3):
            batch_jobs.member.delay(index)
    jobs = [json.loads(raw) for raw in raw_redis.lrange(keys.queue("default"), 0, -1)]
    for job, target in zip(jobs[:2], ("retry", "dead"), strict=True):
        dead.file_failure("t:inprogress", json.dumps(job), target, job, time.time(), job["jid"],
                          locks=job_locks.encode(job_locks.locks_of(job))).evaluate(raw_redis)
    done = djwork.Batch(description="<script>alert(1)</script>", on_success=batch_jobs.on_event)
    with done.jobs():
        pass
    return {"running": running, "done": done, "failing": jobs[0]["jid"], "dead": jobs[1]["jid"]}


def test_the_list_shows_progress_and_filters_by_description(admin_client, made):
    response = admin_client.get(url("batches"))
    body = response.content.decode()
    assert response.status_code == 200
    assert made["running"].bid in body and made["done"].bid in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert(1)" not in body
    assert 'data-state="succeeded"' in body and 'data-state="running"' in body
    filtered = admin_client.get(url("batches"), {"q": "IMPORT"}).content.decode()
    assert made["running"].bid in filtered and made["done"].bid not in filtered


def test_the_detail_lists_jids_links_failures_and_shows_callback_state(admin_client, made):
    body = admin_client.get(url("batch", made["running"].bid)).content.decode()
    assert f'/retries/?q={made["failing"]}' in body and f'/dead/?q={made["dead"]}' in body
    assert 'id="pending-jids"' in body and "tests.batch_jobs.on_event" in body
    assert admin_client.get(url("batch", "no-such-batch")).status_code == 302
    assert admin_client.get("/djwork/batches/a%3Cb/").status_code == 404


def test_invalidate_asks_first_then_marks_the_batch(admin_client, made):
    bid = made["running"].bid
    asked = admin_client.post(url("batch_action", bid), {"action": "invalidate"})
    assert asked.status_code == 200 and b"Invalidate batch" in asked.content
    assert not djwork.Batch.status(bid).invalidated
    done = admin_client.post(url("batch_action", bid), {"action": "invalidate", "confirmed": "1"})
    assert done.status_code == 302 and djwork.Batch.status(bid).invalidated


def test_viewers_see_no_button_and_cannot_invalidate(db, django_user_model, made):
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(content_type__app_label="djwork_dashboard",
                                                       codename="view_dashboard"))
    client = Client()
    client.force_login(viewer)
    bid = made["running"].bid
    page = client.get(url("batch", bid))
    assert page.status_code == 200 and b'value="invalidate"' not in page.content
    assert client.post(url("batch_action", bid), {"action": "invalidate", "confirmed": "1"}).status_code == 403
    assert not djwork.Batch.status(bid).invalidated
    assert Client().get(url("batches"))["Location"].startswith("/admin/login/")
