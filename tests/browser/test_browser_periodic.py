"""The Periodic pages and the Busy page's leader in a real browser (Debian's chromium) against runserver and a worker.

Tests run in file order on one server, one worker and one logged-in admin
page. The server and the worker both read two ``PERIODIC`` entries (through
``DJWORK_TEST_OVERRIDES``); the worker leads, ticks them and runs what Run
now pushes, so the outcome on the entry's page is a real run's. A third
entry, "old-report", was recorded by an earlier deploy's leader and is no
longer configured.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from djwork.redis import keys
from tests.browser import seed
from tests.browser.live import SCREENSHOTS, VIEWER, Cluster, login, require_browser, shoot
from tests.helpers_worker import history_runs, wait_until

PHONE = {"width": 390, "height": 844}
ENTRIES = [
    {"cron": "* * * * *", "job": "tests.periodic_jobs.tick", "name": "every-minute", "args": ["browser"],
     "queue": "default", "tz": "Europe/Berlin"},
    {"cron": "30 2 * * *", "job": "tests.periodic_jobs.tick", "name": "nightly-report", "args": ["nightly"],
     "queue": "default", "tz": "America/New_York", "catch_up": "none", "overlap": False},
]
OLD_JID = "0123456789abcdef01234567"


@pytest.fixture(scope="module")
def cluster(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The shared fixture's live server, with the entries configured for it and its worker."""
    require_browser()
    if urlparse(redis_url).port == 6379:
        raise RuntimeError("browser tests run against the private Redis only")
    live = Cluster(tmp_path_factory.mktemp("browser-periodic"), redis_url)
    live.env["DJWORK_TEST_OVERRIDES"] = json.dumps({"PERIODIC": ENTRIES})
    live.redis.flushdb()
    # An earlier deploy's leader recorded "old-report" and ran it once; the last sync was after that.
    live.redis.hset(keys.PERIODIC_ENTRIES, mapping={
        "old-report": json.dumps({"cron": "0 * * * *", "job": "tests.periodic_jobs.tick", "seen": 1}),
        seed.XSS_IMG: json.dumps({"cron": seed.XSS_SCRIPT, "job": seed.XSS_IMG, "seen": 1}),
        keys.PERIODIC_SYNCED_FIELD: "2"})
    live.redis.lpush(keys.periodic_history("old-report"), json.dumps(
        {"kind": "slot", "jid": OLD_JID, "slot": 1_780_000_000_000, "at": 1_780_000_000_500, "skipped": 0}))
    try:
        live.serve()
        yield live
    finally:
        live.stop_all()


@pytest.fixture(scope="module")
def screenshots() -> Path:
    """A folder of its own: the shared fixture empties test-artifacts/screenshots/ of the other pages' shots."""
    directory = SCREENSHOTS / "periodic"
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.png"):
        old.unlink()
    return directory


def paused(cluster: Cluster, entry_id: str) -> bool:
    return cluster.redis.hexists(keys.periodic_state(entry_id), "paused")


def history_status(cluster: Cluster, jid: str) -> str:
    for run in reversed(history_runs(cluster.redis)):
        if run.jid == jid:
            return run.status
    return ""


def test_the_list_from_the_nav_shows_every_entry(cluster, worker, admin_page, screenshots):
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/")
    page.click(".topbar nav >> text=Periodic")
    page.wait_for_url(f"{cluster.base_url}/djwork/periodic/")
    assert page.locator(".topbar nav a[aria-current=page]").inner_text() == "Periodic"
    minute = page.locator('tr[data-entry="every-minute"]')
    assert "* * * * *" in minute.inner_text() and "Europe/Berlin" in minute.inner_text()
    assert re.search(r" CES?T$", minute.locator(".next-local").inner_text())  # Berlin's wall clock
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", minute.locator(".next-utc").inner_text())
    nightly = page.locator('tr[data-entry="nightly-report"]')
    assert re.search(r" 02:30 E[SD]T$", nightly.locator(".next-local").inner_text())
    assert "no overlap" in nightly.inner_text() and "active" in nightly.inner_text()
    old = page.locator('tr[data-entry="old-report"]')
    assert "not configured" in old.inner_text() and "stopped" in old.inner_text() and OLD_JID in old.inner_text()
    assert old.locator("button:has-text('Run now')").count() == 0
    hostile = page.locator("#periodic tbody tr").filter(has_text="onerror=")
    assert seed.XSS_IMG in hostile.inner_text() and hostile.locator("a, button").count() == 0
    assert page.locator("main img").count() == 0  # the hostile id stayed text
    shoot(page, screenshots, "periodic-01-list")


