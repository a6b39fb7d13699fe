"""A backend for Django's Tasks framework (``django.tasks``, or the ``django_tasks`` backport).

    TASKS = {"default": {"BACKEND": "djwork.tasks_backend.DjworkBackend"}}

``enqueue`` writes a result record (a HASH ``djwork:result:<id>`` with a TTL,
``RESULT_TTL`` seconds, default 24 h) and then pushes a Sidekiq-format job
whose ``class`` is the task's dotted path; the worker moves the record through
RUNNING to SUCCESSFUL or FAILED and fires the tasks signals. The record is
written before the push so a fast worker always finds it.

Django's ``Task.using()`` takes only priority, queue_name, run_after and
backend, so unique and expiring tasks are configured per backend alias, in its
OPTIONS, and chosen with ``task.using(backend="unique")`` (docs/unique.md):

    TASKS = {"unique": {"BACKEND": "djwork.tasks_backend.DjworkBackend",
                        "OPTIONS": {"UNIQUE_FOR": 600, "UNIQUE_UNTIL": "success", "EXPIRES": 3600}}}

A duplicate is not written: ``enqueue`` returns the result of the task already
holding the lock (its id is the holder's) and sends no ``task_enqueued``.
"""

from __future__ import annotations

import datetime as dt
import inspect
import math
import time
from typing import Any

import orjson
from django.utils import timezone
from django.utils.module_loading import import_string

from djwork import client, unique
from djwork import redis as redis_layer
from djwork.jobs.priority import django_lane
from djwork.options import OptionError
from djwork.options import seconds as option_seconds
from djwork.payload import ArgumentError, build, check_arguments, new_jid
from djwork.redis import keys
from djwork.redis.lanes import LANE_FIELD
from djwork.settings.conf import get_config
from djwork.tasks_compat import (
    BaseTaskBackend,
    DjangoTask,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)

TASK_FIELD = "djwork_task"  # payload field naming the backend alias; Sidekiq ignores it
OPTION_NAMES = ("UNIQUE_FOR", "UNIQUE_UNTIL", "EXPIRES")


def _iso(moment: dt.datetime | None) -> str:
    return moment.isoformat() if moment else ""


def _parse_time(value: str | bytes | None) -> dt.datetime | None:
    if not value:
        return None
    text = value.decode() if isinstance(value, bytes) else value
    return dt.datetime.fromisoformat(text)


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _parameter_names(task: DjangoTask) -> list[str]:
    """The task function's positional parameter names (after ``context``), to name a refused argument."""
    try:
        parameters = list(inspect.signature(task.func).parameters.values())
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return []
    if task.takes_context and parameters:
        parameters = parameters[1:]
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


