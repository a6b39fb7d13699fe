"""Which tests are slow: decided here, at collection, never by hand.

slow: a test that starts a process other than redis-server (a worker, gunicorn,
runserver, chromium, Ruby, redis-sentinel, pip/build) is slow, and
``./dev test --fast`` (``-m "not slow"``) leaves it out. It is found by the
fixtures it uses (PROCESS_FIXTURES, where each is defined) or by its own body
naming a process starter (PROCESS_STARTERS). The detection is checked on
every run: a test not marked slow that starts a process anyway fails and
names itself (``guard_fast_tests``), so a new process-starting fixture cannot
slip into the fast set unnoticed.
"""

from __future__ import annotations

import functools
import inspect
import os
import subprocess
import types
from collections.abc import Iterator
from typing import Any

import pytest

# (module that defines the fixture, fixture name): using one starts processes.
PROCESS_FIXTURES = {
    ("tests.helpers_worker", "workers"),
    ("tests.browser.conftest", "cluster"),
    ("tests.browser.conftest", "browser"),
    ("tests.browser.test_browser_periodic", "cluster"),
    ("tests.test_celery_guide_worker", "guide_worker"),
    ("tests.test_interop_sidekiq_reads_djwork", "fleet"),
    ("tests.test_interop_sidekiq_server", "fleet"),
    ("tests.interop.helpers", "sidekiq_version"),
    ("tests.test_sentinel", "topology"),
    ("tests.test_wheel", "wheel"),
    ("tests.test_demo", "venv_is_current"),
    ("tests.support.redis_cluster", "redis_cluster"),
}
# Names whose call in a test's own body starts a process.
PROCESS_STARTERS = ("subprocess.", "sys.executable", "with started(", "ruby(", "RubyFleet(", "Workers(", "Cluster(",
                    "runpytest_subprocess", "celery_suite.run(")

def _defining_module(fixturedef: Any) -> str:
    return getattr(fixturedef.func, "__module__", "")


def process_fixtures(item: pytest.Item) -> Iterator[tuple[str, Any]]:
    """The fixtures of the test's whole closure that start processes: (module.name, fixturedef)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return
    for name in item.fixturenames:
        for fixturedef in info.name2fixturedefs.get(name, ()):
            where = (_defining_module(fixturedef), name)
            if where in PROCESS_FIXTURES:
                yield ".".join(where), fixturedef


def uses_process_fixture(item: pytest.Item) -> str | None:
    """The first fixture (of the test's whole closure) that starts processes, as module.name."""
    return next((where for where, _ in process_fixtures(item)), None)


def starts_processes_itself(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    code = getattr(inspect.unwrap(function), "__code__", None) if function is not None else None
    return code is not None and body_starts_processes(code)


# Once per test function, not per parametrized case: reading the source back tokenizes it, and every xdist
# worker collects the whole suite (0.2 of the 2.2 CPU-seconds each process's collection took).
@functools.cache
def body_starts_processes(code: types.CodeType) -> bool:
    try:
        source = inspect.getsource(code)
    except (OSError, TypeError):
        return False
    return any(starter in source for starter in PROCESS_STARTERS)


def is_slow(item: pytest.Item) -> bool:
    return uses_process_fixture(item) is not None or starts_processes_itself(item)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)


class ProcessStartedInAFastTest(AssertionError):
    pass


ALLOWED_IN_FAST_TESTS = {"redis-server"}  # the suite's own private servers: started in milliseconds


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Fail a test that ``./dev test --fast`` would run (not marked slow) but that starts a process."""
    if item.get_closest_marker("slow") is not None:
        return (yield)
    original = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        program = args if isinstance(args, str | bytes | os.PathLike) else args[0]
        if os.path.basename(os.fsdecode(program)).split()[0] not in ALLOWED_IN_FAST_TESTS:
            raise ProcessStartedInAFastTest(
                f"{item.nodeid} starts {args!r} but is not marked slow: add the fixture that starts it to "
                f"PROCESS_FIXTURES in tests/support/selection.py (or its starter to PROCESS_STARTERS)")
        original(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = guarded  # type: ignore[method-assign]
    try:
        return (yield)
    finally:
        subprocess.Popen.__init__ = original  # type: ignore[method-assign]
