"""An evicting Redis in a real browser: the worker's boot WARNING and the health strip's item (djwork/redis/risks.py).

This module's cluster runs on a redis-server of its own, started with
``--maxmemory 10mb --maxmemory-policy allkeys-lru`` and stopped after. The
screenshot lands in test-artifacts/screenshots/redis-risks-*.png.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from djwork.testing.redis_server import RedisServer
from tests.browser.live import Cluster, require_browser, shoot
from tests.helpers_worker import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_browser()
    directory = tmp_path_factory.mktemp("browser-evicting")
    server = RedisServer(directory=str(directory / "redis"),
                         extra_args=["--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru"]).start()
    live = Cluster(directory, server.url)
    try:
        live.serve()
        yield live
    finally:
        live.stop_all()
        server.stop()


def test_an_evicting_redis_is_a_boot_warning_and_a_health_strip_item(cluster, admin_page, screenshots):
    worker = cluster.start_worker()
    wait_until(lambda: "starting: identity=" in cluster.log("worker"), 30, "the worker to boot")
    warnings = [line for line in cluster.log("worker").splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and "maxmemory-policy" in warnings[0] and "noeviction" in warnings[0], warnings
    assert worker.poll() is None
    page = admin_page
    page.goto(f"{cluster.base_url}/djwork/")
    item = page.locator('#health [data-warning="maxmemory-policy"]')
    text = item.inner_text()
    assert "Redis maxmemory-policy is allkeys-lru" in text and "Set maxmemory-policy to noeviction" in text
    assert "health-bad" in page.locator("#health").get_attribute("class")
    # The Redis card carries the same warning, and the quieter no-persistence note.
    assert page.locator('[data-redis-risk="maxmemory-policy"]').is_visible()
    assert "no persistence" in page.locator('[data-redis-risk="no-persistence"]').inner_text()
    shoot(page, screenshots, "redis-risks-evicting")
    # Every page carries the strip, so the warning follows the operator around.
    page.goto(f"{cluster.base_url}/djwork/queues/")
    assert page.locator('#health [data-warning="maxmemory-policy"]').is_visible()
