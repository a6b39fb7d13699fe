"""The fixtures Celery's integration tests ask for, over djwork: a real ``runworkers`` and a private Redis.

Imported by the conftest of the generated package (tests/support/celery_suite.py), in the pytest process
tests/test_celery_suite.py starts, with ``DJANGO_SETTINGS_MODULE=tests.settings_worker`` and results on.
``celery_session_worker`` is one ``manage.py runworkers`` for the whole run, importing the swapped
``t.integration.tasks``; ``manager.app`` answers what the tests read of a Celery app (its broker and result
backend are the private Redis). Worker remote control (``manager.inspect()``, ``app.control``) has no djwork
counterpart: using it raises, naming it.
"""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlparse

import django
import pytest

django.setup()

import redis  # noqa: E402 - after django.setup(): tests.settings_worker sets the private Redis up
from django.conf import settings  # noqa: E402
from django.core.signals import setting_changed  # noqa: E402

from djwork.redis import keys  # noqa: E402
from djwork.settings.conf import get_config  # noqa: E402
from tests.helpers_worker import Workers, wait_until  # noqa: E402

REDIS_URL = os.environ["DJWORK_TEST_REDIS_URL"]
TEST_BROKER = TEST_BACKEND = REDIS_URL
# Read by Celery's tasks.py (get_redis_connection) in this process and in the worker, which inherits them.
os.environ["REDIS_HOST"] = urlparse(REDIS_URL).hostname or "127.0.0.1"
os.environ["REDIS_PORT"] = str(urlparse(REDIS_URL).port)

# Each test at most this long, whatever Celery's marks say (300 s, for its CI's reruns): a result that never
# comes fails its test in this time instead of holding the run for minutes. The slowest of Celery's tests
# that can pass (test_retry: two tasks of four attempts 5 s apart, one job at a time) needs about 35 s.
TEST_TIMEOUT = float(os.environ.get("DJWORK_CELERY_SUITE_TEST_TIMEOUT", "45"))


def get_redis_connection() -> redis.Redis:
    # No reply timeout, as redis-py had none before 8.0 (5 s since): Celery's tests BLPOP for 10 s and more
    # and expect None back, not redis-py's TimeoutError.
    return redis.Redis.from_url(REDIS_URL, socket_timeout=None)


def get_active_redis_channels() -> Any:
    return get_redis_connection().execute_command("PUBSUB CHANNELS")


class NoCounterpart:
    """A part of Celery's app or manager djwork has no counterpart of: every use raises, naming it."""

    def __init__(self, what: str) -> None:
        self._what = what

    def __getattr__(self, name: str) -> Any:
        raise NotImplementedError(f"{self._what}.{name}: Celery's worker remote control and result-backend "
                                  "internals have no djwork counterpart (docs/celery.md)")


class Backend:
    """``app.backend``: the result backend, djwork's result records in the same Redis."""

    def ensure_chords_allowed(self) -> None:
        """Chords are allowed: their results live in their batch, whatever ``RESULTS`` says."""

    def __getattr__(self, name: str) -> Any:
        return getattr(NoCounterpart("app.backend"), name)


class Conf(SimpleNamespace):
    """``app.conf``: Celery's settings the tests read; the one they write is djwork's ``CHORD_HEADER_ERRBACKS``."""

    @property
    def task_allow_error_cb_on_chord_header(self) -> bool:
        return get_config().chord_header_errbacks

    @task_allow_error_cb_on_chord_header.setter
    def task_allow_error_cb_on_chord_header(self, value: bool) -> None:
        # As override_settings does: the new DJWORK, then the signal that drops the cached Config.
        settings.DJWORK = {**getattr(settings, "DJWORK", {}), "CHORD_HEADER_ERRBACKS": bool(value)}
        setting_changed.send(sender=type(self), setting="DJWORK", value=settings.DJWORK, enter=True)


class App:
    """What the tests read of ``manager.app`` / ``celery_session_app``."""

    def __init__(self) -> None:
        self.conf = Conf(broker_url=TEST_BROKER, result_backend=TEST_BACKEND, result_backend_transport_options={})
        self.backend = Backend()
        self.control = NoCounterpart("app.control")

    def register_task(self, task: Any) -> Any:
        raise NotImplementedError(f"app.register_task({task!r}): djwork has no app registry of class-based tasks; "
                                  "declare a function with @djwork.shared_task(base=YourTask) (docs/celery.md)")

    def set_current(self) -> None:
        """One app per process in djwork: nothing to make current."""

    set_default = set_current


