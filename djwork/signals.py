"""Celery's signals, as Django ``Signal``s with Celery's names and keyword arguments (docs/celery.md, Signals).

    from djwork.signals import task_failure

    @receiver(task_failure)
    def report(sender, task_id, exception, args, kwargs, traceback, einfo, **rest): ...

Every signal is sent with ``send_robust``: a receiver that raises is logged
and neither the job nor the worker notices. Each sending site first checks
``signal.receivers``, so a process without receivers pays one attribute read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.dispatch import Signal as DjangoSignal

from djwork.client.push_hooks import Pushed, PushHook

logger = logging.getLogger("djwork")


class Signal(DjangoSignal):
    """A Django ``Signal`` whose ``connect`` is also Celery's decorator: ``@task_prerun.connect`` and
    ``@task_prerun.connect(sender=job)`` connect the function and give it back.

    Django's ``connect`` returns None: used as Celery code uses it, the decorated name became None, and the
    function, held only weakly by the signal, was collected at once, so the receiver was never called.
    """

    def connect(self, receiver: Callable[..., Any] | None = None, sender: Any = None, weak: bool = True,
                dispatch_uid: Any = None) -> Any:
        if receiver is None:
            def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
                super(Signal, self).connect(function, sender=sender, weak=weak, dispatch_uid=dispatch_uid)
                return function

            return decorate
        super().connect(receiver, sender=sender, weak=weak, dispatch_uid=dispatch_uid)
        return receiver

# Enqueueing (sender: the job's name). body: the job hash about to be written (a receiver may edit it);
# headers: id, task, retries, eta, expires of that job; routing_key: its queue.
before_task_publish = Signal()
after_task_publish = Signal()

# Running a job in a worker or through task.apply() (sender: the job).
task_received = Signal()  # request: a worker took the job, before its admission checks (expiry, revoke, ...)
task_prerun = Signal()  # task_id, task, args, kwargs
task_postrun = Signal()  # task_id, task, args, kwargs, retval, state
task_success = Signal()  # result
task_retry = Signal()  # request, reason, einfo
task_failure = Signal()  # task_id, exception, args, kwargs, traceback, einfo
task_revoked = Signal()  # request, terminated, signum, expired

# A worker process (sender: its Launcher; sender.identity names it).
worker_ready = Signal()
worker_shutdown = Signal()


def send(signal: Signal, sender: Any, **arguments: Any) -> None:
    """``signal.send_robust``, each receiver's exception logged with its traceback."""
    for receiver, outcome in signal.send_robust(sender, **arguments):
        if isinstance(outcome, Exception):
            logger.error("djwork: signal receiver %r raised; ignored", receiver, exc_info=outcome)


def any_task_receivers() -> bool:
    """True when some receiver listens to a job's run signals: the worker skips the work otherwise."""
    # Five attribute reads, per job: no generator, no call into Django's dispatcher.
    return bool(task_prerun.receivers or task_postrun.receivers or task_success.receivers
                or task_retry.receivers or task_failure.receivers)


def revoked(sender: Any, request: Any, *, terminated: bool = False, signum: int | None = None,
            expired: bool = False) -> None:
    """Send ``task_revoked`` (for the revoke work, and for a job dropped because it expired)."""
    if task_revoked.receivers:
        send(task_revoked, sender, request=request, terminated=terminated, signum=signum, expired=expired)


def publish_headers(payload: dict[str, Any], at: float | None = None) -> dict[str, Any]:
    return {"id": payload.get("jid"), "task": payload.get("class"), "retries": payload.get("retry_count", 0),
            "eta": at, "expires": payload.get("expires_at")}


class PublishSignals(PushHook):
    """Celery's publish signals as a hook of every push (client/push_hooks.py), each sent only when listened to."""

    def publishing(self, payload: dict[str, Any], queue: str, at: float | None) -> None:
        if before_task_publish.receivers:
            publishing(payload, queue, at)

    def pushed(self, payload: dict[str, Any], outcome: Pushed) -> None:
        # A duplicate refused by its lock was not published, nor a push middleware stopped.
        if after_task_publish.receivers and outcome.jid is not None and outcome.duplicate_of is None:
            published(payload, payload.get("queue") or "default")


def publishing(payload: dict[str, Any], queue: str, at: float | None) -> None:
    """``before_task_publish`` for a job about to be written (after the client middleware)."""
    send(before_task_publish, payload.get("class"), body=payload, exchange="", routing_key=queue,
         headers=publish_headers(payload, at), properties=dict(payload.get("properties") or {}),
         declare=[], retry_policy=None)


def published(payload: dict[str, Any], queue: str) -> None:
    """``after_task_publish`` for a job written."""
    send(after_task_publish, payload.get("class"), body=payload, exchange="", routing_key=queue,
         headers=publish_headers(payload))
