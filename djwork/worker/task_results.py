"""The worker's side of Django Tasks results: RUNNING, then SUCCESSFUL or FAILED, and the signals.

A run that sent the task back to its queue unfinished (``rescheduled``: an
interrupted iterable segment, a limiter's refusal) makes it READY again.

The record (a HASH written by tasks_backend.enqueue) belongs to the one
process running the job at a time, so these read-modify-writes don't race.
Failures to update it are logged and never fail the job itself.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from django.utils import timezone

from djwork import redis as redis_layer
from djwork.redis import keys
from djwork.settings.conf import get_config
from djwork.tasks_compat import DjangoTask, TaskContext, TaskResult, task_finished, task_started
from djwork.worker.run_hooks import RAN, RESCHEDULED, JobRun, RunHook

logger = logging.getLogger("djwork.tasks")


def _read(jid: str) -> dict[str, str]:
    fields = redis_layer.run(lambda conn: conn.hgetall(keys.result(jid)), idempotent=True)
    return {key.decode(): value.decode() for key, value in fields.items()}


def _write(jid: str, updates: dict[str, str]) -> None:
    ttl = get_config().result_ttl

    def write(conn: Any) -> None:
        pipe = conn.pipeline(transaction=True)
        pipe.hset(keys.result(jid), mapping=updates)
        pipe.expire(keys.result(jid), ttl)
        pipe.execute()

    redis_layer.run(write, idempotent=True)


def _result(jid: str) -> TaskResult | None:
    from djwork.tasks_backend import result_from_record

    record = _read(jid)
    if not record:
        return None
    try:
        return result_from_record(jid, record)
    except Exception:
        logger.exception("djwork: task result %s unreadable", jid)
        return None


def started(jid: str, identity: str, task: Any, args: list[Any], kwargs: dict[str, Any]) -> TaskResult | None:
    try:
        record = _read(jid)
        now = timezone.now().isoformat()
        worker_ids = orjson.loads(record.get("worker_ids") or "[]")
        worker_ids.append(identity)
        _write(jid, {"status": "RUNNING", "started_at": now, "last_attempted_at": now,
                     "worker_ids": orjson.dumps(worker_ids).decode()})
        result = _result(jid)
        if result is not None:
            task_started.send(sender=_backend_class(), task_result=result)
        return result
    except Exception:
        logger.exception("djwork: could not mark task %s RUNNING", jid)
        return None


def finished(jid: str, identity: str, result: Any = None, error: BaseException | None = None) -> None:
    try:
        record = _read(jid)
        if not record:
            return
        updates = {"finished_at": timezone.now().isoformat()}
        if error is None:
            updates["status"] = "SUCCESSFUL"
            try:
                updates["return_value"] = orjson.dumps(result).decode()
            except TypeError:
                updates["return_value"] = orjson.dumps(repr(result)).decode()
        else:
            import traceback

            from djwork.worker.retry import error_class_name

            errors = orjson.loads(record.get("errors") or "[]")
            kind = type(error)
            errors.append({
                "exception_class_path": f"{kind.__module__}.{kind.__qualname__}",
                "traceback": "".join(traceback.format_exception(error))[-10_000:],
            })
            updates["status"] = "FAILED"
            updates["errors"] = orjson.dumps(errors).decode()
            updates["error_class"] = error_class_name(error)
        _write(jid, updates)
        task_result = _result(jid)
        if task_result is not None:
            task_finished.send(sender=_backend_class(), task_result=task_result)
    except Exception:
        logger.exception("djwork: could not record the outcome of task %s", jid)


def ready_again(jid: str) -> None:
    """The task went back to its queue unfinished (an iterable segment interrupted, a limiter's refusal):
    READY, which Django defines as "enqueued, or ready to be executed again", not RUNNING while it waits."""
    try:
        if _read(jid):  # an expired record stays gone: a lone status field would be no task's result
            _write(jid, {"status": "READY"})
    except Exception:
        logger.exception("djwork: could not mark task %s READY again", jid)


def _backend_class() -> type:
    from djwork.tasks_backend import DjworkBackend

    return DjworkBackend


class DjangoTaskResults(RunHook):
    """A Django task's record through its run: RUNNING before its body, then SUCCESSFUL or FAILED."""

    blocking = True  # read-modify-writes of the record

    def __init__(self, identity: str) -> None:
        self.identity = identity

    def joins(self, target: Any, config: Any) -> bool | tuple[str, ...]:
        # A djwork job pushed through the Tasks backend carries ``djwork_task``.
        return True if isinstance(target, DjangoTask) else ("djwork_task",)

    def before(self, run: JobRun) -> None:
        target = run.target
        if not isinstance(target, DjangoTask):
            return
        payload = run.payload
        kwargs = payload.get("kwargs") or {}
        task_result = started(run.jid, self.identity, target, payload.get("args") or [],
                              kwargs if isinstance(kwargs, dict) else {})
        if target.takes_context:
            run.leading_args = (TaskContext(task_result=task_result),)

    def after(self, run: JobRun, error: BaseException | None) -> None:
        if run.status == RESCHEDULED and isinstance(run.target, DjangoTask):
            ready_again(run.jid)
            return
        if run.target is None or run.status not in RAN:
            return
        if not isinstance(run.target, DjangoTask) and not run.payload.get("djwork_task"):
            return
        if error is None:
            finished(run.jid, self.identity, result=run.result)
        else:
            finished(run.jid, self.identity, error=error)
