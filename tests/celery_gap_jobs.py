"""Jobs for tests/test_celery_gaps_worker.py: a bound coroutine job with recording hooks, and a job that
waits on a Redis key (track_started). Records go to tests/task_api_jobs.py's ``t:events`` LIST."""

from __future__ import annotations

import asyncio
import threading
import time

import djwork
from tests.task_api_jobs import Recording, record
from tests.worker_jobs import conn

ENTERED = "t:gap:entered"  # STRING: coroutine job runs that reached their first await


def release_key(key: str) -> str:
    return f"t:gap:release:{key}"


@djwork.shared_task(base=Recording, bind=True, name="tests.celery_gap_jobs.async_hooked")
async def async_hooked(self, key, together, mode="ok"):
    """Reads self.request, awaits until ``together`` runs are inside at once, reads it again.

    Every run waits for the others, so all of them are suspended on the one loop thread at the same
    time, each between its two reads.
    """
    before = (self.request.id, self.request.retries)
    client = conn()
    client.incr(ENTERED)
    deadline = time.monotonic() + 30
    while int(client.get(ENTERED) or 0) < together and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    after = (self.request.id, self.request.retries)
    record("body", key=key, request_id=after[0], before=list(before), after=list(after),
           thread=threading.current_thread().name, hostname=self.request.hostname)
    if mode == "lookup":  # in Recording's autoretry_for: retried once (max_retries = 1), then fails
        raise KeyError(key)
    if mode == "value":  # not in autoretry_for: fails at once
        raise ValueError(key)
    return f"ok {key}"


def _record_then_wait_for_release(key):
    """Records that the body runs, then waits (up to 30 s) until the test sets the key's release key."""
    client = conn()
    record("tracked_body", key=key)
    deadline = time.monotonic() + 30
    while not client.exists(release_key(key)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return key


@djwork.job(track_started=True, name="tests.celery_gap_jobs.tracked")
def tracked(key):
    """Records that it runs, then waits (up to 30 s) until the test sets its release key."""
    return _record_then_wait_for_release(key)


@djwork.job(name="tests.celery_gap_jobs.untracked")
def untracked(key):
    """As ``tracked``, without the option: the TRACK_STARTED setting decides."""
    return _record_then_wait_for_release(key)


@djwork.job(track_started=True, name="tests.celery_gap_jobs.tracked_async")
async def tracked_async(key):
    """``tracked`` as a coroutine job, on the loop."""
    client = conn()
    record("tracked_body", key=key)
    deadline = time.monotonic() + 30
    while not client.exists(release_key(key)) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return key


@djwork.job(track_started=False, name="tests.celery_gap_jobs.not_tracked")
def not_tracked(key):
    """As ``tracked``, opted out: the TRACK_STARTED setting does not apply to it."""
    return untracked.func(key)


@djwork.job(bind=True, name="tests.celery_gap_jobs.reads_request")
async def reads_request(self, gate):
    """For tests run in-process: self.request before and after an await other runs interleave with."""
    before = (self.request.id, self.request.retries)
    await gate.wait()
    await asyncio.sleep(0)
    return (*before, self.request.id, self.request.retries)


@djwork.shared_task(bind=True, name="tests.celery_gap_jobs.returns_properties")
def returns_properties(self):
    """Celery's return_properties: the message properties the call gave, as the job reads them."""
    return self.request.properties
