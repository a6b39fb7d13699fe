"""The dashboard's Batches pages through Django's test client, against real batches in the private Redis."""

from __future__ import annotations

import json
import re
import time

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

import djwork
from djwork import dead, job_locks
from djwork.redis import keys
from tests import batch_jobs, canvas_jobs
from tests.browser import seed


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
    assert admin_client.get(url("batch", "no-such-batch")).status_code == 404
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


def fail(raw_redis, job: dict, target: str, error: str = "") -> None:
    """End ``job`` as a worker's failure does (fail.lua): filed in retry or dead, its batch told."""
    stored = {**job, "error_class": "ValueError", "error_message": error} if error else job
    dead.file_failure("t:inprogress", json.dumps(job), target, stored, time.time(), job["jid"],
                      locks=job_locks.encode(job_locks.locks_of(job))).evaluate(raw_redis)


def test_invalidate_after_a_callback_ran_does_not_call_it_not_pushed(admin_client, made, raw_redis):
    # The done batch's success fired (and its callback was pushed) when its block exited; invalidated later.
    done = made["done"].bid
    admin_client.post(url("batch_action", done), {"action": "invalidate", "confirmed": "1"})
    body = admin_client.get(url("batch", done)).content.decode()
    success = re.search(r'<tr data-event="success">.*?</tr>', body, re.S).group(0)
    assert "not yet" not in success and "not pushed" not in success
    # Another batch is invalidated first; then its only job dies, which claims "death": that claim pushed
    # nothing, and only it says so.
    later = djwork.Batch(description="later", on_death=batch_jobs.on_event)
    with later.jobs():
        batch_jobs.member.delay("only")
    admin_client.post(url("batch_action", later.bid), {"action": "invalidate", "confirmed": "1"})
    only = next(json.loads(raw) for raw in raw_redis.lrange(keys.queue("default"), 0, -1)
                if json.loads(raw).get("bid") == later.bid)
    fail(raw_redis, only, "dead")
    body = admin_client.get(url("batch", later.bid)).content.decode()
    death = re.search(r'<tr data-event="death">.*?</tr>', body, re.S).group(0)
    assert "(invalidated: not pushed)" in death and djwork.Batch.status(later.bid).death_at


def test_the_batch_page_lists_callback_jids_outcomes_and_failures_with_their_errors(admin_client, raw_redis):
    batch = djwork.Batch(description="mail run", on_success=batch_jobs.on_event)
    with batch.jobs():
        for index in range(3):
            batch_jobs.member.delay(index)
    jobs = {job["args"][0]: job for job in (json.loads(raw) for raw in raw_redis.lrange(keys.queue("default"), 0, -1))}
    fail(raw_redis, jobs[0], "retry", error="smtp <refused>")
    fail(raw_redis, jobs[1], "dead", error="no such mailbox")
    body = admin_client.get(url("batch", batch.bid)).content.decode()
    failures = re.search(r'<table class="table stack" id="batch-failures">.*?</table>', body, re.S).group(0)
    failures = failures.replace("<wbr>", "")  # class names carry line-break points after their dots
    assert "tests.batch_jobs.member" in failures and "ValueError" in failures
    assert "smtp &lt;refused&gt;" in failures and "no such mailbox" in failures and "<refused>" not in failures
    assert '/retries/' in failures and jobs[0]["jid"] in failures and jobs[1]["jid"] in failures

    # An empty batch succeeds as its block exits: its callback is pushed, with the jid the page names.
    done = djwork.Batch(description="empty", on_success=batch_jobs.on_event)
    with done.jobs():
        pass
    callback = next(json.loads(raw) for raw in raw_redis.lrange(keys.queue("default"), 0, -1)
                    if json.loads(raw).get("class") == "tests.batch_jobs.on_event")
    row = lambda: re.search(r'<tr data-event="success">.*?</tr>', admin_client.get(  # noqa: E731
        url("batch", done.bid)).content.decode(), re.S).group(0)
    assert callback["jid"] in row() and "pushed, no run recorded yet" in row()
    seed.history(raw_redis, klass="tests.batch_jobs.on_event", jid=callback["jid"], status="dead",
                 error_class="KeyError", error_message="'total'")
    assert 'class="badge badge-bad">dead<' in row() and "KeyError: &#x27;total&#x27;" in row()


def test_canvas_batches_hide_by_default_and_a_waiting_chain_step_says_waiting(admin_client, raw_redis):
    mine = djwork.Batch(description="nightly import")
    with mine.jobs():
        batch_jobs.member.delay("x")
    chain = (canvas_jobs.add.s(1, 1) | canvas_jobs.add.s(10) | canvas_jobs.add.s(100)).delay()
    listed = lambda query="": re.findall(r'<tr data-bid="([^"]+)"', admin_client.get(  # noqa: E731
        url("batches") + query).content.decode())
    assert listed() == [mine.bid]  # three chain steps made three batches: not on the default list
    assert set(listed("?kind=canvas")) == set(chain.bids) and len(listed("?kind=all")) == 4
    assert "is not a kind of batch" in admin_client.get(url("batches") + "?kind=nope", follow=True).content.decode()
    # Step 1 fails and waits for its retry: steps 2 and 3 are queued nowhere, so not "running".
    first = next(json.loads(raw) for raw in raw_redis.lrange(keys.queue("default"), 0, -1)
                 if json.loads(raw).get("jid") == chain.jids[0])
    fail(raw_redis, first, "retry", error="flaky")
    page = admin_client.get(url("batches") + "?kind=canvas").content.decode()
    states = dict(re.findall(r'<tr data-bid="([^"]+)".*?data-state="([^"]+)"', page, re.S))
    # (Step 1's batch is "complete": its one job ran, and waits for a retry.)
    assert states == {chain.bids[0]: "complete", chain.bids[1]: "waiting", chain.bids[2]: "waiting"}
    step2 = admin_client.get(url("batch", chain.bids[1])).content.decode()
    assert 'data-state="waiting"' in step2 and "chain" in step2 and chain.bids[0] in step2
    # Step 1 dies: step 2 will never be pushed.
    retried = json.loads(raw_redis.zrange("retry", 0, 0)[0])
    raw_redis.zrem("retry", raw_redis.zrange("retry", 0, 0)[0])
    fail(raw_redis, retried, "dead")
    assert 'data-state="never runs"' in admin_client.get(url("batch", chain.bids[1])).content.decode()
    # Its keys expired (a day after a success): the step after it was pushed long ago, and reads as running.
    raw_redis.delete(f"b-{chain.bids[0]}")
    assert 'data-state="running"' in admin_client.get(url("batch", chain.bids[1])).content.decode()
