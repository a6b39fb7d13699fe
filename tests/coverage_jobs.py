"""Jobs and server middleware for tests/test_worker_coverage.py and tests/test_connections.py.

Like tests/worker_jobs.py, every job reports to the suite's private Redis
(``DJWORK_TEST_REDIS_URL``) through ``worker_jobs.conn()``, even when the
worker itself talks to another server (a unix socket, TLS, a cache's
database): a test then sees the job ran without trusting the connection under test.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import djwork
from tests.worker_jobs import conn, note

ORDER = "t:order"  # LIST: the queue of every `take_order` job, in the order they ran
GATE = "t:gate"  # STRING: set by a test to let `held` jobs finish
RUNNING = "t:running:{}"  # STRING per group: `held` jobs of that group running right now
PEAK = "t:peak:{}"  # STRING per group: the most `held` jobs of that group seen running at once
ARRIVED = "t:arrived:{}"  # STRING per group: `rendezvous` jobs of that group that started

# Waits inside jobs are bounded so a broken worker fails the test by a timeout
# instead of leaving threads blocked forever; they never end a correct test.
JOB_WAIT_LIMIT = 60.0

# INCR the group's running count and raise its peak in one step, so two jobs
# starting together can't both read the old peak.
_ENTER_LUA = """
local running = redis.call('INCR', KEYS[1])
if running > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], running) end
return running
"""


def _wait_for(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + JOB_WAIT_LIMIT
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.01)


@djwork.job
def take_order(queue_name):
    """Records which queue it came from, in run order (weighted fetch order)."""
    conn().rpush(ORDER, queue_name)


@djwork.job
def held(group, index):
    """Runs until the test sets GATE, counting how many of its group run at once."""
    client = conn()
    running = client.eval(_ENTER_LUA, 2, RUNNING.format(group), PEAK.format(group))
    note(job="held", group=group, index=index, running=running)
    try:
        _wait_for(lambda: client.exists(GATE), "the gate")
    finally:
        client.decr(RUNNING.format(group))
    note(job="held-done", group=group, index=index)


@djwork.job
def rendezvous(group, size):
    """Finishes only once ``size`` jobs of its group are running at the same time."""
    client = conn()
    client.incr(ARRIVED.format(group))
    _wait_for(lambda: int(client.get(ARRIVED.format(group)) or 0) >= size, f"{size} {group} jobs at once")
    note(job="rendezvous", group=group)


@djwork.job(retry=1)
def guarded(key, fail=False):
    """Wrapped by the middleware below; raises ValueError when asked to."""
    note(job="guarded", key=key)
    if fail:
        raise ValueError(f"guarded {key} fails")


class RefusedByMiddleware(Exception):
    """Raised by `gatekeeper` before the job runs."""


def recording_middleware(job: Any, payload: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
    """Outermost: notes what it sees before and after every job, and any error that passes through it."""
    facts = {"jid": payload.get("jid"), "job_name": job.name, "queue": queue, "args": payload.get("args")}
    note(middleware="before", **facts)
    try:
        result = call_next()
    except Exception as error:
        note(middleware="error", error=type(error).__name__, **facts)
        raise
    note(middleware="after", **facts)
    return result


class Gatekeeper:
    """Inner: refuses jobs whose first argument is "refused", swallows the error of those marked "swallowed"."""

    def __call__(self, job: Any, payload: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        first = (payload.get("args") or [None])[0]
        if first == "refused":
            raise RefusedByMiddleware("refused before the job ran")
        try:
            return call_next()
        except ValueError:
            if first == "swallowed":
                return None
            raise
