"""Unique jobs for tests/test_unique*.py and tests/test_dashboard_locks.py, run by real worker subprocesses.

Each job counts its runs under ``t:*`` keys (tests/worker_jobs.py's), so a test
tells one run from none or two. ``held`` and ``held_until_start`` wait while
``t:hold:<key>`` exists (bounded), so a test can keep one running as long as it
needs to look at it, and let it finish by deleting the key.
"""

from __future__ import annotations

import time

import djwork
from tests.worker_jobs import COUNTS, RUNS, STARTS, conn

HOLD_LIMIT = 60.0  # seconds: longer than any test waits, short enough that a stuck job ends


def hold_key(key: str) -> str:
    return f"t:hold:{key}"


def _count(key: str) -> None:
    pipe = conn().pipeline(transaction=False)
    pipe.incr(RUNS)
    pipe.hincrby(COUNTS, str(key), 1)
    pipe.execute()


def _held(key: str) -> None:
    client = conn()
    client.hincrby(STARTS, str(key), 1)
    deadline = time.monotonic() + HOLD_LIMIT
    while client.exists(hold_key(key)) and time.monotonic() < deadline:
        time.sleep(0.01)
    _count(key)


@djwork.job(unique_for=600)
def sync_account(account_id):
    _count(f"sync-{account_id}")


@djwork.job(unique_for=600)
def held(key):
    _held(key)


@djwork.job(unique_for=600, unique_until="start")
def held_until_start(key):
    _held(key)


@djwork.job(unique_for=600, retry=0)
def fails(key):
    raise RuntimeError(f"fails {key}")


@djwork.job(unique_for=600, unique_args=lambda account_id, **_: [account_id])
def by_account(account_id, note=""):
    _count(f"by-account-{account_id}")


@djwork.job(unique_for=600)
def noop(index):
    conn().incr(RUNS)
