"""The dashboard in a real browser (Debian's chromium, headless) against runserver and a real worker.

Tests run in file order and share one server, one worker and one logged-in
admin page; the last one stops the worker from the Busy page. Screenshots of
every page land in test-artifacts/screenshots/ (git-ignored).
"""

from __future__ import annotations

import datetime as dt
import json
import time

from djwork.redis import keys
from tests import worker_jobs
from tests.browser import seed
from tests.browser.live import VIEWER, login, shoot
from tests.helpers_worker import counts, history_runs, wait_until

PHONE = {"width": 390, "height": 844}


def _seed_static_data(redis) -> dict:
    """What a worker would not produce by itself in a few seconds: weeks of history, dead and parked jobs."""
    today = dt.datetime.now(dt.UTC).date()
    for offset in range(1, 30):
        day = (today - dt.timedelta(days=offset)).isoformat()
        redis.set(f"stat:processed:{day}", 4000 + (offset * 7919) % 3000)
        redis.set(f"stat:failed:{day}", (offset * 31) % 90)
    redis.incrby("stat:processed", 1_234_000)
    redis.incrby("stat:failed", 2_300)
    now = time.time()
    for n in range(3):  # parked in a queue no worker reads, so the Queues page has something to browse
        seed.push(redis, seed.job(klass="app.reports.Build", args=[n, {"format": "pdf"}], queue="reports"),
                  queue="reports")
    # One in a priority lane (docs/priority.md), as a push with Django's priority 40 writes it: listed first.
    urgent = seed.job(klass="app.reports.Urgent", queue="reports") | {"lane": 4}
    redis.lpush(keys.lane("reports", "4"), seed.dumps(urgent))
    redis.sadd(keys.lanes("reports"), 4)
    dead = seed.failed(seed.job(klass="app.billing.Charge", args=[42]), count=25, error_class="PaymentError",
                       message="card declined", backtrace=seed.strict_backtrace(
                           ["app/billing.py:88 in charge", "djwork/worker/processor.py:150 in run"]))
    seed.zadd(redis, "dead", dead, now - 3600)
    # An iterable job's saved progress (docs/iterable.md), as its worker's checkpoint writes it.
    redis.set(keys.iteration(dead["jid"]), json.dumps({"cursor": {"pk": 1200}, "items": 1200, "checkpoints": 2,
                                                       "segments": 3}), ex=3600)
    old = seed.failed(seed.job(klass="LegacyJob"), count=3, backtrace=seed.mime_backtrace(["legacy.rb:1"]))
    seed.zadd(redis, "dead", old, now - 7200)
    evil = seed.failed(seed.job(klass=seed.XSS_CLASS, args=[seed.XSS_SCRIPT, seed.XSS_IMG]), count=1,
                       error_class="XSSError", message=seed.XSS_IMG)
    seed.zadd(redis, "retry", evil, now + 3600)
    scheduled = seed.job(klass="tests.worker_jobs.record", args=["later"])
    scheduled.pop("enqueued_at")
    seed.zadd(redis, "schedule", scheduled, now + 1800)
    return {"dead": dead, "evil": evil}


