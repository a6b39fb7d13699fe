"""Health probes: the server itself, a worker's /live and /ready through a Redis outage, a swarm parent's."""

from __future__ import annotations

import re
import signal
import socket
import threading

import pytest
import redis as redis_py
from django.test import override_settings

from djwork.settings.conf import get_config
from djwork.worker.launcher import Launcher
from djwork.worker.probes import HealthServer, port_open
from tests.helpers_worker import free_port, http_get, identities, wait_until

TIMEOUT = 3  # the drain deadline (DJWORK TIMEOUT) the workers here run with
HEARTBEAT_INTERVAL = 1  # tests/settings_worker.py
BEAT = 1  # tests/settings_worker.py HEARTBEAT_INTERVAL


# --- the server on its own ----------------------------------------------------------------
def test_status_codes_and_bodies():
    state = {"live": True, "ready": False, "crash": False}

    def ready():
        if state["crash"]:
            raise RuntimeError("probe crashed")
        return state["ready"], "ready text"

    server = HealthServer(0, lambda: (state["live"], "live text"), ready, host="127.0.0.1")
    server.start()
    server.start()  # idempotent
    try:
        port = server.port
        assert port
        assert http_get(port, "/live") == (200, "live text\n")
        assert http_get(port, "/ready") == (503, "ready text\n")
        state.update(live=False, ready=True)
        assert http_get(port, "/live")[0] == 503
        assert http_get(port, "/ready/?verbose=1")[0] == 200
        assert http_get(port, "/")[0] == 404
        state["crash"] = True  # a crashing probe answers 503, never a 500 or a hang
        status, body = http_get(port, "/ready")
        assert status == 503 and "RuntimeError" in body
    finally:
        server.stop()
    assert not port_open(port)
    server.stop()  # idempotent


def test_a_stuck_client_does_not_block_the_next_probe():
    server = HealthServer(0, lambda: (True, "ok"), lambda: (True, "ok"), host="127.0.0.1")
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port)):  # connects, never sends a request
            # http_get gives up after its own timeout: a server serving one request at a
            # time would leave this probe unanswered behind the silent client, not slow.
            assert http_get(server.port, "/live")[0] == 200
    finally:
        # Returns with the silent client still connected (a hang is caught by pytest's timeout).
        server.stop()
    assert not port_open(server.port)


def test_a_taken_port_fails_the_boot_and_rolls_it_back(raw_redis, redis_url):
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with override_settings(DJWORK={"REDIS_URL": redis_url, "CONCURRENCY": 1, "TIMEOUT": 1, "HEALTH_PORT": port}):
            launcher = Launcher(get_config(), embedded=True)
            with pytest.raises(OSError):
                launcher.start()
            # Nothing was left behind: no presence, no worker threads, stop() is done.
            assert not raw_redis.smembers("processes")
            assert launcher.stopped_event.is_set()
            assert not [t for t in threading.enumerate() if t.name.startswith(("djwork-heartbeat", "djwork-proc"))]


def test_the_launcher_closes_its_port_even_when_teardown_steps_fail(raw_redis, redis_url):
    port = free_port()
    with override_settings(DJWORK={"REDIS_URL": redis_url, "CONCURRENCY": 1, "TIMEOUT": 1, "HEALTH_PORT": port,
                                   "HEARTBEAT_INTERVAL": 1}):
        launcher = Launcher(get_config(), embedded=True)
        launcher.start()
        try:
            assert http_get(port, "/live")[0] == 200
            wait_until(lambda: http_get(port, "/ready")[0] == 200, 5, "/ready")

            def broken(*_args, **_kwargs):
                raise RuntimeError("teardown step fails")

            # Redis-side steps only: a broken *thread* stop would leak its loop into later tests.
            clear = launcher.heartbeat.clear
            launcher.heartbeat.clear = broken
            launcher.heartbeat.flush_stats = broken
        finally:
            launcher.stop(timeout=1)
        assert not port_open(port)
        assert http_get(port, "/live")[0] is None
        clear()


# --- a real worker through a Redis outage ------------------------------------------------------
def _last_beat_age(port: int) -> float:
    """Seconds since the worker's last good beat, from /ready's body once it names it (else 0)."""
    match = re.search(r"last heartbeat (\d+\.\d)s ago", http_get(port, "/ready")[1])
    return float(match.group(1)) if match else 0.0


def _probe(port: int) -> tuple[int | None, int | None]:
    return http_get(port, "/live")[0], http_get(port, "/ready")[0]


def test_worker_probes_before_during_and_after_a_redis_outage(workers, own_redis):
    port = free_port()
    worker = workers.start("-c", "1", "--health-port", str(port), "--health-host", "127.0.0.1",
                           redis_url=own_redis.url, overrides={"TIMEOUT": TIMEOUT}, label="worker")
    wait_until(lambda: _probe(port) == (200, 200), 15, "live and ready before the outage")

    own_redis.kill()
    # /ready fails at once (PING), /live holds: restarting the worker would not bring Redis back.
    wait_until(lambda: _probe(port) == (200, 503), 5, "ready=503 during the outage")
    _status, body = http_get(port, "/ready")
    assert "redis unreachable" in body or "heartbeat" in body, body
    # Beats keep failing: the outage is declared (its one line replaces a line per failed beat), and
    # the heartbeat's own record shows no beat for two more intervals while its loop runs (/live "ok").
    worker.wait_log("is unreachable (", 30)
    wait_until(lambda: _last_beat_age(port) >= 3 * HEARTBEAT_INTERVAL, 30, "two more beats without a success")
    assert _probe(port) == (200, 503)
    assert http_get(port, "/live")[1].strip() == "ok"

    own_redis.start()
    wait_until(lambda: _probe(port) == (200, 200), 15, "ready again after the outage")
    # The outage's end is logged, not only its start.
    wait_until(lambda: "Redis is back after" in worker.log() or "Redis reachable again" in worker.log(), 20,
               "the log to say Redis is back")
    client = redis_py.Redis.from_url(own_redis.url)
    try:
        wait_until(lambda: identities(client), 5, "the worker re-registered on the restarted server")
        worker.send(signal.SIGTERM)
        assert worker.wait_exit(TIMEOUT + 8) == 0
    finally:
        client.close()
    assert not port_open(port)
    assert "health probes closed" in worker.log()


def test_swarm_parent_serves_the_probes(workers, own_redis):
    port = free_port()
    swarm = workers.start("--processes", "2", "-c", "1", "--health-port", str(port), redis_url=own_redis.url,
                           overrides={"TIMEOUT": TIMEOUT}, label="swarm")
    wait_until(lambda: _probe(port) == (200, 200), 15, "live and ready")
    wait_until(lambda: http_get(port, "/ready")[1].startswith("2 of 2"), 5, "both children ready")

    own_redis.kill()
    wait_until(lambda: _probe(port) == (200, 503), 8, "ready=503 during the outage")
    own_redis.start()
    wait_until(lambda: _probe(port) == (200, 200), 15, "ready again after the outage")

    swarm.send(signal.SIGTERM)
    assert swarm.wait_exit(TIMEOUT + 8) == 0
    assert not port_open(port)
