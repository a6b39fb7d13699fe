"""The fixtures Celery's integration tests ask for, over djwork: a real worker and a private Redis.

Imported by the conftest of the generated package (tests/support/celery_suite.py), in the pytest process
tests/test_celery_suite.py starts, with ``DJANGO_SETTINGS_MODULE=tests.settings_worker`` and results on.
``celery_session_worker`` is one djwork worker embedded in each pytest process for the whole run (as
Celery's test worker is a thread of the test process), running the swapped ``t.integration.tasks``;
``manager.app`` answers what the tests read of a Celery app (its broker and result backend are the private
Redis). Worker remote control (``manager.inspect()``, ``app.control``) has no djwork counterpart: using it
raises, naming it.
"""

from __future__ import annotations

import logging
import os
import signal
from typing import Any
from urllib.parse import urlparse

import django
import pytest

django.setup()

import redis  # noqa: E402 - after django.setup(): tests.settings_worker sets the private Redis up
from django.conf import settings  # noqa: E402
from django.core.signals import setting_changed  # noqa: E402

import djwork  # noqa: E402
from djwork.redis import keys  # noqa: E402
from djwork.settings import app_conf  # noqa: E402
from djwork.settings.conf import build_config, get_config  # noqa: E402
from djwork.worker.launcher import Launcher  # noqa: E402
from tests.helpers_worker import wait_until  # noqa: E402
from tests.support.celery_suite import read_expected  # noqa: E402

REDIS_URL = os.environ["DJWORK_TEST_REDIS_URL"]
TEST_BROKER = TEST_BACKEND = REDIS_URL
# Read by Celery's tasks.py (get_redis_connection) in this process, the worker's too.
os.environ["REDIS_HOST"] = urlparse(REDIS_URL).hostname or "127.0.0.1"
os.environ["REDIS_PORT"] = str(urlparse(REDIS_URL).port)

# Each test at most this long (LONGER_CAPS below excepted), whatever Celery's marks say (300 s, for its CI's
# reruns): a result that never comes fails its test in this time instead of holding the run for minutes. The
# slowest of Celery's tests that can pass (test_retry: two tasks of four attempts 5 s apart, one job at a time)
# needs about 35 s.
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


class Conf(app_conf.Conf):
    """``app.conf``: djwork's own (``task.app.conf``: the settings djwork has, by Celery's names), and where
    the tests' broker and result backend are."""

    broker_url = TEST_BROKER
    result_backend = TEST_BACKEND
    result_backend_transport_options: dict[str, Any] = {}


class App:
    """What the tests read of ``manager.app`` / ``celery_session_app``."""

    def __init__(self) -> None:
        self.conf = Conf()
        self.backend = Backend()
        self.control = NoCounterpart("app.control")

    def register_task(self, task: Any) -> Any:
        return djwork.register_task(task)

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
    """A djwork worker embedded in this pytest process (djwork/embedded.py's kind), with results on.

    Not a ``runworkers`` subprocess: Celery's test worker is a thread of the test process, and its tests
    count on it: a ``task_received`` receiver a test connects, a task class a test registers
    (``app.register_task``), a setting a test changes are all seen by the worker that runs the jobs.
    """
    # One thread, as Celery's test worker has one process (start_worker's concurrency=1): some tests
    # (test_expired) count on jobs waiting their turn.
    # Celery's trace log records on, as a team whose log pipeline keys on them turns them on, and the
    # ``celery`` loggers at INFO as its logging config would (test_trace_log_arguments reads them).
    logging.getLogger("celery").setLevel(logging.INFO)
    launcher = Launcher(build_config({"CONCURRENCY": 1, "RESULTS": True, "CELERY_TRACE_LOG": True}), embedded=True)
    launcher.start()
    try:
        wait_until(lambda: get_redis_connection().exists(keys.process(launcher.identity)), 20,
                   "the embedded worker to register")
        yield launcher
    finally:
        launcher.stop(timeout=5)


@pytest.fixture
def celery_worker(celery_session_worker: Any) -> Any:
    return celery_session_worker


@pytest.fixture(autouse=True)
def worker_running(celery_session_worker: Any) -> None:
    """The embedded worker runs for every test, not only from the first that asks for it: some of Celery's
    tests (test_trace_log_arguments) ask for none and wait for a result, counting on a test before them in the
    same process having started the session's worker, which --dist worksteal does not promise."""


@pytest.fixture(autouse=True)
def djwork_settings_restored() -> Any:
    """``settings.DJWORK`` as it was before each test, after it: a test that sets ``app.conf`` and fails before
    setting it back (test_eager_chord_inside_task: eager mode on, then its chord raises) would otherwise leave
    its setting to every later test of its process, which runs beside the worker embedded there."""
    before = getattr(settings, "DJWORK", {})
    yield
    if getattr(settings, "DJWORK", {}) is not before:
        settings.DJWORK = before
        setting_changed.send(sender=Conf, setting="DJWORK", value=before, enter=False)


@pytest.fixture
def manager(app: App, celery_session_worker: Any) -> Any:
    manager = Manager(app)
    yield manager
    manager.wait_until_idle()


