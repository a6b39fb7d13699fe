"""The Limits pages in a real browser (Debian's chromium, headless) against runserver: list, filter, detail, reset.

Tests run in file order on one server and one logged-in admin page. The
limiters are real: this process acquires them on the same private Redis the
server reads, and one thread blocks in a full concurrent limiter's waiting
list until the Reset button admits it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from djwork import api
from djwork.limiter import bucket, concurrent, window
from tests.browser import seed
from tests.browser.live import SCREENSHOTS, VIEWER, login, shoot
from tests.helpers_worker import wait_until

PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def limiters(cluster) -> Iterator[dict]:
    """A full concurrent limiter with a holder and a real waiter, a partly used bucket, 30 per-tenant windows."""
    stripe = concurrent("stripe", 1, wait_timeout=120, lock_timeout=300)
    held = stripe.acquire(jid="jid-held")
    api_bucket = bucket("api", 10, "hour")
    for _ in range(3):
        api_bucket.acquire()
    for index in range(30):
        window(f"tenant:{index:02d}", 5, 60).acquire()
    cluster.redis.zadd("djwork:limiters", {seed.XSS_IMG: 4_000_000_000})  # a hand-written, hostile entry
    admitted: dict = {}
    thread = threading.Thread(target=lambda: admitted.update(slot=stripe.acquire(jid="jid-waiting")), daemon=True)
    thread.start()
    wait_until(lambda: api.Limiter("stripe").summary().waiting == 1, 10, "the caller in the waiting list")
    yield {"thread": thread, "admitted": admitted, "held": held}
    if thread.is_alive():
        api.Limiter("stripe").reset()  # admits the waiter, so the thread ends
    thread.join(10)


@pytest.fixture(scope="module")
def screenshots() -> Path:
    """A folder of its own: the shared fixture empties test-artifacts/screenshots/ of the other pages' shots."""
    directory = SCREENSHOTS / "limits"
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.png"):
        old.unlink()
    return directory


def bar_fraction(row) -> float:
    outer = row.locator(".usage-bar").bounding_box()
    inner = row.locator(".usage-bar > span").bounding_box()
    return inner["width"] / outer["width"]


def test_limits_list_from_the_nav_with_usage_bars(cluster, limiters, admin_page, screenshots):
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/")
    page.click(".topbar nav >> text=Limits")
    page.wait_for_url(f"{cluster.base_url}/djwork/limits/")
    assert page.locator(".topbar nav a[aria-current=page]").inner_text() == "Limits"
    assert page.locator("#limiters tbody tr").count() == 25  # 33 limiters, 25 a page
    stripe = page.locator('tr[data-limiter="stripe"]')
    assert "concurrent" in stripe.inner_text() and "1 / 1" in stripe.inner_text()
    assert stripe.locator(".usage-bar.usage-full").count() == 1 and bar_fraction(stripe) == pytest.approx(1, abs=0.02)
    api_row = page.locator('tr[data-limiter="api"]')
    assert "3 / 10" in api_row.inner_text() and bar_fraction(api_row) == pytest.approx(0.3, abs=0.02)
    hostile = page.locator("#limiters tbody tr").first  # '"' sorts before letters
    assert hostile.inner_text().startswith(seed.XSS_IMG) and hostile.locator("a, button").count() == 0
    assert page.locator("img").count() == 0  # the name stayed text
    shoot(page, screenshots, "limits-01-list")


def test_filter_by_name_then_page_through(cluster, limiters, admin_page, screenshots):
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/limits/")
    page.fill("input[name=q]", "TENANT")
    page.click("form.search button")
    # A click only starts the navigation: each page is read once it has loaded (the filtered page read
    # 0 rows once, its URL already changed, under two CPU burners).
    page.wait_for_url(re.compile(r"/djwork/limits/\?q=TENANT$"))
    assert page.locator("#limiters tbody tr").count() == 25
    assert "Page 1 of 2" in page.locator(".pager").inner_text()
    shoot(page, screenshots, "limits-02-filtered")
    page.click(".pager >> text=Next")
    page.wait_for_url(re.compile(r"/djwork/limits/\?.*page=2"))
    assert page.input_value("input[name=q]") == "TENANT"
    names = page.locator("#limiters tbody tr").evaluate_all("rows => rows.map(r => r.dataset.limiter)")
    assert names == [f"tenant:{n}" for n in range(25, 30)]
    page.click("form.search >> text=Clear")
    page.wait_for_url(re.compile(r"/djwork/limits/(\?q=)?$"))
    assert page.locator('tr[data-limiter="stripe"]').count() == 1


