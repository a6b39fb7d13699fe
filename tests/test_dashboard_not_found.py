"""One rule for what a dashboard URL names and Redis does not hold: a 404 page in the dashboard's layout
saying what was not found (it was Django's bare 404 on one page, a redirect with a message on two, an empty
200 on two others)."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.urls import reverse

from djwork.worker.metrics import ExecutionMetrics, queue_writes
from tests.browser import seed

MISSING = {
    "/djwork/periodic/nope/": "No periodic entry nope",
    "/djwork/batches/nope/": "No batch nope",
    "/djwork/limits/nope/": "No limiter nope",
    "/djwork/queues/nope/": "No queue nope",
    "/djwork/metrics/class/nope/": "No job class nope",
}


@pytest.mark.parametrize("path", list(MISSING))
def test_each_page_answers_what_it_does_not_know_with_the_same_404(admin_client, raw_redis, path):
    response = admin_client.get(path)
    body = response.content.decode()
    assert response.status_code == 404
    assert re.search(r'<section class="card" id="not-found">\s*<h1>' + re.escape(MISSING[path]) + "</h1>", body)
    assert 'id="health"' in body and "<nav" in body  # the dashboard's own layout, navigation and strip


def test_a_known_queue_with_no_jobs_is_a_page_not_a_404(admin_client, raw_redis):
    seed.process(raw_redis, "w.1:7:abc", queues=["listened"])  # a process listens to it; it holds no job
    assert admin_client.get(reverse("djwork_dashboard:queue", args=["listened"])).status_code == 200
    seed.push(raw_redis, seed.job(queue="held"), queue="held")
    raw_redis.srem("queues", "held")  # holding jobs is enough, listed or not
    assert admin_client.get(reverse("djwork_dashboard:queue", args=["held"])).status_code == 200
    raw_redis.sadd("queues", "listed")  # listed in `queues` (Sidekiq's Queues page shows it)
    assert admin_client.get(reverse("djwork_dashboard:queue", args=["listed"])).status_code == 200


def test_a_class_that_ran_outside_the_period_is_a_page_not_a_404(admin_client, raw_redis):
    recorder = ExecutionMetrics()
    recorder.record("app.Old", 5.0, False)
    pipe = raw_redis.pipeline(transaction=False)
    queue_writes(pipe, recorder.take(), dt.datetime.now(dt.UTC) - dt.timedelta(hours=3))
    pipe.execute()
    assert admin_client.get(reverse("djwork_dashboard:metrics_class", args=["app.Old"])).status_code == 200
