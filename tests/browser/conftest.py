"""Fixtures for the browser tests (see live.py): one live server, one worker and one chromium per module."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from tests.browser.live import ADMIN, CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, Cluster, login, require_browser

PROCESS_STARTED = time.time()  # before any test of this run wrote a screenshot (xdist workers start together)


@pytest.fixture(scope="module")
def cluster(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_browser()
    if urlparse(redis_url).port == 6379:
        raise RuntimeError("browser tests run against the private Redis only")
    live = Cluster(tmp_path_factory.mktemp("browser"), redis_url)
    live.redis.flushdb()
    try:
        live.serve()
        yield live
    finally:
        live.stop_all()


@pytest.fixture(scope="module")
def browser(cluster: Cluster) -> Iterator[Any]:
    sync_api = require_browser()
    playwright = sync_api.sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
    finally:
        playwright.stop()


@pytest.fixture(scope="module")
def admin_page(browser: Any, cluster: Cluster) -> Iterator[Any]:
    page = login(browser, cluster, ADMIN)
    yield page
    assert page.dialogs == [], f"a dialog opened: {page.dialogs}"
    page.context.close()


@pytest.fixture(scope="module")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    # Only an earlier run's shots: the modules sharing this folder run at once on other xdist workers,
    # and emptying it here deleted their fresh shots (and a file one of them had just deleted failed).
    for old in SCREENSHOTS.glob("*.png"):
        with contextlib.suppress(FileNotFoundError):
            if old.stat().st_mtime < PROCESS_STARTED:
                old.unlink()
    return SCREENSHOTS


@pytest.fixture(scope="module")
def worker(cluster: Cluster) -> tuple[Any, str]:
    """One real ``runworkers`` process (killed with the rest at teardown) and its identity."""
    process = cluster.start_worker()
    return process, cluster.worker_identity(process.pid)
