"""Jobs with a ``djwork.Task`` base class whose hooks record every call in Redis.

Every record is a JSON object in the LIST ``t:events`` (oldest first through ``events``). The signal
receivers of the worker tests are in tests/task_api_receivers.py.
"""

from __future__ import annotations

import json
import os
from typing import Any

import djwork
from tests.worker_jobs import conn

EVENTS = "t:events"


def record(kind: str, **facts: Any) -> None:
    conn().rpush(EVENTS, json.dumps({"kind": kind, "pid": os.getpid(), **facts}, default=repr))


def events(client: Any, **match: Any) -> list[dict[str, Any]]:
    rows = [json.loads(raw) for raw in client.lrange(EVENTS, 0, -1)]
    return [row for row in rows if all(row.get(key) == value for key, value in match.items())]


class Recording(djwork.Task):
    """Records each hook with its arguments, and what ``self.request`` said inside it."""

    max_retries = 1  # a class attribute as an option default
    autoretry_for = (LookupError,)
    default_retry_delay = 1

    def _record(self, hook: str, **facts: Any) -> None:
        request = self.request
        record(hook, job=self.name, request_id=request.id, retries=request.retries, **facts)

    def before_start(self, task_id, args, kwargs):
        self._record("before_start", task_id=task_id, args=args, kwargs=kwargs)

    def on_success(self, retval, task_id, args, kwargs):
        self._record("on_success", retval=retval, task_id=task_id, args=args, kwargs=kwargs)

    def on_retry(self, exc, task_id, args, kwargs, einfo):
        self._record("on_retry", exc=repr(exc), task_id=task_id, args=args, kwargs=kwargs,
                     einfo_type=einfo.type.__name__, einfo_has_traceback="Traceback" in einfo.traceback)

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        self._record("on_failure", exc=repr(exc), task_id=task_id, args=args, kwargs=kwargs,
                     einfo_type=einfo.type.__name__, einfo_has_traceback="Traceback" in einfo.traceback)

    def after_return(self, status, retval, task_id, args, kwargs, einfo):
        self._record("after_return", status=status, retval=repr(retval) if einfo else retval, task_id=task_id,
                     args=args, kwargs=kwargs, einfo=einfo is not None)


@djwork.shared_task(base=Recording, bind=True, name="tests.task_api_jobs.hooked")
def hooked(self, mode, label="x"):
    request = self.request
    record("body", job=self.name, request_id=request.id, retries=request.retries,
           is_instance=isinstance(self, Recording), hostname=request.hostname,
           routing_key=request.delivery_info["routing_key"], is_eager=request.is_eager,
           called_directly=request.called_directly, task=request.task, headers=request.headers)
    if mode == "lookup":  # in the class's autoretry_for: retried once (max_retries = 1), then fails
        raise KeyError(label)
    if mode == "value":  # not in autoretry_for: fails at once
        raise ValueError(label)
    if mode == "hook_raises":
        return "survived"
    return f"ok {label}"


class Raising(djwork.Task):
    def on_success(self, retval, task_id, args, kwargs):
        raise RuntimeError("a hook that raises")


@djwork.job(base=Raising, name="tests.task_api_jobs.raising_hook")
def raising_hook(label):
    record("raising_hook_body", label=label)
    return label


@djwork.job(name="tests.task_api_jobs.plain")
def plain(label):
    record("plain_body", label=label)
    return label


class Refresh(djwork.Task):
    """A class-based task (Celery's ``Task`` subclass with ``run()``), registered below with register_task."""

    name = "tests.task_api_jobs.refresh"
    autoretry_for = (LookupError,)
    retry_kwargs = {"max_retries": 1}
    default_retry_delay = 1

    def run(self, account, mode="ok"):
        request = self.request
        record("refresh", job=self.name, request_id=request.id, retries=request.retries, account=account,
               is_instance=isinstance(self, Refresh))
        if mode == "lookup" and not request.retries:  # in autoretry_for: retried once, then succeeds
            raise KeyError(account)
        return f"refreshed {account} after {request.retries}"


refresh = djwork.register_task(Refresh())
