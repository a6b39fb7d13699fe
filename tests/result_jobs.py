"""Jobs for tests/test_results*.py and tests/test_revoke*.py, run by real worker subprocesses.

Each counts its runs under ``t:*`` keys (tests/worker_jobs.py's), so a test
tells one run from none or two. ``waits_for_revoke`` runs until its revoke
flag shows (bounded) and says what it saw.
"""

from __future__ import annotations

import time

import djwork
from tests.worker_jobs import COUNTS, STARTS, conn

HOLD_LIMIT = 60.0  # seconds: longer than any test waits, short enough that a stuck job ends


class NeedsTwo(Exception):
    """Built with two arguments: the caller rebuilds it from the stored args."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(code, detail)
        self.code = code
        self.detail = detail


def _count(key: str) -> None:
    conn().hincrby(COUNTS, key, 1)


@djwork.job
def add(x, y):
    _count(f"add-{x}-{y}")
    return x + y


@djwork.job(retry=0)
def boom(message):
    _count("boom")
    raise ValueError(message)


@djwork.job(retry=0)
def needs_two(code):
    raise NeedsTwo(code, "two")


@djwork.job(retry=0)
def unimportable():
    class Local(Exception):
        pass

    raise Local("from a class nobody can import")


@djwork.job(bind=True)
def flaky(self, key):
    """Fails its first run (a retry in 1 s), succeeds its second."""
    runs = conn().hincrby(STARTS, key, 1)
    if runs == 1:
        raise self.retry(exc=RuntimeError("first try"), countdown=1)
    return f"ok after {runs}"


@djwork.job(ignore_result=True)
def quiet(key):
    _count(key)
    return 1


@djwork.job
def returns(kind):
    _count(f"returns-{kind}")
    if kind == "big":
        return "x" * 2_000_000
    return object()


@djwork.job(bind=True)
def waits_for_revoke(self, key):
    conn().hincrby(STARTS, key, 1)
    deadline = time.monotonic() + HOLD_LIMIT
    while not self.request.is_revoked() and time.monotonic() < deadline:
        time.sleep(0.02)
    conn().hset("t:saw-revoke", key, "1" if self.request.is_revoked() else "0")
    return "stopped early"


@djwork.job
def held_value(key, value):
    """Runs while ``t:hold:<key>`` exists (bounded), then returns ``value``."""
    client = conn()
    client.hincrby(STARTS, key, 1)
    deadline = time.monotonic() + HOLD_LIMIT
    while client.exists(f"t:hold:{key}") and time.monotonic() < deadline:
        time.sleep(0.01)
    _count(key)
    return value
