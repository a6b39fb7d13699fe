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
def errback(request, exc, traceback, tag):
    """A Celery errback of the new style (more than one argument): the failed task's request and exception."""
    conn().rpush(ERRORS, json.dumps({"tag": tag, "task_id": request.id, "exc": type(exc).__name__}))


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


class ExpectedError(Exception):
    """What ``fails`` raises: a canvas's ``.get()`` re-raises it (Celery's propagate=True)."""


@djwork.job(retry=0)
def fails(x):
    _note(f"fails {x}")
    raise ExpectedError(f"canvas member {x} fails")


@djwork.job
def errback_old(task_id):
    """Celery's old-style errback: one argument, the failed task's id (more would make it new style)."""
    conn().rpush(ERRORS, json.dumps({"tag": "old", "task_id": task_id}))


@djwork.job
def errback_new(request, exc, traceback, tag):
    """Celery's new-style errback: the failed task's request, its exception and traceback."""
    conn().rpush(ERRORS, json.dumps({"tag": tag, "task_id": request.id, "exc": type(exc).__name__,
                                     "message": str(exc), "traceback": bool(traceback)}))


@djwork.job(bind=True)
def lineage(self, previous):
    """Its request's root_id and parent_id, as Celery's self.request carries them."""
    return {"previous": previous, "root_id": self.request.root_id, "parent_id": self.request.parent_id}


@djwork.job(bind=True)
def replaced_by(self, x, how):
    """Replaces itself (Celery's ``return self.replace(...)``): by a task, a chain or a group."""
    _note(f"replaced_by {x} {how}")
    shapes = {"task": add.s(x, 100), "chain": add.s(x, 1) | mul.s(10), "group": djwork.group(add.s(x, 1), add.s(x, 2)),
              "empty": djwork.chain()}
    return self.replace(shapes[how])


@djwork.job(bind=True)
def nests(self, label, depth):
    """Notes its request's replaced_task_nesting, then replaces itself by itself ``depth`` more times, and by a
    chain of two of itself the last time; returns the nesting it saw."""
    nesting = self.request.replaced_task_nesting
    _note(f"nests {label} {depth} at {nesting}")
    if depth > 0:
        raise self.replace(nests.si(label, depth - 1))
    if depth == 0:
        raise self.replace(djwork.chain(nests.si(label, -1), nests.si(label, -2)))
    return nesting


@djwork.job(bind=True)
def adds_to_chord(self, x):
    """Adds a member to its chord's header (Celery's ``self.add_to_chord``); returns its own x."""
    self.add_to_chord(add.s(x, 1000))
    return x


@djwork.job(bind=True)
def ids(self, i):
    """Celery's integration task of the same name: its root_id, its parent_id and its argument."""
    return [self.request.root_id, self.request.parent_id, i]


@djwork.job(bind=True)
def raises_replacement(self, x, how):
    """Celery's own spelling, ``raise self.replace(...)``: the run ends at the raise, as a success."""
    _note(f"raises_replacement {x} {how}")
    shapes = {"task": add.s(x, 100), "chain": add.s(x, 1) | mul.s(10), "group": djwork.group(add.s(x, 1), add.s(x, 2)),
              "again": replaced_by.s(x, "task")}
    raise self.replace(shapes[how])
    _note("raises_replacement went on after replace()")  # never: replace() raised


@djwork.job(bind=True)
async def async_raises_replacement(self, x):
    """``raise self.replace(...)`` from a coroutine job, which runs on the worker's event loop."""
    _note(f"async_raises_replacement {x}")
    raise self.replace(add.s(x, 100))


@djwork.job
def makes_canvas():
    """Returns a canvas (Celery's tasks return signatures): it reaches the next step as Celery's dict."""
    return djwork.chain(add.s(1), djwork.group(mul.s(2), djwork.chord([add.s(1, 1)], tsum.s())))


@djwork.job
def rebuilds(data):
    """Rebuilds the canvas it was handed (Celery's ``Signature.from_dict``) and names what it found."""
    canvas = djwork.Signature.from_dict(data)
    return [type(canvas).__name__, repr(canvas)]


@djwork.job
def returns_ref():
    """Returns what sending a chain gives back: it is stored as Celery's tuple form, not refused."""
    return djwork.chain(add.s(400, 1), mul.s(2)).delay()
