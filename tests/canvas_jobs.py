"""Jobs for tests/test_canvas*.py: each records its call in Redis, so a test sees values pass through."""

from __future__ import annotations

import json
import time

import djwork
from tests.worker_jobs import conn

CALLS = "t:canvas:calls"
ERRORS = "t:canvas:errors"


def _note(text: str) -> None:
    conn().rpush(CALLS, text)


@djwork.job
def add(x, y, hold=0.0):
    if hold:
        time.sleep(hold)
    _note(f"add {x} {y}")
    return x + y


@djwork.job
def mul(x, y):
    _note(f"mul {x} {y}")
    return x * y


@djwork.job
def double(x):
    return 2 * x


@djwork.job
def tsum(numbers):
    _note(f"tsum {len(numbers)}")
    return sum(numbers)


@djwork.job
def record(value, tag):
    _note(f"{tag} {json.dumps(value)}")
    return value


@djwork.job(retry=0)
def dies(x):
    _note(f"dies {x}")
    raise RuntimeError(f"canvas member {x} always fails")


@djwork.job
def errback(status, tag):
    conn().rpush(ERRORS, json.dumps({"tag": tag, "event": status["event"], "bid": status["bid"],
                                     "dead": status["dead"]}))


@djwork.job
def kills_once(x, flag):
    """The first run kills its own worker process at the very end, before the worker stores its result
    and acks it (as a kill -9 between a job's finish and its ack); the run after recovery returns."""
    _note(f"kills_once {x}")
    if conn().set(f"t:canvas:killed:{flag}", 1, nx=True):
        import os
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    return x + 1