class Manager:
    """Celery's test ``Manager``: ``app``, and ``wait_until_idle()`` between tests."""

    def __init__(self, app: App) -> None:
        self.app = app

    def wait_until_idle(self, timeout: float = 10.0) -> None:
        """Until no job waits in a queue the worker takes, or runs: a test's leftovers don't run into the next.

        Only the worker's queues: a test that sends a job to a queue nobody takes (Celery's tests do, on
        purpose) would otherwise hold every later test's teardown for the whole timeout.
        """
        connection = get_redis_connection()
        taken = get_config().queue_names

        def idle() -> bool:
            waiting = sum(connection.llen(keys.queue(name)) for name in taken)
            running = sum(connection.llen(key) for key in connection.smembers(keys.IN_PROGRESS_REGISTRY))
            return waiting == 0 and running == 0

        try:
            wait_until(idle, timeout, "the worker to be idle")
        except AssertionError:
            pass  # a test that left a job running forever fails on its own; the next one starts anyway

    def join(self, result: Any, propagate: bool = True, timeout: float | None = None, **ignored: Any) -> Any:
        """The result's ``get()``, as Celery's manager joins one."""
        return result.get(timeout=timeout, propagate=propagate)

    def inspect(self) -> Inspect:
        return Inspect()

    def __getattr__(self, name: str) -> Any:
        return getattr(NoCounterpart("manager"), name)


class Inspect:
    """``manager.inspect()``: only ``ping()``, answered by every djwork process alive in Redis (its heartbeat)."""

    def ping(self) -> dict[str, dict[str, str]]:
        connection = get_redis_connection()
        return {identity.decode(): {"ok": "pong"} for identity in connection.smembers(keys.PROCESSES)
                if connection.exists(keys.process(identity.decode()))}

    def __getattr__(self, name: str) -> Any:
        return getattr(NoCounterpart("manager.inspect()"), name)


@pytest.fixture(scope="session")
def celery_config() -> dict[str, Any]:
    return {"broker_url": TEST_BROKER, "result_backend": TEST_BACKEND}


@pytest.fixture(scope="session")
def celery_session_app() -> App:
    return App()


@pytest.fixture
def celery_app(celery_session_app: App) -> App:
    return celery_session_app


@pytest.fixture
def app(celery_app: App) -> App:
    return celery_app


@pytest.fixture(scope="session")
def celery_session_worker() -> Any:
    """One ``runworkers`` for the run, with results on and the generated package on its path."""
    directory = Path(tempfile.mkdtemp(prefix="djwork-celery-suite-"))
    pool = Workers(directory, REDIS_URL)
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    tree = os.environ["DJWORK_CELERY_SUITE_TREE"]
    os.environ["PYTHONPATH"] = os.pathsep.join([tree, package_root, os.environ.get("PYTHONPATH", "")])
    try:
        # One thread, as Celery's test worker has one process (start_worker's concurrency=1): some tests
        # (test_expired) count on jobs waiting their turn.
        worker = pool.start("-c", "1", overrides={"RESULTS": True})
        worker.identity(get_redis_connection())
        yield worker
    finally:
        pool.cleanup()


@pytest.fixture
def celery_worker(celery_session_worker: Any) -> Any:
    return celery_session_worker


@pytest.fixture
def manager(app: App, celery_session_worker: Any) -> Any:
    manager = Manager(app)
    yield manager
    manager.wait_until_idle()


class OverTheCap(BaseException):
    """A test ran past ``TEST_TIMEOUT``: a BaseException, so no `except Exception` (a subtests block, a retry loop)
    swallows it and lets the test wait on."""


def _over_the_cap(signum: int, frame: Any) -> None:
    raise OverTheCap(f"over the {TEST_TIMEOUT:g} s each test of this run gets (tests/support/celery_fixtures.py)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Each test's body gets ``TEST_TIMEOUT`` seconds, then is interrupted every second until it ends.

    Not pytest-timeout: its one interruption is caught by a ``subtests`` block, and the test goes on to its
    next block, which waits its own 60 s (six of Celery's tests took two minutes each so).
    """
    previous = signal.signal(signal.SIGALRM, _over_the_cap)
    signal.setitimer(signal.ITIMER_REAL, TEST_TIMEOUT, 1.0)
    try:
        return (yield)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
