"""Dashboard Metrics pages (docs/metrics.md): access, every class listed and sortable, charts drawn, escaping."""

from __future__ import annotations

import datetime as dt
import itertools
import math
import re

import orjson
import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from djwork.api import mark_deploy
from djwork.worker import queue_samples
from djwork.worker.metrics import ExecutionMetrics, queue_writes
from djwork_dashboard import charts
from tests.browser import seed

EVIL = "App::<script>alert(1)</script>"


def url(name: str, *args: str) -> str:
    return reverse(f"djwork_dashboard:{name}", args=args)


@pytest.fixture
def recorded(raw_redis):
    """30 classes (more than Sidekiq's 20), one failing, one slow, one with markup in its name; a deploy; samples."""
    now = dt.datetime.now(dt.UTC)
    recorder = ExecutionMetrics()
    for number in range(30):
        for _ in range(number + 1):
            recorder.record(f"app.jobs.job_{number:02d}", 10.0 * (number + 1), False)
    recorder.record("app.jobs.flaky", 5.0, True)
    recorder.record(EVIL, 1.0, False)
    pipe = raw_redis.pipeline(transaction=False)
    queue_writes(pipe, recorder.take(), now)
    pipe.execute()
    mark_deploy("v9 <b>bold</b>")
    raw_redis.lpush("queue:mail", orjson.dumps({"class": "X", "jid": "a", "args": [],
                                                "enqueued_at": now.timestamp() - 90}))
    raw_redis.sadd("queues", "mail")
    queue_samples.sample_once(now - dt.timedelta(minutes=2))
    queue_samples.sample_once(now)
    return now


@pytest.fixture
def viewer(db, django_user_model) -> Client:
    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_dashboard"))
    client = Client()
    client.force_login(user)
    return client


def test_anonymous_goes_to_login_and_staff_without_permission_gets_403(client, db, django_user_model, recorded):
    pages = (url("metrics"), url("metrics_queues"), url("metrics_class", "app.jobs.flaky"))
    for target in pages:
        assert client.get(target)["Location"].startswith("/admin/login/"), target
    client.force_login(django_user_model.objects.create_user("plain", password="pw", is_staff=True))
    for target in pages:
        assert client.get(target).status_code == 403, target


def test_classes_page_lists_every_class_sorted_and_paged_with_the_chart(viewer, recorded):
    first = viewer.get(url("metrics")).content.decode()
    assert "<svg" in first and first.count('class="mline"') == 5  # the top 5 by total time
    assert 'class="mark"' in first and "v9 &lt;b&gt;bold&lt;/b&gt;" in first and "<b>bold" not in first
    listed = re.findall(r'data-class="([^"]+)"', first)
    assert len(listed) == 25 and listed[0] == "app.jobs.job_29"  # most total time first
    second = viewer.get(url("metrics") + "?page=2").content.decode()
    assert len(re.findall(r'data-class="([^"]+)"', second)) == 32 - 25  # every class, not only 20
    by_name = re.findall(r'data-class="([^"]+)"', viewer.get(url("metrics") + "?sort=name&order=asc").content.decode())
    assert by_name == sorted(by_name) and by_name[0] == "App::&lt;script&gt;alert(1)&lt;/script&gt;"
    named = viewer.get(url("metrics") + "?sort=name&order=asc").content.decode()
    assert "<script>alert" not in named
    evil = viewer.get(url("metrics_class", EVIL))
    assert evil.status_code == 200 and "<script>alert" not in evil.content.decode()
    failed = re.findall(r'data-class="([^"]+)"', viewer.get(url("metrics") + "?sort=failed").content.decode())
    assert failed[0] == "app.jobs.flaky"
    only = viewer.get(url("metrics") + "?q=FLAKY&period=24h").content.decode()
    assert re.findall(r'data-class="([^"]+)"', only) == ["app.jobs.flaky"]
    assert "is not one of the periods" in viewer.get(url("metrics") + "?period=5y", follow=True).content.decode()


def test_class_page_shows_histogram_percentiles_and_the_history_link(viewer, recorded):
    page = viewer.get(url("metrics_class", "app.jobs.job_09")).content.decode()  # ten runs of 100 ms
    assert page.count('class="bar"') == 26
    assert re.search(r"<strong>p50</strong> &lt; 150 ms", page) and re.search(r"<strong>p99</strong> &lt; 150 ms", page)
    assert "?class=app.jobs.job_09" in page
    assert viewer.get(url("metrics_class", "app.jobs.job_09") + "?period=72h", follow=True).status_code == 200


def test_class_page_counts_limiter_reschedules_apart_from_runs(viewer, raw_redis):
    recorder = ExecutionMetrics()
    recorder.record("app.jobs.limited", 40.0, False)
    for _ in range(3):
        recorder.record_rescheduled("app.jobs.limited")
    pipe = raw_redis.pipeline(transaction=False)
    queue_writes(pipe, recorder.take(), dt.datetime.now(dt.UTC))
    pipe.execute()
    page = viewer.get(url("metrics_class", "app.jobs.limited")).content.decode()
    stats = {label: value for value, label in re.findall(
        r'<span class="value">([^<]*)</span><span class="label">([^<]*)</span>', page)}
    assert (stats["runs"], stats["rescheduled"], stats["failed"]) == ("1", "3", "0")