def test_every_page_renders_real_data(cluster, worker, admin_page, screenshots):
    _process, identity = worker
    redis = cluster.redis
    data = _seed_static_data(redis)
    page = admin_page
    worker_jobs.always_fail.set(backtrace=True).delay("real-failure")  # a real retry entry, real backtrace
    for _ in range(4):
        worker_jobs.record.delay_many([(f"load-{n}",) for n in range(40)])
        time.sleep(0.3)
    wait_until(lambda: redis.zcard("retry") >= 2, 15, "the failing job in the retry set")
    # Held until the busy page was read: a 6 s job had ended by then on a loaded machine.
    worker_jobs.held.delay("busy-shot")
    wait_until(lambda: int(redis.hget(identity, "busy") or 0) >= 1, 10, "a busy thread in the heartbeat")

    page.goto(f"{cluster.base_url}/djwork/")
    assert page.locator("[data-stat=processed]").first.inner_text().replace(",", "").isdigit()
    assert "1,234," in page.locator("[data-stat=processed]").first.inner_text()
    for _ in range(3):  # a few live samples, so the rate graph has a line
        worker_jobs.record.delay_many([(f"live-{n}",) for n in range(30)])
        time.sleep(1.1)
        page.evaluate("window.djworkDashboard.poll()")
    page.wait_for_function("document.querySelectorAll('#live-chart polyline').length == 2")
    assert page.locator("#history-chart polyline").count() == 2
    assert page.locator("text=Redis").first.is_visible()
    shoot(page, screenshots, "01-overview")

    page.goto(f"{cluster.base_url}/djwork/busy/")
    row = page.locator(f'tr[data-identity="{identity}"]')
    assert "browser" in row.inner_text() and "running" in row.inner_text()
    assert "tests.worker_jobs.held" in page.locator("#jobs").inner_text()
    shoot(page, screenshots, "02-busy")
    redis.set(worker_jobs.RELEASE + "busy-shot", "1")

    page.goto(f"{cluster.base_url}/djwork/queues/")
    assert page.locator('tr[data-queue="reports"]').is_visible()
    shoot(page, screenshots, "03-queues")
    page.click('tr[data-queue="reports"] a')
    assert page.locator("#queue-jobs tbody tr").count() == 4
    first = page.locator("#queue-jobs tbody tr").first
    assert "app.reports.Urgent" in first.inner_text() and first.locator("td.lane").inner_text() == "lane 4"
    shoot(page, screenshots, "04-queue-reports")

    page.goto(f"{cluster.base_url}/djwork/retries/")
    assert "tests.worker_jobs.always_fail" in page.locator("#entries").inner_text()
    shoot(page, screenshots, "05-retries")
    page.click("#entries >> text=tests.worker_jobs.always_fail")
    assert "always_fail real-failure fails" in page.locator("pre.error-message").inner_text()
    assert "Traceback" in page.locator("pre.backtrace").inner_text()
    shoot(page, screenshots, "06-retry-detail")

    page.goto(f"{cluster.base_url}/djwork/scheduled/")
    assert "tests.worker_jobs.record" in page.locator("#entries").inner_text()
    shoot(page, screenshots, "07-scheduled")
    page.goto(f"{cluster.base_url}/djwork/dead/")
    assert data["dead"]["jid"] in page.locator("#entries").inner_text()
    progress = " ".join(page.locator("#entries .iteration").inner_text().split())  # the cursor may wrap
    assert progress == 'saved progress: 1,200 items done in 3 segments, 2 checkpoints; cursor {"pk":1200}'
    shoot(page, screenshots, "08-dead")
    page.goto(f"{cluster.base_url}/djwork/history/")
    wait_until(lambda: len(history_runs(redis)) > 100, 10, "history runs")
    page.reload()
    assert page.locator("#runs tbody tr").count() == 50
    shoot(page, screenshots, "09-history")
    page.select_option("select[name=status]", "retry")
    page.click("form.filters button")
    assert set(page.locator("#runs .badge").all_inner_texts()) == {"retry"}

    phone = page.context.browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True)
    phone.add_cookies(page.context.cookies())
    mobile = phone.new_page()
    for path, name in (("/djwork/", "10-phone-overview"), ("/djwork/busy/", "11-phone-busy"),
                       ("/djwork/retries/", "12-phone-retries")):
        mobile.goto(cluster.base_url + path)
        width = mobile.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"] + 1, f"{path} scrolls sideways on a phone ({width}px)"
        shoot(mobile, screenshots, name)
    phone.close()


def test_xss_payload_shows_as_text(cluster, admin_page, screenshots):
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/retries/?q=evil")
    table = page.locator("#entries").inner_text()
    assert seed.XSS_SCRIPT in table and seed.XSS_IMG in table
    page.click("#entries a.jobclass, #entries .jobclass a")
    assert seed.XSS_CLASS in page.locator("h1").inner_text()
    assert seed.XSS_IMG in page.locator("pre.error-message").inner_text()
    assert page.locator("img").count() == 0  # no element was injected
    assert page.evaluate("document.querySelectorAll('script:not([src]):not([type=\"application/json\"])').length") == 0
    shoot(page, screenshots, "13-xss-as-text")
    assert page.dialogs == []