# Tests that must wait longer than TEST_TIMEOUT by their own design, and why: their own waits add up past it
# (each confirms the chord body never ran by waiting 10 s for it; some confirm more the same way). Their caps
# leave room for a loaded machine; a test that passes ends when its waits do, not at its cap.
LONGER_CAPS = {
    # Seven chord headers, two 10 s waits each: 140 s.
    "test_disabling_flag_allow_error_cb_on_chord_header": 200.0,
    # The same seven headers, one 10 s wait each: 70 s.
    "test_enabling_flag_allow_error_cb_on_chord_header": 120.0,
    # Six headers, one 10 s wait each: 60 s.
    "test_flag_allow_error_cb_on_chord_header_on_upgraded_chord": 110.0,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test with a longer cap at the head of another process's share, so each starts at once beside the
    others instead of all three queuing, one after another, on the process that got Celery's test_chord class.
    The run's ``--dist worksteal`` (tests/support/celery_suite.py) first splits the tests into one run of
    consecutive tests per process, about ``len(items) // processes`` each, and an idle process later steals
    from the tail of a busy one's run; a wrong guess here costs only wall time."""
    processes = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    longer = [item for item in items if cap_of(item) > TEST_TIMEOUT]
    if processes < 2 or not longer:
        return
    share = len(items) // processes
    others = [item for item in items if cap_of(item) <= TEST_TIMEOUT]
    for index, item in enumerate(longer):
        others.insert(min((index % processes) * share, len(others)), item)
    items[:] = others


# A test refused by design (tests/celery_suite_expected.txt) fails by design: most of those waited the whole
# 45 s cap for a message that never comes (the seven `bytes` ones, about 110 s of the run's wall time).
# Cut at 10 s: one that passes within it is still seen passing (the run then fails: take it off the list).
REFUSED_CAP = 10.0
_REFUSED = {nodeid for nodeid, entry in read_expected().items() if entry.kind == "refused"}


def cap_of(item: pytest.Item) -> float:
    if item.nodeid.removeprefix("t/integration/") in _REFUSED:
        return REFUSED_CAP
    return LONGER_CAPS.get(getattr(item, "originalname", item.name), TEST_TIMEOUT)


class OverTheCap(BaseException):
    """A test ran past its cap: a BaseException, so no `except Exception` (a subtests block, a retry loop)
    swallows it and lets the test wait on."""


# Whether the alarm may interrupt: only while a test's body runs. An alarm that lands in pytest_runtest_call's own
# frame (its finally, before the setitimer(0) there) is ignored: raised there, the exception escaped the wrapper
# with the timer still ringing and the handler still installed, and the next alarm, a second later, raised in
# pytest's or xdist's own code (a report from outside any test, or a crashed process). The handler stays
# installed for the whole run; outside a body the flag is down and an alarm does nothing.
_armed = False


# The running test function's code: an alarm is raised only in code that test called, not in pytest's.
_test_code: Any = None
# pytest's and its plugins' own code. A subtests block reports its failure from inside the test's body; an
# alarm raised while pytest formats that report left a traceback entry without a line number, and the
# formatting itself crashed the xdist process (every test it still had was lost).
_PYTEST_CODE = (f"{os.sep}_pytest{os.sep}", f"{os.sep}pluggy{os.sep}", f"{os.sep}xdist{os.sep}",
                f"{os.sep}pytest_subtests{os.sep}")


def _in_pytests_own_code(frame: Any) -> bool:
    """Whether ``frame`` runs on behalf of pytest (reporting, a hook), below the test function's frame. False
    when the test function's frame is not found: then the alarm raises as it always did (never a test left
    running past its cap)."""
    seen = False
    while frame is not None:
        if frame.f_code is _test_code:
            return seen
        seen = seen or any(part in frame.f_code.co_filename for part in _PYTEST_CODE)
        frame = frame.f_back
    return False


def _over_the_cap(signum: int, frame: Any) -> None:
    if _armed and (frame is None or frame.f_code is not pytest_runtest_call.__code__) \
            and not _in_pytests_own_code(frame):  # then the next alarm, a second later, lands elsewhere
        raise OverTheCap("over the cap each test of this run gets (tests/support/celery_fixtures.py)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Each test's body gets its cap (``TEST_TIMEOUT``, or ``LONGER_CAPS``), then is interrupted every second
    until it ends.

    Not pytest-timeout: its one interruption is caught by a ``subtests`` block, and the test goes on to its
    next block, which waits its own 60 s (six of Celery's tests took two minutes each so).
    """
    global _armed, _test_code
    if signal.getsignal(signal.SIGALRM) is not _over_the_cap:
        signal.signal(signal.SIGALRM, _over_the_cap)
    function = getattr(item, "function", None)
    _test_code = getattr(function, "__code__", None)
    _armed = True
    signal.setitimer(signal.ITIMER_REAL, cap_of(item), 1.0)
    try:
        return (yield)
    finally:
        _armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)


def _has_a_frame_without_a_line(traceback: Any) -> bool:
    while traceback is not None:
        if traceback.tb_lineno is None:
            return True
        traceback = traceback.tb_next
    return False


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    """The failure re-raised from here when its traceback has a frame with no line number.

    An interruption raised by the alarm can land on an instruction Python 3.11 gives no line (its traceback
    entry's ``tb_lineno`` is None): pytest's report then failed on ``None - 1``, the process crashed with an
    INTERNALERROR, and every test it had left went unrun. The same exception, re-raised here, has a traceback
    pytest can print; the test is reported failed, as it did fail.
    """
    excinfo = call.excinfo
    if excinfo is not None and _has_a_frame_without_a_line(excinfo.tb):
        error = excinfo.value
        note = f"{error} (re-raised: its traceback had a frame without a line number)"
        try:
            replacement: BaseException = type(error)(note)
        except Exception:  # a class whose constructor wants other arguments
            replacement = RuntimeError(f"{type(error).__name__}: {note}")
        try:
            raise replacement from None
        except BaseException:
            call.excinfo = pytest.ExceptionInfo.from_current()
    return (yield)
