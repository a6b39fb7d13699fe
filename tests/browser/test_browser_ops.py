"""The ops side of the dashboard in a real browser: the health strip, confirmations, the self-refreshing Busy page.

Tests run in file order on one server, one real worker and one logged-in admin
page; the last one stops the worker with Stop all. Screenshots land in
test-artifacts/screenshots/ops-*.png.
"""

from __future__ import annotations

import time

from tests import worker_jobs
from tests.browser import seed
from tests.browser.live import shoot
from tests.helpers_worker import wait_until


def test_quiet_shows_at_once_and_busy_refreshes_itself(cluster, worker, admin_page, screenshots):
    _process, identity = worker
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/busy/")
    assert "1 running · 0 quiet" in " ".join(page.locator("#health").inner_text().split())
    port = cluster.redis_url.rsplit(":", 1)[1].split("/")[0]
    assert page.locator("footer [data-redis]").inner_text() == f"redis://127.0.0.1:{port}/0"
    row = page.locator(f'tr[data-identity="{identity}"]')
    row.locator("button:has-text('Quiet')").click()
    assert "Quiet requested" in page.locator(".messages").inner_text()
    # At once: the queued signal ("quiet requested") or, if the 1 s beat already took it, "quiet".
    assert page.locator(f'tr[data-identity="{identity}"] [data-state]').inner_text() in ("quiet requested", "quiet")
    assert row.locator("button:has-text('Quiet')").count() == 0
    # No reload from here on: the page refreshes itself until the heartbeat's quiet shows.
    wait_until(lambda: cluster.redis.hget(identity, "quiet") == b"true", 10, "quiet=true in the heartbeat")
    page.wait_for_function("Number(document.body.dataset.refreshes || 0) >= 1", timeout=20_000)
    page.wait_for_function(f"""document.querySelector('tr[data-identity="{identity}"] [data-state]')
                               .innerText.trim() === 'quiet'""", timeout=20_000)
    page.click("[data-refresh-toggle]")
    assert page.locator("[data-refresh-status]").inner_text() == "auto-refresh paused"
    before = page.evaluate("document.body.dataset.refreshes")
    page.evaluate("window.djworkRefresh()")  # a tick while paused changes nothing
    assert page.evaluate("document.body.dataset.refreshes") == before
    page.click("[data-refresh-toggle]")
    assert page.locator("[data-refresh-status]").inner_text() == "refreshing every 5s"


def test_health_strip_warns_when_every_process_is_quiet(cluster, worker, admin_page, screenshots):
    for n in range(4):
        worker_jobs.record.delay(f"waiting-{n}")
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/")
    strip = page.locator("#health")
    assert "0 running · 1 quiet" in " ".join(strip.inner_text().split())
    assert "Queue default has 4 jobs but every process is quiet or asked to quiet." in strip.inner_text()
    shoot(page, screenshots, "ops-health-strip-quiet-only")
    # One clock: the live chart's "updated" time is the footer's UTC, 24 h.
    page.evaluate("window.djworkDashboard.poll()")
    page.wait_for_function("/^updated \\d\\d:\\d\\d:\\d\\d UTC$/.test("
                           "document.querySelector('[data-live-status]').textContent)")
    assert page.locator("footer [data-clock]").inner_text().endswith(" UTC")


def test_deleting_a_queued_job_asks_first(cluster, admin_page, screenshots):
    doomed = seed.job(klass="app.DoomedJob", args=[7])
    seed.push(cluster.redis, doomed, queue="parked")
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/queues/parked/")
    page.click(f'#queue-jobs tr:has-text("{doomed["jid"]}") button:has-text("Delete")')
    assert page.locator("h1").inner_text() == "Delete this job from parked?"
    assert doomed["jid"] in page.locator(".confirm").inner_text()
    shoot(page, screenshots, "ops-confirm-delete-job")
    page.click("a:has-text('Cancel')")
    assert cluster.redis.llen("queue:parked") == 1
    page.click(f'#queue-jobs tr:has-text("{doomed["jid"]}") button:has-text("Delete")')
    page.click("button:has-text('Delete job')")
    assert "Deleted app.DoomedJob" in page.locator(".messages").inner_text()
    assert cluster.redis.llen("queue:parked") == 0


def test_search_error_messages_and_history_links(cluster, admin_page, screenshots):
    redis = cluster.redis
    failed = seed.failed(seed.job(klass="app.Charge", args=["order-77"]), count=1, message="gateway said NOPE-4711")
    seed.zadd(redis, "retry", failed, time.time() + 3600)
    seed.history(redis, klass="app.Charge", status="retry", error_message="gateway said NOPE-4711")
    seed.history(redis, jid=failed["jid"], klass="app.Charge", status="retry", duration_ms=3.0)
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/retries/")
    page.fill("input[name=q]", "nope-4711")
    page.press("input[name=q]", "Enter")
    # The search's page loaded, not just its URL committed: count() does not wait, and mid-load it counted the
    # rows of a half-parsed table (0, beside two CPU burners).
    page.wait_for_url("**/djwork/retries/?q=nope-4711*", wait_until="load")
    assert page.locator("#entries tbody tr").count() == 1
    assert "order-77" in page.locator("#entries").inner_text()
    assert "in class, jid, error and arguments" in page.locator("#search-note").inner_text()
    shoot(page, screenshots, "ops-search-error-message")
    page.goto(f"{cluster.base_url}/djwork/history/?class=app.Charge")
    assert page.locator("#history-count").inner_text() == "2 shown"
    page.click(f"#runs a:has-text('{failed['jid']}')")
    assert page.locator("#entries tbody tr").count() == 1 and failed["jid"] in page.locator("#entries").inner_text()


def test_quiet_all_and_stop_all_ask_first(cluster, worker, admin_page, screenshots):
    process, _identity = worker
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/busy/")
    page.click("button:has-text('Quiet all')")
    assert page.locator("h1").inner_text() == "Quiet every process?"
    shoot(page, screenshots, "ops-confirm-quiet-all")
    page.click("a:has-text('Cancel')")
    page.click("button:has-text('Stop all')")
    assert page.locator("h1").inner_text() == "Stop every process?"
    shoot(page, screenshots, "ops-confirm-stop-all")
    page.click(".confirm button:has-text('Stop all')")
    assert "Stop requested for 1 process" in page.locator(".messages").inner_text()
    assert process.wait(20) == 0
    page.goto(f"{cluster.base_url}/djwork/")
    assert "No process is running" in page.locator("#health").inner_text()
    shoot(page, screenshots, "ops-health-strip-no-process")
