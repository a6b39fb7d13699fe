"""Embedded mode: djwork inside a real gunicorn worker (tests/gunicorn_conf.py), and the in-process API."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from django.test import override_settings

from djwork import api, embedded
from djwork.testing.redis_server import RedisServer
from djwork.worker.probes import port_open
from tests import process_jobs
from tests.helpers_worker import free_port, http_get, identities, pid_alive, wait_until

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 3  # the drain deadline (DJWORK TIMEOUT) every gunicorn here runs with


def _embedded_identity(raw_redis, server, timeout: float = 20) -> tuple[str, int]:
    """(identity, pid) of the embedded worker, once it registered from inside the gunicorn worker."""

    def find():
        if not server.alive():
            raise AssertionError(f"gunicorn exited ({server.process.returncode}):\n{server.log()}")
        gunicorn_workers = set(server.children())
        for identity, info in identities(raw_redis).items():
            if info["pid"] in gunicorn_workers:
                return identity, info["pid"]
        return None

    return wait_until(find, timeout, "the embedded worker to register")


def test_jobs_run_in_the_gunicorn_worker_and_drain_on_term(workers, raw_redis):
    port, health_port = free_port(), free_port()
    server = workers.gunicorn(port, overrides={"TIMEOUT": TIMEOUT, "HEALTH_PORT": health_port}, label="gunicorn")
    identity, worker_pid = _embedded_identity(raw_redis, server)
    assert server.children() == [worker_pid]
    info = identities(raw_redis)[identity]
    assert info["embedded"] is True
    assert http_get(port)[0] in (200, 302)
    assert http_get(health_port, "/live")[0] == 200
    wait_until(lambda: http_get(health_port, "/ready")[0] == 200, 20, "/ready")

    process_jobs.record.delay_many([(f"quick-{n}",) for n in range(5)])
    wait_until(lambda: raw_redis.hlen(process_jobs.COUNTS) == 5, 10, "quick jobs to run")
    assert {int(pid) for pid in raw_redis.hvals(process_jobs.PIDS)} == {worker_pid}

    # A job still running when gunicorn gets TERM finishes inside the drain.
    process_jobs.slow.delay("drained", 1.5)
    wait_until(lambda: raw_redis.hget(process_jobs.STARTS, "drained") == b"1", 20, "the slow job to start")
    server.send(signal.SIGTERM)
    assert server.wait_exit(15) == 0
    assert raw_redis.hget(process_jobs.COUNTS, "drained") == b"1"
    assert int(raw_redis.hget(process_jobs.PIDS, "drained")) == worker_pid
    assert not raw_redis.sismember("processes", identity)
    assert not raw_redis.exists(f"{identity}:work")
    assert not pid_alive(worker_pid)
    assert not port_open(health_port)
    log = server.log()
    assert f"djwork: stopped ({identity})" in log
    # Between "quiet" and "stopped" the drain says what it waits for (it was silent for up to TIMEOUT).
    assert f"djwork: waiting for 1 running job(s), up to {TIMEOUT}s ({identity})" in log
    assert "Exception during worker exit" not in log


def test_gunicorn_serves_the_dashboards_static_files_through_whitenoise(workers, raw_redis, tmp_path):
    # gunicorn serves no static files itself; docs/deployment.md's recipe (collectstatic + WhiteNoise) must.
    static_root = tmp_path / "static"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings_worker", "DJWORK_TEST_STATIC_ROOT": str(static_root)}
    collected = subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput"], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=120)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert (static_root / "djwork_dashboard" / "dashboard.css").is_file()
    port = free_port()
    server = workers.gunicorn(port, overrides={"TIMEOUT": TIMEOUT}, label="gunicorn",
                              env={"DJWORK_TEST_STATIC_ROOT": str(static_root)})
    _embedded_identity(raw_redis, server)
    status, body = http_get(port, "/static/djwork_dashboard/dashboard.css")
    assert status == 200, body
    assert body == (ROOT / "static" / "djwork_dashboard" / "dashboard.css").read_text()


def test_dashboard_signals_stop_only_the_embedded_worker(workers, raw_redis):
    port = free_port()
    server = workers.gunicorn(port, overrides={"TIMEOUT": TIMEOUT}, label="gunicorn")
    identity, worker_pid = _embedded_identity(raw_redis, server)

    # Through the API the dashboard's buttons call: it sends to djwork's embedded workers (docs/deployment.md).
    assert api.ProcessSet.get(identity).takes_remote_signals
    api.ProcessSet.signal(identity, "TSTP")
    wait_until(lambda: raw_redis.hget(identity, "quiet") == b"true", 20, "quiet=true after a dashboard TSTP")
    api.ProcessSet.signal(identity, "TERM")
    wait_until(lambda: not raw_redis.sismember("processes", identity), 20, "the worker to leave `processes`")
    server.wait_log(f"djwork: stopped ({identity})", 20)

    # The host is untouched: the same worker process serves HTTP after the stop (each request a full pass
    # through it, so an exit the stop set off would show by the last one).
    for _request in range(5):
        assert http_get(port)[0] in (200, 302)
    assert server.alive()
    assert server.children() == [worker_pid]
    assert not raw_redis.sismember("processes", identity)

    server.send(signal.SIGTERM)
    assert server.wait_exit(10) == 0
    assert "Exception during worker exit" not in server.log()


def test_redis_down_at_boot_keeps_http_serving_and_the_worker_joins_later(workers, tmp_path):
    late = RedisServer(directory=str(tmp_path / "late-redis"))  # a reserved port, nothing listening yet
    try:
        port = free_port()
        server = workers.gunicorn(port, redis_url=late.url, overrides={"TIMEOUT": TIMEOUT}, label="gunicorn")
        wait_until(lambda: http_get(port)[0] in (200, 302), 15, "HTTP while Redis is down")
        server.wait_log("Redis unreachable at boot", 10)
        assert http_get(port)[0] in (200, 302)

        late.start()
        import redis as redis_py

        client = redis_py.Redis.from_url(late.url)
        identity, worker_pid = _embedded_identity(client, server)
        assert server.children() == [worker_pid]
        server.send(signal.SIGTERM)
        assert server.wait_exit(10) == 0
        assert not client.sismember("processes", identity)
        client.close()
    finally:
        late.stop()


def test_term_while_redis_is_still_down_exits_promptly(workers, tmp_path):
    port = free_port()
    closed = f"redis://127.0.0.1:{free_port()}/0"
    server = workers.gunicorn(port, redis_url=closed, overrides={"TIMEOUT": TIMEOUT}, label="gunicorn")
    wait_until(lambda: http_get(port)[0] in (200, 302), 15, "HTTP while Redis is down")
    server.wait_log("Redis unreachable at boot", 10)
    server.send(signal.SIGTERM)
    # A boot still waiting for Redis would hold the worker until gunicorn's graceful_timeout (15 s) killed it:
    # an exit inside this bound, without the "worker exit" exception, is the TERM ending the boot.
    assert server.wait_exit(10) == 0
    assert "Exception during worker exit" not in server.log()


# --- the in-process API (no gunicorn) -------------------------------------------------------
def _boot_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "djwork-embedded-boot"]


def test_start_returns_with_redis_down_and_stop_ends_the_boot():
    closed = f"redis://127.0.0.1:{free_port()}/0"
    with override_settings(DJWORK={"REDIS_URL": closed, "CONCURRENCY": 1, "TIMEOUT": 1}):
        # Never holds up the host's boot: with Redis down for good, a start() that waited for it would never
        # return; it returns while the boot thread still retries.
        started: list[embedded.Embedded | None] = []
        caller = threading.Thread(target=lambda: started.append(embedded.start()), daemon=True)
        caller.start()
        caller.join(20)
        assert started, "embedded.start() waited for Redis"
        instance = started[0]
        try:
            assert instance is not None
            wait_until(_boot_threads, 20, "the boot thread, retrying")
            assert embedded.start() is instance  # idempotent
            assert embedded.current() is instance
            assert instance.launcher is not None and instance.launcher.embedded
        finally:
            embedded.stop(timeout=1)
        # Left alone it retries for ever: ending at all is the stop ending it.
        wait_until(lambda: not _boot_threads(), 20, "the boot thread to end")
        assert not instance.running
        embedded.stop()  # idempotent


def test_a_stop_before_the_boot_thread_ran_registers_nothing(raw_redis, redis_url):
    with override_settings(DJWORK={"REDIS_URL": redis_url, "CONCURRENCY": 1, "TIMEOUT": 1}):
        instance = embedded.Embedded(embedded.get_config())
        instance.stop(timeout=0)  # the host exits before it ever started
        instance.start()  # a late start after stop is a no-op
        assert instance.launcher is None
        assert not raw_redis.smembers("processes")