def test_detail_shows_holder_and_waiting_job(cluster, limiters, admin_page, screenshots):
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/limits/")
    page.click('tr[data-limiter="stripe"] a')
    page.wait_for_url(f"{cluster.base_url}/djwork/limits/stripe/")
    assert "jid-held" in page.locator("#holders").inner_text()
    assert "jid-waiting" in page.locator("#waiters").inner_text()
    assert page.locator("[data-stat=waiting]").inner_text() == "1"
    assert page.locator("[data-stat=immediate]").inner_text() == "1"
    shoot(page, screenshots, "limits-03-detail")


def test_reset_asks_first_and_admits_the_waiting_job(cluster, limiters, admin_page, screenshots):
    page = admin_page
    detail = f"{cluster.base_url}/djwork/limits/stripe/"
    page.goto(detail)
    page.click("button:has-text('Reset…')")
    assert page.locator("h1").inner_text() == "Reset limiter stripe?"
    shoot(page, screenshots, "limits-04-confirm-reset")
    page.click("text=Cancel")
    page.wait_for_url(detail)
    assert limiters["thread"].is_alive() and "jid-held" in page.locator("#holders").inner_text()

    page.click("button:has-text('Reset…')")
    page.click("button:has-text('Reset limiter')")
    page.wait_for_url(detail)
    assert "Reset stripe: its usage starts again from zero. 1 slot freed." in page.locator(".messages").inner_text()
    limiters["thread"].join(10)
    assert "slot" in limiters["admitted"]  # admitted by the reset itself, not by a timeout
    page.reload()
    assert "jid-waiting" in page.locator("#holders").inner_text()
    assert "jid-held" not in page.locator("#holders").inner_text()
    assert page.locator("#waiters").count() == 0 and page.locator("[data-stat=waited]").inner_text() == "1"
    shoot(page, screenshots, "limits-05-after-reset")
    limiters["admitted"]["slot"].release()


def test_delete_from_the_list_with_confirmation(cluster, limiters, admin_page):
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/limits/?q=tenant:07")
    page.click('tr[data-limiter="tenant:07"] button:has-text("Delete…")')
    assert page.locator("h1").inner_text() == "Delete limiter tenant:07?"
    page.click("button:has-text('Delete limiter')")
    assert "Deleted limiter tenant:07." in page.locator(".messages").inner_text()
    assert page.url.endswith("/djwork/limits/?q=tenant:07")
    assert page.locator('tr[data-limiter="tenant:07"]').count() == 0
    assert cluster.redis.zscore("djwork:limiters", "tenant:07") is None


def test_read_only_staff_sees_no_buttons_and_phone_layout_fits(cluster, browser, limiters, screenshots):
    page = login(browser, cluster, VIEWER)
    try:
        page.goto(f"{cluster.base_url}/djwork/limits/")
        assert page.locator("#limiters").is_visible() and page.locator("button[name=action]").count() == 0
        page.goto(f"{cluster.base_url}/djwork/limits/stripe/")
        assert page.locator("button[name=action]").count() == 0
    finally:
        page.context.close()
    phone = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True)
    try:
        mobile = phone.new_page()
        mobile.goto(f"{cluster.base_url}/admin/login/?next=/djwork/limits/")
        mobile.fill("#id_username", VIEWER[0])
        mobile.fill("#id_password", VIEWER[1])
        mobile.click("input[type=submit]")
        mobile.wait_for_url(f"{cluster.base_url}/djwork/limits/")
        for path, name in (("/djwork/limits/", "limits-06-phone-list"), ("/djwork/limits/stripe/",
                                                                          "limits-07-phone-detail")):
            mobile.goto(cluster.base_url + path)
            width = mobile.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"] + 1, f"{path} scrolls sideways on a phone ({width}px)"
            shoot(mobile, screenshots, name)
    finally:
        phone.close()
