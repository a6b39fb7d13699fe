"""Jobs for tests/test_celery_failures.py: the same failing body declared each way (docs/celery.md, Failures)."""

from __future__ import annotations

import djwork


class Expected(Exception):
    """The exception every job here raises."""


@djwork.shared_task
def celery_fails(note="boom"):
    raise Expected(note)


@djwork.job
def sidekiq_retries(note="boom"):
    raise Expected(note)


class Plain(djwork.Task):
    """A Task subclass with no failure rules of its own: base= makes the job Celery's."""


@djwork.job(base=Plain)
def based_fails(note="boom"):
    raise Expected(note)


@djwork.shared_task(failures="sidekiq")
def shared_but_sidekiq(note="boom"):
    raise Expected(note)


@djwork.shared_task(bind=True)
def asks_to_retry(self, note="boom"):
    raise self.retry(exc=Expected(note), countdown=60)


@djwork.shared_task(autoretry_for=(Expected,))
def autoretried(note="boom"):
    raise Expected(note)


@djwork.shared_task(max_retries=7)
def seven_retries(note="boom"):
    raise Expected(note)