def test_detail_then_pause_with_confirmation_then_unpause(cluster, worker, admin_page, screenshots):
    page = admin_page
    detail = f"{cluster.base_url}/djwork/periodic/every-minute/"
    page.goto(f"{cluster.base_url}/djwork/periodic/")
    page.click('tr[data-entry="every-minute"] a')
    page.wait_for_url(detail)
    assert "* * * * *" in page.locator("#periodic-schedule").inner_text()
    assert '["browser"]' in page.locator("#periodic-schedule").inner_text()
    shoot(page, screenshots, "periodic-02-detail")

    page.click("button:has-text('Pause…')")
    assert page.locator("h1").inner_text() == "Pause every-minute?"
    shoot(page, screenshots, "periodic-03-confirm-pause")
    page.click("text=Cancel")
    page.wait_for_url(detail)
    assert not paused(cluster, "every-minute")

    page.click("button:has-text('Pause…')")
    page.click(".confirm button:has-text('Pause')")
    page.wait_for_url(detail)
    assert "Paused every-minute" in page.locator(".messages").inner_text()
    assert paused(cluster, "every-minute") and "paused" in page.locator("h1").inner_text()
    page.goto(f"{cluster.base_url}/djwork/periodic/")
    assert "paused" in page.locator('tr[data-entry="every-minute"]').inner_text()
    shoot(page, screenshots, "periodic-04-paused")

    page.click('tr[data-entry="every-minute"] button:has-text("Unpause…")')
    assert page.locator("h1").inner_text() == "Unpause every-minute?"
    page.click(".confirm button:has-text('Unpause')")
    page.wait_for_url(f"{cluster.base_url}/djwork/periodic/")  # back where the form was
    assert "Unpaused every-minute" in page.locator(".messages").inner_text()
    assert not paused(cluster, "every-minute")
    assert "active" in page.locator('tr[data-entry="every-minute"]').inner_text()


def test_run_now_with_confirmation_runs_the_job_and_shows_its_outcome(cluster, worker, admin_page, screenshots):
    page = admin_page
    detail = f"{cluster.base_url}/djwork/periodic/nightly-report/"
    page.goto(detail)
    page.click("button:has-text('Run now…')")
    assert page.locator("h1").inner_text() == "Run now nightly-report?"
    assert '["nightly"]' in page.locator(".confirm p").inner_text()
    shoot(page, screenshots, "periodic-05-confirm-run-now")
    page.click(".confirm button:has-text('Run now')")
    page.wait_for_url(detail)
    message = page.locator(".messages").inner_text()
    jid = re.search(r"Enqueued nightly-report now as job ([0-9a-f]+)\.", message).group(1)
    wait_until(lambda: history_status(cluster, jid) == "ok", 20, "the worker to run the job")
    page.reload()
    row = page.locator(f'#periodic-runs tr[data-jid="{jid}"]')
    assert "run now" in row.inner_text() and "ok" in row.locator("[data-label=Outcome]").inner_text()
    assert page.locator("[data-stat=run_now]").inner_text() == "1"
    wait_until(lambda: not cluster.redis.exists(keys.periodic_lock("nightly-report")), 10, "the ack to free the lock")
    page.reload()
    assert "free" in page.locator("#running-lock").inner_text()
    shoot(page, screenshots, "periodic-06-after-run-now")


def test_busy_marks_the_leader(cluster, worker, admin_page, screenshots):
    _process, identity = worker
    wait_until(lambda: cluster.redis.get(keys.LEADER) == identity.encode(), 20, "the worker to take the lease")
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/busy/")
    row = page.locator(f'tr[data-identity="{identity}"]')
    assert row.locator(".leader-badge").inner_text() == "leader"
    assert page.locator(".leader-badge").count() == 1
    assert identity in page.locator("#leader").inner_text()
    shoot(page, screenshots, "periodic-07-busy-leader")


def test_read_only_staff_sees_no_buttons_and_phone_layout_fits(cluster, browser, worker, screenshots):
    page = login(browser, cluster, VIEWER)
    try:
        for path in ("/djwork/periodic/", "/djwork/periodic/nightly-report/"):
            page.goto(cluster.base_url + path)
            assert page.locator("button[name=action]").count() == 0, path
    finally:
        page.context.close()
    phone = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True)
    try:
        mobile = phone.new_page()
        mobile.goto(f"{cluster.base_url}/admin/login/?next=/djwork/periodic/")
        mobile.fill("#id_username", VIEWER[0])
        mobile.fill("#id_password", VIEWER[1])
        mobile.click("input[type=submit]")
        mobile.wait_for_url(f"{cluster.base_url}/djwork/periodic/")
        for path, name in (("/djwork/periodic/", "periodic-08-phone-list"),
                           ("/djwork/periodic/nightly-report/", "periodic-09-phone-detail")):
            mobile.goto(cluster.base_url + path)
            width = mobile.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"] + 1, f"{path} scrolls sideways on a phone ({width}px)"
            shoot(mobile, screenshots, name)
    finally:
        phone.close()
