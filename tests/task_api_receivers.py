"""Signal receivers for worker processes: they record each signal in Redis (tests/task_api_jobs.py's LIST).

Only worker processes import this module: worker tests list ``passthrough`` in SERVER_MIDDLEWARE, which a
worker imports while it builds its executor, before it boots, so the receivers are connected in time for
``worker_ready``. (Imported by the test process, they would fire for every other test's workers.)
"""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from djwork import signals
from tests.task_api_jobs import record


def passthrough(job: Any, payload: dict[str, Any], queue: str, call_next: Any) -> Any:
    return call_next()


# --- signal receivers: they record, and one raises (it must change nothing) ----------------------
@receiver(signals.task_received, dispatch_uid="tests.task_api_jobs.received")
def on_received(sender, request, **rest):
    record("task_received", sender=sender.name, task_id=request.id, args=request.args, hostname=request.hostname)


@receiver(signals.task_prerun, dispatch_uid="tests.task_api_jobs.prerun")
def on_prerun(sender, task_id, task, args, kwargs, **rest):
    record("task_prerun", sender=sender.name, task_id=task_id, same_task=task is sender, args=args, kwargs=kwargs)


@receiver(signals.task_postrun, dispatch_uid="tests.task_api_jobs.postrun")
def on_postrun(sender, task_id, task, args, kwargs, retval, state, **rest):
    record("task_postrun", sender=sender.name, task_id=task_id, state=state, retval=repr(retval))


@receiver(signals.task_success, dispatch_uid="tests.task_api_jobs.success")
def on_task_success(sender, result, **rest):
    record("task_success", sender=sender.name, result=result, task_id=sender.request.id)


@receiver(signals.task_retry, dispatch_uid="tests.task_api_jobs.retry")
def on_task_retry(sender, request, reason, einfo, **rest):
    record("task_retry", sender=sender.name, task_id=request.id, reason=repr(reason))


@receiver(signals.task_failure, dispatch_uid="tests.task_api_jobs.failure")
def on_task_failure(sender, task_id, exception, args, kwargs, traceback, einfo, **rest):
    record("task_failure", sender=sender.name, task_id=task_id, exception=repr(exception),
           has_traceback=traceback is not None)


@receiver(signals.task_success, dispatch_uid="tests.task_api_jobs.success-raises")
def raising_receiver(sender, **rest):
    raise RuntimeError("a receiver that raises")


@receiver(signals.task_revoked, dispatch_uid="tests.task_api_jobs.revoked")
def on_revoked(sender, request, terminated, signum, expired, **rest):
    record("task_revoked", sender=getattr(sender, "name", sender), task_id=request.id, expired=expired,
           terminated=terminated, signum=signum, args=request.args, hostname=request.hostname)


@receiver(signals.worker_ready, dispatch_uid="tests.task_api_jobs.ready")
def on_worker_ready(sender, **rest):
    record("worker_ready", identity=sender.identity)


@receiver(signals.worker_shutdown, dispatch_uid="tests.task_api_jobs.shutdown")
def on_worker_shutdown(sender, **rest):
    record("worker_shutdown", identity=sender.identity)


def redis_event(event: Any) -> None:
    """A no-op REDIS_EVENT_HOOK: naming it imports this module, and so connects the receivers, in a worker
    whose coroutine jobs must run on the event loop (a server middleware would put them on threads)."""
