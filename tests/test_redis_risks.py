"""Redis settings that lose jobs, called out at worker boot and on the dashboard (djwork/redis/risks.py).

Each test starts its own redis-server with the setting under test and stops it after.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import redis as redis_py
from django.urls import reverse

from djwork import redis as redis_layer
from djwork.redis import risks as redis_risks
from djwork.testing.redis_server import RedisServer

BOOTED = "starting: identity="


@pytest.fixture
def start_server(tmp_path) -> Iterator:
    started: list[RedisServer] = []

    def start(*flags: str) -> tuple[RedisServer, redis_py.Redis]:
        server = RedisServer(directory=str(tmp_path / f"redis-{len(started)}"), extra_args=flags).start()
        started.append(server)
        return server, redis_py.Redis.from_url(server.url)

    yield start
    redis_layer.reset()
    for server in started:
        server.stop()


def risk_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "djwork.worker" in line and "Redis" in line
            and ("maxmemory" in line or "persistence" in line)]


def test_an_evicting_redis_is_one_warning_at_boot(workers, start_server):
    server, _ = start_server("--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru")
    worker = workers.start("-q", "default", "-c", "1", redis_url=server.url)
    log = worker.wait_log(BOOTED, 30)
    warnings = [line for line in log.splitlines() if " WARNING " in line]
    assert len(warnings) == 1, log
    assert "maxmemory-policy is allkeys-lru" in warnings[0]
    assert "Set maxmemory-policy to noeviction" in warnings[0]
    # The check runs before the components start: the lines are all there once "starting" is.
    assert [line for line in risk_lines(log) if " INFO " in line and "no persistence" in line], log


def test_a_safe_persistent_redis_says_nothing(workers, start_server):
    server, _ = start_server("--appendonly", "yes", "--maxmemory", "100mb")
    worker = workers.start("-q", "default", "-c", "1", redis_url=server.url)
    log = worker.wait_log(BOOTED, 30)
    assert risk_lines(log) == [], log


def test_memory_above_80_percent_of_maxmemory(start_server):
    _, client = start_server("--maxmemory", "4mb")
    assert [risk.kind for risk in redis_risks.read(client)] == ["no-persistence"]
    limit = int(client.info("memory")["maxmemory"])
    chunk = "x" * 50_000
    while int(client.info("memory")["used_memory"]) <= 0.85 * limit:
        client.rpush("filler", chunk)
    risks = redis_risks.read(client)
    assert [risk.kind for risk in risks] == ["memory-full", "no-persistence"]
    assert re.search(r"used_memory is [\d.]+ MB, 8\d% of maxmemory 4\.0 MB: at 100 % it refuses every push",
                     risks[0].text), risks[0].text
    client.close()


def test_rdb_save_points_count_as_persistence(start_server):
    _, client = start_server("--save", "900 1")
    assert redis_risks.read(client) == []
    client.close()


def test_health_strip_and_redis_card(admin_client, settings, start_server):
    server, _ = start_server("--maxmemory", "10mb", "--maxmemory-policy", "volatile-lru")
    settings.DJWORK = {**settings.DJWORK, "REDIS_URL": server.url}
    html = admin_client.get(reverse("djwork_dashboard:overview")).content.decode()
    strip = re.search(r'<section class="health[^"]*" id="health".*?</section>', html, re.S).group(0)
    assert 'data-warning="maxmemory-policy"' in strip
    assert "maxmemory-policy is volatile-lru" in strip and "noeviction" in strip
    assert 'data-warning="memory-full"' not in strip
    # The no-persistence note is on the Redis card only, not in the strip.
    assert "no persistence" not in strip
    assert 'data-redis-risk="no-persistence"' in html


def test_a_redis_that_renames_config_or_info_gives_no_false_alarm(start_server):
    _, no_config = start_server("--rename-command", "CONFIG", "", "--maxmemory-policy", "allkeys-lfu")
    assert [risk.kind for risk in redis_risks.read(no_config)] == ["maxmemory-policy"]
    _, no_info = start_server("--rename-command", "INFO", "", "--maxmemory-policy", "allkeys-lfu")
    assert redis_risks.read(no_info) == []
    no_config.close()
    no_info.close()


def test_a_nearly_full_redis_is_a_health_strip_item_while_it_holds(admin_client, settings, start_server):
    server, client = start_server("--maxmemory", "4mb")
    settings.DJWORK = {**settings.DJWORK, "REDIS_URL": server.url}
    overview = reverse("djwork_dashboard:overview")
    assert 'data-warning="memory-full"' not in admin_client.get(overview).content.decode()
    while int(client.info("memory")["used_memory"]) <= 0.85 * int(client.info("memory")["maxmemory"]):
        client.rpush("filler", "x" * 50_000)
    html = admin_client.get(overview).content.decode()
    assert 'data-warning="memory-full"' in html and "Raise maxmemory" in html
    client.delete("filler")
    assert 'data-warning="memory-full"' not in admin_client.get(overview).content.decode()
    client.close()
