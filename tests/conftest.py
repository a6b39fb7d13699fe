"""Shared fixtures: every test gets the private Redis, emptied before it runs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
import redis as redis_py

from djwork import redis as redis_layer
from djwork.redis import RedisEvent
from djwork.redis.cluster_url import cluster_url, is_cluster_url
from djwork.testing.redis_server import RedisServer

# Fixtures shared by many modules, registered once here: a test module never imports them.
pytest_plugins = ["tests.helpers_worker", "tests.interop.helpers", "tests.support.selection",
                  "tests.support.xdist_groups", "tests.support.redis_cluster", "pytester"]


def _private_url() -> str:
    url = os.environ["DJWORK_TEST_REDIS_URL"]
    # Belt and braces: the suite flushes its database before every test, so it
    # must never be pointed at a Redis somebody else uses.
    ports = [port for _host, port in cluster_url(url).nodes] if is_cluster_url(url) else [urlparse(url).port]
    if 6379 in ports:
        raise RuntimeError(f"refusing to run tests against {url}: that is the machine's shared Redis")
    return url


@pytest.fixture(scope="session")
def redis_url() -> str:
    return _private_url()


def _emptied_client(redis_url: str):
    # A cluster (DJWORK_TEST_CLUSTER=1): a cluster client, and FLUSHDB goes to every primary. Imported
    # here, not at the top: pytest_plugins registers that module, and must import it first to rewrite it.
    from tests.support.redis_cluster import cluster_client

    client = cluster_client(redis_url) if is_cluster_url(redis_url) else redis_py.Redis.from_url(redis_url)
    client.flushdb()
    redis_layer.reset()
    yield client
    client.close()
    redis_layer.reset()


@pytest.fixture
def raw_redis(redis_url: str):
    """A plain redis-py client on the private server, emptied before the test."""
    yield from _emptied_client(redis_url)


@pytest.fixture(scope="module")
def redis(redis_url: str):
    """The same, emptied once per module: for the interop modules, whose Ruby and djwork processes outlive a test."""
    yield from _emptied_client(redis_url)


@pytest.fixture
def events() -> Iterator[list[RedisEvent]]:
    """Every event the Redis layer reports during the test (retries, refusals, give-ups)."""
    seen: list[RedisEvent] = []
    redis_layer.add_listener(seen.append)
    yield seen
    redis_layer.remove_listener(seen.append)


@pytest.fixture
def own_redis(tmp_path) -> Iterator[RedisServer]:
    """A private server this test may kill and restart (restart() keeps the port), stopped after it."""
    server = RedisServer(directory=str(tmp_path / "redis")).start()
    try:
        yield server
    finally:
        server.stop()
