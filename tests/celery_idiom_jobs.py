"""Tasks for tests/test_celery_idioms.py, written as a Celery project writes them, with only the import swapped.

``from celery import shared_task`` -> ``from djwork import shared_task``, ``celery.signals`` -> ``djwork.signals``.
Each call a task or receiver sees is noted in the test's private Redis (or, run eagerly, in ``EAGER_NOTES``).
"""

from __future__ import annotations

import json

from djwork import shared_task
from djwork.signals import task_failure, task_postrun, task_prerun
from tests.worker_jobs import conn

NOTES = "t:idioms:notes"
SIGNALLED: list[tuple[str, str]] = []  # (signal, task name), as the decorated receivers below saw them


class Flaky(Exception):
    """What ``flaky`` raises: its autoretry_for class."""


@shared_task
def add(x, y):
    return x + y


@shared_task
def tsum(numbers):
    return sum(numbers)


@shared_task
def fail(note):
    raise ValueError(f"task failed: {note}")


@shared_task(autoretry_for=(Flaky,), retry_backoff=2, retry_backoff_max=30, retry_jitter=True,
             retry_kwargs={"max_retries": 4})
def flaky():
    raise Flaky("try again")


@shared_task
def errback(*args, **kwargs):
    """A link_error: records that it ran (Celery passes (request, exc, traceback), or the task id)."""
    conn().rpush(NOTES, json.dumps({"errback": len(args)}))


@shared_task
def nightly_report(day):
    return day


@task_prerun.connect
def on_prerun(sender=None, task_id=None, task=None, **rest):
    SIGNALLED.append(("task_prerun", sender.name))


@task_postrun.connect()
def on_postrun(sender=None, state=None, **rest):
    SIGNALLED.append(("task_postrun", f"{sender.name} {state}"))


@task_failure.connect(sender=fail)
def on_failure(sender=None, exception=None, **rest):
    SIGNALLED.append(("task_failure", f"{sender.name} {exception}"))