def test_queues_page_draws_size_and_latency(viewer, recorded):
    page = viewer.get(url("metrics_queues")).content.decode()
    assert page.count("<svg") == 4 and 'data-queue="mail"' in page
    assert re.search(r'data-label="Latency">1m 3\ds<', page)  # the oldest job waited 90 s at the last sample


def test_overview_draws_a_latency_sparkline_per_sampled_queue(viewer, recorded):
    page = viewer.get(url("overview")).content.decode()
    (points,) = re.findall(r'aria-label="latency of mail over the last hour"><polyline points="([^"]+)"', page)
    ys = [float(pair.split(",")[1]) for pair in points.split()]
    assert len(ys) == 60 and min(ys) < 2 and ys.count(17.0) >= 57  # two samples with a job waiting, the rest at zero


def lab(colour: str) -> tuple[float, float, float]:
    """sRGB hex -> CIE L*a*b* (D65): distances in it are what an eye tells apart."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(colour[i:i + 2], 16) / 255) for i in (1, 3, 5))
    x, y, z = ((r * 0.4124 + g * 0.3576 + b * 0.1805) / 0.95047, r * 0.2126 + g * 0.7152 + b * 0.0722,
               (r * 0.0193 + g * 0.1192 + b * 0.9505) / 1.08883)

    def f(v: float) -> float:
        return v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def test_every_two_palette_colours_are_told_apart():
    # The second and fifth were 7.7 apart (two oranges); 2.3 is a just-noticeable difference.
    for first, second in itertools.combinations(charts.PALETTE, 2):
        assert math.dist(lab(first), lab(second)) > 25, (first, second)


def test_the_minute_under_way_is_a_dashed_segment_not_a_drop_to_zero(viewer, raw_redis):
    now = dt.datetime.now(dt.UTC)
    recorder = ExecutionMetrics()
    for minutes_ago in (3, 2, 1):
        for _ in range(10):
            recorder.record("app.Steady", 100.0, False)
        pipe = raw_redis.pipeline(transaction=False)
        queue_writes(pipe, recorder.take(), now - dt.timedelta(minutes=minutes_ago))
        pipe.execute()
    page = viewer.get(url("metrics")).content.decode()
    (solid,) = re.findall(r'<polyline class="mline" stroke="[^"]+" points="([^"]+)"', page)
    (partial,) = re.findall(r'<polyline class="mline-partial" stroke="[^"]+" points="([^"]+)"', page)
    ys = [float(pair.split(",")[1]) for pair in solid.split()]
    assert len(ys) == 59 and ys[-1] == min(ys)  # the last finished minute is the line's last point, at its top
    assert len(partial.split()) == 2 and partial.split()[0] == solid.split()[-1]
    assert "dashed: the current bucket, so far" in page


def test_sub_millisecond_classes_show_their_time_in_ms_and_us(viewer, raw_redis):
    recorder = ExecutionMetrics()
    for _ in range(40):
        recorder.record("app.Fast", 0.3, False)  # counted as 0 whole milliseconds, as Sidekiq counts
    recorder.record("app.Quick", 1.0, False)
    for _ in range(3):
        recorder.record("app.Quick", 0.2, False)  # 1 ms over 4 runs: 250 µs on average
    pipe = raw_redis.pipeline(transaction=False)
    queue_writes(pipe, recorder.take(), dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1))
    pipe.execute()
    page = viewer.get(url("metrics")).content.decode()
    fast = re.search(r'<tr data-class="app.Fast">.*?</tr>', page, re.S).group(0)
    assert 'data-label="Total time">&lt; 1 ms<' in fast and 'data-label="Average">&lt; 1 ms<' in fast
    quick = re.search(r'<tr data-class="app.Quick">.*?</tr>', page, re.S).group(0)
    assert 'data-label="Total time">1.0ms<' in quick and 'data-label="Average">250µs<' in quick
    detail = viewer.get(url("metrics_class", "app.Fast")).content.decode()
    assert "0.00 s" not in detail and "&lt; 1 ms" in detail
    ticks = re.findall(r'<text class="axis"[^>]*text-anchor="end"[^>]*>([^<]+)</text>', detail)
    assert any(tick.endswith(" ms") for tick in ticks), ticks  # p50 < 20 ms: the axis reads in ms, not "0.02 s"


def test_a_queue_with_jobs_and_no_listener_is_charted_beside_busier_ones(viewer, raw_redis):
    busy = [f"q{number}" for number in range(6)]
    seed.process(raw_redis, "w.1:1:a", queues=busy)
    for number, name in enumerate(busy):
        for _ in range(10 + number):
            seed.push(raw_redis, seed.job(queue=name), queue=name)
    seed.push(raw_redis, seed.job(queue="orphans"), queue="orphans")  # one job, nobody reads it
    now = dt.datetime.now(dt.UTC)
    queue_samples.sample_once(now - dt.timedelta(minutes=1))
    page = viewer.get(url("metrics_queues")).content.decode()
    size_chart = re.search(r"<h2>Queue size</h2>.*?</figure>", page, re.S).group(0)
    legend = re.findall(r'<span class="mkey"><span class="swatch"[^>]*></span>([^<]+)</span>', size_chart)
    assert len(legend) == 5 and legend[0] == "orphans", legend