def test_retried_job_runs(cluster, worker, admin_page):
    redis = cluster.redis
    payload = seed.failed(seed.job(klass="tests.worker_jobs.record", args=["from-retry"]), count=1)
    seed.zadd(redis, "retry", payload, time.time() + 3600)  # far off: only the button can bring it back
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/retries/?q={payload['jid']}")
    page.click(f'#entries tr[data-jid="{payload["jid"]}"] td.when a')
    page.click("button:has-text('Retry now')")
    assert "Retried 1 job." in page.locator(".messages").inner_text()
    wait_until(lambda: counts(redis).get("from-retry") == 1, 15, "the retried job to run")
    assert redis.zscore("retry", seed.dumps(payload)) is None


def test_deleted_dead_job_disappears(cluster, admin_page):
    redis = cluster.redis
    doomed = seed.failed(seed.job(klass="app.DoomedJob"), count=25)
    seed.zadd(redis, "dead", doomed, time.time() - 5)
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/dead/")
    row = page.locator(f'#entries tr[data-jid="{doomed["jid"]}"]')
    row.locator("input[name=key]").check()
    page.click("#bulk button[value=delete]")
    assert "Deleted 1 job." in page.locator(".messages").inner_text()
    assert page.locator(f'#entries tr[data-jid="{doomed["jid"]}"]').count() == 0
    assert not any(json.loads(member).get("jid") == doomed["jid"] for member in redis.zrange("dead", 0, -1))


def test_paused_queue_is_not_fetched(cluster, worker, admin_page, screenshots):
    redis = cluster.redis
    worker_jobs.record.set(queue="low").delay("low-warmup")  # a queue is listed once something was pushed to it
    wait_until(lambda: counts(redis).get("low-warmup") == 1, 10, "the warm-up job on low")
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/queues/")
    page.click('tr[data-queue="low"] button:has-text("Pause")')
    assert "Paused low" in page.locator(".messages").inner_text()
    assert redis.sismember("paused", "low")
    time.sleep(1.5)  # let any fetch already in flight finish
    worker_jobs.record.set(queue="low").delay("while-paused")
    time.sleep(3)
    assert "while-paused" not in counts(redis) and redis.llen("queue:low") == 1
    page.reload()
    assert "paused" in page.locator('tr[data-queue="low"]').inner_text()
    shoot(page, screenshots, "14-queue-paused")
    page.click('tr[data-queue="low"] button:has-text("Resume")')
    wait_until(lambda: counts(redis).get("while-paused") == 1, 10, "the job to run after resume")


def test_read_only_staff_can_look_but_not_act(cluster, browser, worker, screenshots):
    page = login(browser, cluster, VIEWER)
    try:
        page.goto(f"{cluster.base_url}/djwork/busy/")
        assert page.locator("button:has-text('Quiet')").count() == 0
        assert "read-only" in page.locator(".topbar").inner_text()
        page.goto(f"{cluster.base_url}/djwork/retries/")
        assert page.locator("input[name=key]").count() == 0 and page.locator("#entries").is_visible()
        shoot(page, screenshots, "15-read-only-retries")
        status = page.evaluate("""async () => {
            const token = document.cookie.split('; ').find(c => c.startsWith('csrftoken=')).split('=')[1];
            const body = new URLSearchParams({action: 'pause', csrfmiddlewaretoken: token});
            const response = await fetch('/djwork/queues/default/action', {method: 'POST', body});
            return response.status;
        }""")
        assert status == 403 and not cluster.redis.sismember("paused", "default")
    finally:
        page.context.close()


def test_quiet_then_stop_from_the_busy_page(cluster, worker, admin_page, screenshots):
    process, identity = worker
    redis = cluster.redis
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/busy/")
    row = page.locator(f'tr[data-identity="{identity}"]')
    row.locator("button:has-text('Quiet')").click()
    assert "Quiet requested" in page.locator(".messages").inner_text()
    wait_until(lambda: redis.hget(identity, "quiet") == b"true", 5, "quiet=true in the heartbeat")
    page.reload()
    assert "quiet" in row.locator("[data-state]").inner_text()
    assert row.locator("button:has-text('Quiet')").count() == 0
    worker_jobs.record.delay("after-quiet")
    time.sleep(2)
    assert "after-quiet" not in counts(redis)
    shoot(page, screenshots, "16-busy-quiet")
    row.locator("button:has-text('Stop')").click()
    assert process.wait(15) == 0
    assert not redis.sismember("processes", identity)
    page.reload()
    assert page.locator(f'tr[data-identity="{identity}"]').count() == 0
    shoot(page, screenshots, "17-busy-stopped")
