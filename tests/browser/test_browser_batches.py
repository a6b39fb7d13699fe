"""The Batches pages in a real browser (Debian's chromium, headless) against runserver: list, filter, detail,
invalidate, read-only.

Tests run in file order on one server and one logged-in admin page. The
batches are real, written by this process to the private Redis the server
reads; their members' ends are played through fail.lua, as a worker files them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import djwork
from djwork import dead, job_locks
from djwork.redis import keys
from tests import batch_jobs
from tests.browser import seed
from tests.browser.live import SCREENSHOTS, VIEWER, login, shoot


@pytest.fixture(scope="module")
def batches(cluster) -> Iterator[dict]:
    """Four of ten jobs ended (three succeeded via their ack's SREM, one dead), one failing; a hostile description."""
    running = djwork.Batch(description="import 2026-12", on_success=batch_jobs.on_event,
                           on_death=batch_jobs.on_event, callback_queue="browser-cb")
    with running.jobs():
        batch_jobs.member.delay_many([(index,) for index in range(10)])
    jobs = [json.loads(raw) for raw in cluster.redis.lrange(keys.queue("default"), 0, -1)]
    cluster.redis.srem(keys.batch_jids(running.bid), *[job["jid"] for job in jobs[:3]])
    for job, target in zip(jobs[3:5], ("retry", "dead"), strict=True):
        dead.file_failure("t:inprogress", json.dumps(job), target, job, time.time(), job["jid"],
                          locks=job_locks.encode(job_locks.locks_of(job))).evaluate(cluster.redis)
    hostile = djwork.Batch(description=seed.XSS_IMG, on_success=batch_jobs.on_event)
    with hostile.jobs():
        pass
    yield {"running": running, "hostile": hostile, "failing": jobs[3]["jid"], "dead": jobs[4]["jid"]}


@pytest.fixture(scope="module")
def screenshots() -> Path:
    directory = SCREENSHOTS / "batches"
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.png"):
        old.unlink()
    return directory


def test_the_list_from_the_nav_with_progress_bars(cluster, batches, admin_page, screenshots):
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/")
    page.click("nav >> text=Batches")
    page.wait_for_url(f"{cluster.base_url}/djwork/batches/")
    row = page.locator(f'tr[data-bid="{batches["running"].bid}"]')
    outer = row.locator(".usage-bar").bounding_box()
    inner = row.locator(".usage-bar > span").bounding_box()
    assert abs(inner["width"] / outer["width"] - 0.4) < 0.05  # 3 succeeded + 1 dead of 10 ended
    assert row.locator("[data-state]").inner_text() == "running"
    hostile = page.locator(f'tr[data-bid="{batches["hostile"].bid}"]')
    assert seed.XSS_IMG in hostile.inner_text() and hostile.locator("[data-state]").inner_text() == "succeeded"
    assert page.dialogs == []
    shoot(page, screenshots, "batches-01-list")
    page.fill("input[name=q]", "IMPORT")
    page.click("button:has-text('Filter')")
    assert page.locator("tr[data-bid]").count() == 1


def test_the_detail_links_failures_to_their_retry_and_dead_entries(cluster, batches, admin_page, screenshots):
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/batches/")
    page.click(f'tr[data-bid="{batches["running"].bid}"] a')
    page.wait_for_url(f"{cluster.base_url}/djwork/batches/{batches['running'].bid}/")
    assert page.locator("[data-stat=pending]").inner_text() == "6"
    assert page.locator("#pending-jids li").count() == 6
    assert "not yet" not in page.locator('tr[data-event="death"]').inner_text()  # the dead job fired it
    assert "not yet" in page.locator('tr[data-event="success"]').inner_text()
    shoot(page, screenshots, "batches-02-detail")
    page.click(f"#failed-jids >> text={batches['failing']}")
    page.wait_for_url(f"**/djwork/retries/?q={batches['failing']}")
    assert page.locator("tbody tr", has_text=batches["failing"]).count() == 1
    page.go_back()
    page.click(f"#dead-jids >> text={batches['dead']}")
    page.wait_for_url(f"**/djwork/dead/?q={batches['dead']}")
    assert page.locator("tbody tr", has_text=batches["dead"]).count() == 1


def test_invalidate_asks_first(cluster, batches, admin_page, screenshots):
    page = admin_page
    detail = f"{cluster.base_url}/djwork/batches/{batches['running'].bid}/"
    page.goto(detail)
    page.click("button:has-text('Invalidate…')")
    assert page.locator("h1").inner_text() == f"Invalidate batch {batches['running'].bid}?"
    shoot(page, screenshots, "batches-03-confirm")
    page.click("text=Cancel")
    page.wait_for_url(detail)
    assert not djwork.Batch.status(batches["running"].bid).invalidated
    page.click("button:has-text('Invalidate…')")
    page.click("button:has-text('Invalidate batch')")
    page.wait_for_url(detail)
    assert "Invalidated batch" in page.locator(".messages").inner_text()
    assert page.locator("[data-state]").first.inner_text() == "invalidated"
    assert djwork.Batch.status(batches["running"].bid).invalidated


def test_read_only_staff_sees_no_buttons(cluster, browser, batches, screenshots):
    page = login(browser, cluster, VIEWER)
    try:
        page.goto(f"{cluster.base_url}/djwork/batches/{batches['hostile'].bid}/")
        assert page.locator("#batch-status").is_visible() and page.locator("button[name=action]").count() == 0
    finally:
        page.context.close()
