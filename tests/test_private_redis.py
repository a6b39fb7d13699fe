"""The suite flushes the server it is given: only one a test process started may be given to it."""

from __future__ import annotations

from tests.support import private_redis


def test_a_url_exported_by_hand_is_never_the_suites_server(monkeypatch):
    monkeypatch.setenv(private_redis.URL_ENV, "redis://127.0.0.1:6380/0")
    monkeypatch.delenv(private_redis.OWNER_ENV, raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert private_redis.needs_own_server()


def test_a_server_a_test_process_started_is_kept_by_the_processes_it_starts(monkeypatch):
    monkeypatch.setenv(private_redis.URL_ENV, "redis://127.0.0.1:6380/0")
    monkeypatch.setenv(private_redis.OWNER_ENV, "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert not private_redis.needs_own_server()
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")  # another worker's server: never shared
    assert private_redis.needs_own_server()
