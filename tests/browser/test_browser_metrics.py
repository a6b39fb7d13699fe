"""The Metrics pages in a real browser (Debian's chromium, headless) against runserver: charts drawn, table
sorted and paged, class page, queues page, all readable at 390 px. Screenshots in test-artifacts/."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import orjson
import pytest

from djwork.api import mark_deploy
from djwork.worker.metrics import ExecutionMetrics, queue_writes
from djwork.worker.queue_samples import read_sample, write_sample
from tests.browser.live import SCREENSHOTS, VIEWER, shoot

PHONE = {"width": 390, "height": 844}
TIMES = {"app.jobs.send_invoice": 850.0, "app.jobs.resize_image": 120.0, "app.jobs.sync_crm": 2400.0,
         "app.jobs.ping": 3.0, "App::LegacyMailer": 40.0, "app.jobs.rebuild_search_index_for_every_tenant": 9000.0}


@pytest.fixture(scope="module")
def recorded(cluster) -> None:
    """Twenty minutes of runs for 26 classes, a deploy in the middle, queue samples with a backlog that drains."""
    redis = cluster.redis
    now = dt.datetime.now(dt.UTC)
    for minute in range(20, -1, -1):
        moment = now - dt.timedelta(minutes=minute)
        recorder = ExecutionMetrics()
        for name, ms in TIMES.items():
            for run in range(5 + (minute % 7)):
                recorder.record(name, ms * (0.6 + (run % 5) * 0.2), name == "app.jobs.sync_crm" and run == 0)
        for number in range(20):
            recorder.record(f"app.jobs.small_{number:02d}", 5.0, False)
        pipe = redis.pipeline(transaction=False)
        queue_writes(pipe, recorder.take(), moment)
        pipe.execute()
        redis.delete("queue:mail")
        backlog = max(0, 10 - abs(minute - 10)) * 30
        for number in range(backlog):
            redis.lpush("queue:mail", orjson.dumps({"class": "X", "jid": f"m{number}", "args": [],
                                                    "enqueued_at": moment.timestamp() - backlog / 5}))
        redis.sadd("queues", "mail", "default")
        write_sample(redis, read_sample(redis), moment)
    redis.delete("queue:mail")
    mark_deploy("a1b2c3d Faster invoices", now - dt.timedelta(minutes=9))


@pytest.fixture(scope="module")
def screenshots() -> Path:
    directory = SCREENSHOTS / "metrics"
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.png"):
        old.unlink()
    return directory


def test_classes_page_with_chart_deploy_mark_and_sorting(cluster, recorded, admin_page, screenshots):
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/")
    page.click(".topbar nav >> text=Metrics")
    page.wait_for_url(f"{cluster.base_url}/djwork/metrics/")
    assert page.locator(".mchart polyline.mline").count() == 5
    assert page.locator(".mchart .mark").count() == 1
    rows = page.locator("#metrics-classes tbody tr")
    assert rows.count() == 25 and "Page 1 of 2" in page.locator(".pager").inner_text()
    assert rows.first.get_attribute("data-class") == "app.jobs.rebuild_search_index_for_every_tenant"
    shoot(page, screenshots, "metrics-01-classes")
    # Each click loads a new page: read it once loaded, or the old page (or none yet) answers the count.
    page.click("#metrics-classes th >> text=Failed")
    page.wait_for_url(re.compile(r"sort=failed"))
    assert rows.first.get_attribute("data-class") == "app.jobs.sync_crm"
    page.click(".periods >> text=24h")
    page.wait_for_url(re.compile(r"period=24h"))
    assert page.locator(".mchart polyline.mline").count() == 5


def test_class_page_histogram_and_percentiles(cluster, recorded, admin_page, screenshots):
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/metrics/")
    page.click("#metrics-classes >> text=app.jobs.send_invoice")
    assert page.locator(".mchart rect.bar").count() == 26
    assert "p95" in page.locator("#percentiles").inner_text()
    shoot(page, screenshots, "metrics-02-class")
    page.click("text=This class in the history")
    assert "class=app.jobs.send_invoice" in page.url


def test_queues_page(cluster, recorded, admin_page, screenshots):
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/metrics/queues/")
    assert page.locator("tr[data-queue=mail]").count() == 1
    assert page.locator(".mchart").count() == 4
    shoot(page, screenshots, "metrics-03-queues")


def test_every_metrics_page_fits_a_phone(cluster, recorded, browser, screenshots):
    phone = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True)
    try:
        mobile = phone.new_page()
        mobile.goto(f"{cluster.base_url}/admin/login/?next=/djwork/metrics/")
        mobile.fill("#id_username", VIEWER[0])
        mobile.fill("#id_password", VIEWER[1])
        mobile.click("input[type=submit]")
        mobile.wait_for_url(f"{cluster.base_url}/djwork/metrics/")
        for path, name in (("/djwork/metrics/", "metrics-04-phone-classes"),
                           ("/djwork/metrics/class/app.jobs.send_invoice/", "metrics-05-phone-class"),
                           ("/djwork/metrics/queues/", "metrics-06-phone-queues")):
            mobile.goto(cluster.base_url + path)
            width = mobile.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"] + 1, f"{path} scrolls sideways on a phone ({width}px)"
            shoot(mobile, screenshots, name)
    finally:
        phone.close()