class DjworkBackend(BaseTaskBackend):
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True  # a task's priority picks one of its queue's lanes (docs/priority.md)

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        where = f"TASKS[{alias!r}]['OPTIONS']"
        unknown = sorted(set(self.options) - set(OPTION_NAMES))
        if unknown:
            raise OptionError(f"{where}: unknown option(s) {unknown}; djwork's are {list(OPTION_NAMES)}")
        self.uniqueness = unique.check(where, self.options.get("UNIQUE_FOR"), self.options.get("UNIQUE_UNTIL"))
        expires = self.options.get("EXPIRES")
        self.expires = None if expires is None else option_seconds(expires, where, "EXPIRES")
        if self.expires is not None and self.expires <= 0:
            raise OptionError(f"{where}: EXPIRES must be a positive number of seconds, got {expires!r}")

    def enqueue(self, task: DjangoTask, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        args = list(args)
        kwargs = dict(kwargs)
        check_arguments(task.module_path, args, kwargs, _parameter_names(task))
        jid = new_jid()
        now = timezone.now()
        result = TaskResult(
            task=task, id=jid, status=TaskResultStatus.READY, enqueued_at=now,
            started_at=None, finished_at=None, last_attempted_at=None,
            args=args, kwargs=kwargs, backend=self.alias, errors=[], worker_ids=[],
        )
        record = {
            "task_path": task.module_path,
            "queue_name": task.queue_name,
            "priority": str(task.priority),
            "run_after": _iso(task.run_after),
            "takes_context": "1" if task.takes_context else "0",
            "backend": self.alias,
            "status": TaskResultStatus.READY.value,
            "enqueued_at": _iso(now),
            "args": _json(args),
            "kwargs": _json(kwargs),
            "errors": "[]",
            "worker_ids": "[]",
        }
        at = task.run_after.timestamp() if task.run_after else None
        # The record must outlive the wait for run_after, or a task deferred
        # past RESULT_TTL would have no result when it finally runs.
        ttl = get_config().result_ttl + (max(0, math.ceil(at - time.time())) if at is not None else 0)
        result_key = keys.result(jid)

        def write_record(conn: Any) -> None:
            pipe = conn.pipeline(transaction=True)
            pipe.hset(result_key, mapping=record)
            pipe.expire(result_key, ttl)
            pipe.execute()

        redis_layer.run(write_record, idempotent=True)
        extra: dict[str, Any] = {TASK_FIELD: self.alias}
        lane = django_lane(task.priority)
        if lane:  # Django's default priority (0) stays in the queue's own list, payload unchanged
            extra[LANE_FIELD] = lane
        if self.expires is not None:
            # From when the task is due, as for djwork's own jobs (djwork/jobs/__init__.py).
            extra["expires_at"] = max(at or 0.0, time.time()) + self.expires
        payload = build(task.module_path, args, kwargs, queue=task.queue_name, jid=jid, extra=extra)
        if self.uniqueness is not None:
            unique.mark(payload, self.uniqueness, task.module_path)
        pushed = client.push_reporting(payload, at=at)
        if pushed.duplicate_of is not None:
            return self._duplicate(result_key, pushed.duplicate_of, result)
        task_enqueued.send(type(self), task_result=result)
        return result

    def _duplicate(self, result_key: str, holder: str, refused: TaskResult) -> TaskResult:
        """The holder's result for a refused duplicate; our own record is dropped (no job will update it)."""
        redis_layer.run(lambda conn: conn.delete(result_key), idempotent=True)
        try:
            return self.get_result(holder)
        except TaskResultDoesNotExist:
            # The lock is held by a job djwork's Tasks backend did not write (a djwork job, say).
            return TaskResult(task=refused.task, id=holder, status=TaskResultStatus.READY,
                              enqueued_at=refused.enqueued_at, started_at=None, finished_at=None,
                              last_attempted_at=None, args=refused.args, kwargs=refused.kwargs,
                              backend=self.alias, errors=[], worker_ids=[])

    def get_result(self, result_id: str) -> TaskResult:
        fields = redis_layer.run(lambda conn: conn.hgetall(keys.result(result_id)), idempotent=True)
        if not fields:
            raise TaskResultDoesNotExist(result_id)
        return result_from_record(result_id, {k.decode(): v.decode() for k, v in fields.items()})


def result_from_record(result_id: str, record: dict[str, str]) -> TaskResult:
    if "task_path" not in record:
        # The record of a djwork job (its Celery-style fields only, docs/celery.md): not a task's.
        raise TaskResultDoesNotExist(f"{result_id}: not a Django task's result")
    try:
        task = import_string(record["task_path"])
    except ImportError as error:
        raise TaskResultDoesNotExist(f"{result_id}: task {record['task_path']} is not importable") from error
    changes: dict[str, Any] = {}
    if record.get("queue_name") and record["queue_name"] != task.queue_name:
        changes["queue_name"] = record["queue_name"]
    run_after = _parse_time(record.get("run_after"))
    if run_after is not None and run_after != task.run_after:
        changes["run_after"] = run_after
    priority = record.get("priority", "")
    if priority.lstrip("-").isdigit() and int(priority) != task.priority:
        changes["priority"] = int(priority)  # the task's result says the priority it was enqueued with
    if changes:
        task = task.using(**changes)
    result = TaskResult(
        task=task,
        id=result_id,
        status=TaskResultStatus(record["status"]),
        enqueued_at=_parse_time(record.get("enqueued_at")),
        started_at=_parse_time(record.get("started_at")),
        finished_at=_parse_time(record.get("finished_at")),
        last_attempted_at=_parse_time(record.get("last_attempted_at")),
        args=orjson.loads(record.get("args") or "[]"),
        kwargs=orjson.loads(record.get("kwargs") or "{}"),
        backend=record.get("backend", "default"),
        errors=[TaskError(**error) for error in orjson.loads(record.get("errors") or "[]")],
        worker_ids=orjson.loads(record.get("worker_ids") or "[]"),
    )
    if "return_value" in record:
        object.__setattr__(result, "_return_value", orjson.loads(record["return_value"]))
    return result


__all__ = ["ArgumentError", "DjworkBackend", "result_from_record"]
