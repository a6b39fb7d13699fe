"""Sidekiq's own Web UI in a real Chromium, pointed at a live mixed cluster (a Ruby Sidekiq server and djwork).

Sidekiq::Web on WEBrick (6.4.1 on bookworm, 7.3.2 in CI's trixie leg) must answer 200 on every page,
Metrics included on 7.x (whose page reads the ``j|`` keys djwork writes under 7's names, docs/metrics.md),
and the Busy page's Quiet and Stop buttons, clicked in the browser, must quiet and then stop a djwork
worker (through its ``<identity>-signals`` list, as for a Ruby process).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from tests.browser.live import CHROMIUM, CHROMIUM_ARGS, require_browser
from tests.helpers_worker import Workers, wait_until
from tests.interop import jobs, ruby_jobs
from tests.interop.helpers import RubyFleet, ruby, sidekiq_major, stop_workers

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("sidekiq_version")]

BEAT = 1.0  # the djwork workers' heartbeat here: the buttons act within two beats


@pytest.fixture(scope="module")
def fleet(redis, redis_url, tmp_path_factory):
    directory = tmp_path_factory.mktemp("interop-web-browser")
    djwork_workers = Workers(directory, redis_url)
    ruby_processes = RubyFleet(directory, redis_url)
    try:
        yield djwork_workers, ruby_processes
    finally:
        try:
            stop_workers(djwork_workers)
        finally:
            ruby_processes.cleanup()


@pytest.fixture(scope="module")
def page(fleet) -> Any:
    sync_api = require_browser()
    playwright = sync_api.sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(15_000)
        tab = context.new_page()
        dialogs: list[str] = []
        tab.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
        yield tab
        browser.close()
    finally:
        playwright.stop()


def test_sidekiq_web_pages_and_busy_buttons_in_chromium_on_a_mixed_cluster(fleet, page, redis, redis_url):
    djwork_workers, ruby_processes = fleet
    sidekiq = ruby_processes.sidekiq("ruby", concurrency=2, tag="web-ruby", label="sidekiq")
    worker = djwork_workers.start("-c", "2", "-q", "default", "-q", "interop", "--tag", "web-djwork",
                                  overrides={"HEARTBEAT_INTERVAL": BEAT}, label="djwork")
    identity = worker.identity(redis)
    sidekiq.identity(redis)

    # Work on both sides: djwork runs its jobs (metrics), Ruby its own; a retry, a dead and a scheduled job.
    for n in range(3):
        jobs.record.delay(f"web-{n}")
    ruby_jobs.interop_ruby_job.set(queue="ruby").delay("web-ruby")
    jobs.fail.set(queue="interop", retry=3).delay("web-retry")
    jobs.fail.set(queue="interop", retry=0).delay("web-dead")
    jobs.record.perform_in(3600, "web-later")
    record_class = "tests.interop.jobs.record"
    wait_until(lambda: redis.hlen(jobs.COUNTS) == 3 and redis.hget("t:ruby:counts", "web-ruby")
               and redis.zcard("retry") == 1 and redis.zcard("dead") == 1, 20, "both sides to run their jobs")
    if sidekiq_major() >= 7:
        # The beat after the runs writes the minute's metrics under 7's name, which the Metrics page reads.
        wait_until(lambda: any(redis.hexists(key, f"{record_class}|p") for key in redis.scan_iter("j|20*")),
                   5 * BEAT, "djwork's metrics under Sidekiq 7's j| names")

    web = ruby_processes.web()
    seen = ruby(redis_url, "api_read.rb")
    paths = ["/", "/busy", "/queues", "/retries", "/scheduled", "/morgue",
             *(f"/queues/{q['name']}" for q in seen["queues"]),
             *(f"/retries/{e['web_key']}" for e in seen["retry"]),
             *(f"/scheduled/{e['web_key']}" for e in seen["scheduled"]),
             *(f"/morgue/{e['web_key']}" for e in seen["dead"])]
    if sidekiq_major() >= 7:
        paths += ["/metrics", f"/metrics/{quote(record_class)}"]
    bodies = {}
    for path in paths:
        response = page.goto(web.base + path)
        assert response is not None and response.status == 200, f"GET {path} -> {response and response.status}"
        bodies[path] = page.content()
    assert identity in bodies["/busy"]
    if sidekiq_major() >= 7:
        # 7's Metrics page lists djwork's class with its runs, read from the j| keys djwork wrote.
        assert record_class in bodies["/metrics"]
        assert record_class in bodies[f"/metrics/{quote(record_class)}"]

    # The Busy page's buttons, clicked: Quiet, then (on the reloaded page) Stop, on the djwork row.
    page.goto(web.base + "/busy")
    row = page.locator("tr", has=page.locator(f"input[name=identity][value='{identity}']"))
    row.locator("button[name=quiet]").click()
    page.wait_for_url(web.base + "/busy")
    wait_until(lambda: redis.hget(identity, "quiet") == b"true", 2 * BEAT + 1.5, "quiet=true within two beats")
    assert worker.alive()
    page.goto(web.base + "/busy")
    row = page.locator("tr", has=page.locator(f"input[name=identity][value='{identity}']"))
    assert row.locator("button[name=quiet]").count() == 0  # Sidekiq offers Quiet only to a process not stopping
    row.locator("button[name=stop]").click()
    page.wait_for_url(web.base + "/busy")
    assert worker.wait_exit(2 * BEAT + 10) == 0
    assert not redis.sismember("processes", identity)
    page.goto(web.base + "/busy")
    assert identity not in page.content()
    assert sidekiq.alive()  # the Ruby process was not touched
