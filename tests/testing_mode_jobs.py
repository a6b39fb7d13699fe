"""Jobs for tests/test_testing_modes.py, recording their calls in memory (the modes run them in-process)."""

from __future__ import annotations

import djwork

CALLS: list[tuple[str, tuple]] = []
ATTEMPTS: dict[str, int] = {}


@djwork.job
def add(a, b):
    CALLS.append(("add", (a, b)))
    return a + b


@djwork.job
def remember(value):
    CALLS.append(("remember", (value,)))


@djwork.job
def fan_out(count):
    """Enqueues ``count`` add jobs, and one more fan_out below it: nested pushes."""
    CALLS.append(("fan_out", (count,)))
    for number in range(count):
        add.delay(number, 100)
    if count > 1:
        fan_out.delay(count - 1)


@djwork.job(bind=True, max_retries=5)
def flaky(self, key, failures):
    """Fails ``failures`` times (asking for a retry in an hour: drain does not wait), then succeeds."""
    ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
    if ATTEMPTS[key] <= failures:
        raise self.retry(exc=RuntimeError(f"attempt {ATTEMPTS[key]}"), countdown=3600)
    CALLS.append(("flaky", (key, self.request.retries)))


@djwork.job(retry=2)
def always_fails(key):
    ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
    raise ValueError(f"{key} failed")


@djwork.job
async def add_async(a, b):
    CALLS.append(("add_async", (a, b)))
    return a + b


@djwork.job(unique_for=600)
def unique_sync(account):
    CALLS.append(("unique_sync", (account,)))
