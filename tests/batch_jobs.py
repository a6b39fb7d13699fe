"""Jobs and callbacks for tests/test_batches*.py, run by real worker subprocesses.

Members count their runs under ``t:batch:runs`` (per key); callbacks count
themselves under ``t:batch:callbacks`` (per event) and append the event to
``t:batch:events``, so a test sees exactly-once and the order of events.
"""

from __future__ import annotations

import json
import os
import signal
import time

import djwork
from tests.worker_jobs import conn

RUNS = "t:batch:runs"
STARTS = "t:batch:starts"
CALLBACKS = "t:batch:callbacks"
EVENTS = "t:batch:events"
STATUSES = "t:batch:statuses"


@djwork.job(bind=True, max_retries=200)
def member(self, key, fail_once=False, hold=0.0, after_complete=False, kill_after=False):
    """Counts its start and its success; ``fail_once`` fails its first run; ``after_complete`` then keeps
    failing (a retry every 0.2 s) until the batch's complete callback has run, so success comes strictly later.
    ``kill_after``: the first such run in the test SIGKILLs its worker once its work is done, before it returns
    (so before its ack): orphan recovery runs it, and the jobs beside it, a second time."""
    conn().hincrby(STARTS, str(key), 1)
    if hold:
        time.sleep(hold)
    if fail_once and conn().set(f"t:batch:failed:{key}", 1, nx=True):
        raise self.retry(countdown=0)
    # Its own batch's complete callback: any batch's (another batch of the test completing first) let the
    # members succeed, and a loaded run saw success and settled run before this batch's complete.
    if after_complete and not conn().hget(f"{CALLBACKS}:{self.request.batch.bid}", "complete"):
        raise self.retry(countdown=0.2)
    conn().hincrby(RUNS, str(key), 1)
    if kill_after and conn().set("t:batch:killed", 1, nx=True):
        os.kill(os.getpid(), signal.SIGKILL)
    return key * 2 if isinstance(key, int) else key


@djwork.job(retry=0)
def dies(key):
    conn().hincrby(RUNS, str(key), 1)
    raise RuntimeError(f"batch member {key} always fails")


@djwork.job
def on_event(status, **callback_args):
    pipe = conn().pipeline(transaction=False)
    pipe.hincrby(CALLBACKS, status["event"], 1)  # any batch's
    # This batch's: what member(after_complete=True) waits for.
    pipe.hincrby(f"{CALLBACKS}:{status['bid']}", status["event"], 1)
    pipe.rpush(EVENTS, f"{status['bid']}:{status['event']}")
    pipe.hset(STATUSES, f"{status['bid']}:{status['event']}", json.dumps({**status, "callback_args": callback_args}))
    pipe.execute()


@djwork.job(bind=True)
def opens_child(self, key):
    """A member that adds a job to its own batch while it runs."""
    with self.request.batch.jobs():
        member.delay(f"{key}-added")
    conn().hincrby(RUNS, str(key), 1)


@djwork.job
def opens_nested(key):
    """A member that opens a batch of its own: a child of the batch it belongs to."""
    child = djwork.Batch(description=f"child of {key}", on_success=on_event, on_settled=on_event)
    with child.jobs():
        member.delay(f"{key}-child", hold=0.3)
    conn().hset("t:batch:children", key, child.bid)
