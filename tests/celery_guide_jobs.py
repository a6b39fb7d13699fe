"""Jobs for tests/test_celery_guide*.py: the tasks Celery's user guide pages ("Calling Tasks", "Tasks",
"Canvas") call in their examples, written here as our own code with the same names and behaviour.

``add``, ``mul`` and ``xsum`` come from tests/celery_demo_jobs.py (the Django example's). The worker
imports this module at boot through ``passthrough`` (a server middleware), so a job registered under a
name that is not its dotted path (``sum-of-two-numbers``) is known there before its first job arrives.
"""

from __future__ import annotations

import json
from typing import Any

import djwork
from djwork import shared_task
from tests.worker_jobs import conn

CALLS = "t:guide:calls"
ERRORS = "t:guide:errors"


def passthrough(job: Any, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
    return call_next()


def calls() -> list[str]:
    return [raw.decode() for raw in conn().lrange(CALLS, 0, -1)]


@shared_task
def tsum(numbers):
    return sum(numbers)


@shared_task
def subtract(x, y):
    return x - y


@shared_task(name="sum-of-two-numbers")
def named_add(x, y):
    return x + y


@shared_task
def reset_buffers(tag="reset"):
    """An immutable callback: called with no result in front of its own arguments."""
    conn().rpush(CALLS, f"reset_buffers {tag}")
    return tag


@shared_task
def notify_complete(import_id):
    conn().rpush(CALLS, f"notify_complete {import_id}")
    return import_id


# A failure Celery reports at once: djwork retries a plain exception (Sidekiq's rule) unless told not to.
@shared_task(retry=0)
def raising_task(message="something something"):
    raise ValueError(message)


@shared_task
def log_error(request, exc, traceback, tag="errback"):
    """An errback of Celery's new style: the failed task's request, its exception and traceback."""
    conn().rpush(ERRORS, json.dumps({"tag": tag, "exc": type(exc).__name__, "failed": bool(request.id)}))


@shared_task(bind=True)
def dump_context(self, x, y):
    request = self.request
    return {"id": request.id, "args": request.args, "kwargs": request.kwargs, "retries": request.retries,
            "task": request.task, "hostname": request.hostname, "routing_key": request.delivery_info["routing_key"],
            "is_eager": request.is_eager, "called_directly": request.called_directly, "eta": request.eta,
            "expires": request.expires, "headers": request.headers, "root_id": request.root_id,
            "parent_id": request.parent_id}


class FailWhaleError(Exception):
    pass


@shared_task(bind=True, max_retries=3)
def send_twitter_status(self, tweet, fail_times):
    """The guide's ``raise self.retry(exc=exc, countdown=60)``: fails ``fail_times`` runs, then posts."""
    try:
        if self.request.retries < fail_times:
            raise FailWhaleError(f"fail whale for {tweet}")
    except FailWhaleError as exc:
        raise self.retry(exc=exc, countdown=60) from exc
    return f"posted {tweet} after {self.request.retries} retries"


@shared_task(autoretry_for=(FailWhaleError,), retry_kwargs={"max_retries": 5})
def refresh_timeline(user):
    """autoretry_for with retry_kwargs: always a fail whale, so it ends FAILURE after five retries."""
    raise FailWhaleError(f"timeline of {user}")


@shared_task
def refresh_timeline_by_hand(user):
    """The hand-written equivalent: ``raise refresh_timeline_by_hand.retry(exc=exc, max_retries=5)``."""
    try:
        raise FailWhaleError(f"timeline of {user}")
    except FailWhaleError as exc:
        raise refresh_timeline_by_hand.retry(exc=exc, max_retries=5) from exc


class BaseTaskWithRetry(djwork.Task):
    autoretry_for = (TypeError,)
    max_retries = 5
    retry_backoff = True
    retry_backoff_max = 700
    retry_jitter = False


@shared_task(base=BaseTaskWithRetry)
def backoff_by_class():
    raise TypeError("retried by the class's options")


class MyTask(djwork.Task):
    """The guide's handler example: each hook records its call."""

    def before_start(self, task_id, args, kwargs):
        conn().rpush(CALLS, f"before_start {task_id} {args}")

    def on_success(self, retval, task_id, args, kwargs):
        conn().rpush(CALLS, f"on_success {task_id} {retval}")

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        conn().rpush(CALLS, f"on_failure {task_id} {exc!r}")

    def after_return(self, status, retval, task_id, args, kwargs, einfo):
        conn().rpush(CALLS, f"after_return {task_id} {status}")


@shared_task(base=MyTask)
def my_task(x, y):
    return x + y


@shared_task(base=MyTask)
def key_error_task(x, y):
    raise KeyError()


class DatabaseTask(djwork.Task):
    """A resource made once per process and kept on the task (the guide's DatabaseTask)."""

    _db = None

    @property
    def db(self):
        if self._db is None:
            self._db = {"connections": conn().incr("t:guide:db-connects")}
        return self._db


@shared_task(base=DatabaseTask, bind=True)
def process_rows(self):
    return self.db["connections"]


@shared_task(ignore_result=True)
def mytask_ignored(x, y):
    return x + y


@shared_task
def mytask(x, y):
    return x + y
