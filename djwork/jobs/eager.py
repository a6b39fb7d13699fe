"""``task.apply(args, kwargs)``: run a job now, in this process, as Celery's eager ``apply`` does.

Nothing touches Redis. The run has a ``self.request`` (``is_eager=True``), the
job's hooks and the run signals fire as in a worker, and a retry — a
``self.retry()`` or an ``autoretry_for`` exception, within the job's limit —
runs the job again at once with ``retries + 1`` (Celery's eager apply ignores the
countdown too). Any other exception is a failure at once, as in Celery: the
Sidekiq-style retry of a plain exception is a worker's, which waits between
attempts. Returns an ``EagerResult``; ``throw=True`` raises the failure instead.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from typing import Any

from djwork.jobs import task_events
from djwork.jobs.task_class import ExceptionInfo, Request, Retry
from djwork.jobs.task_class import Task as Job  # a djwork.Job; this module must not import djwork.jobs (cycle)
from djwork.payload import new_jid
from djwork.settings.conf import get_config
from djwork.worker.retry import autoretried, decide  # the worker's own rules, so both agree

SUCCESS, FAILURE = "SUCCESS", "FAILURE"


class EagerResult:
    """The outcome of ``task.apply()``: ``.get()``, ``.state``, ``.result``, ``.traceback`` (Celery's)."""

    def __init__(self, task_id: str, result: Any, state: str, traceback: str | None = None,
                 name: str | None = None) -> None:
        self.id = self.task_id = task_id
        self.result = self.info = result
        self.state = self.status = state
        self.traceback = traceback
        self.name = name

    def get(self, timeout: float | None = None, propagate: bool = True, **ignored: Any) -> Any:
        """The return value; a failure's exception is raised (``propagate=False``: returned)."""
        if self.state == FAILURE and propagate:
            raise self.result
        return self.result

    wait = get

    def ready(self) -> bool:
        return True

    def successful(self) -> bool:
        return self.state == SUCCESS

    def failed(self) -> bool:
        return self.state == FAILURE

    def forget(self) -> None:
        """Nothing is stored for an eager run."""

    def __repr__(self) -> str:
        return f"<EagerResult: {self.id} {self.state}>"


APPLY_OPTIONS = ("task_id", "retries", "throw", "headers")


def apply(job: Job, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
          **options: Any) -> EagerResult:
    unknown = set(options) - set(APPLY_OPTIONS)
    if unknown:
        raise TypeError(f"{job.name}.apply(): unsupported option(s) {sorted(unknown)} (supported: "
                        f"{', '.join(APPLY_OPTIONS)})")
    args, kwargs = list(args or []), dict(kwargs or {})
    task_id = options.get("task_id") or new_jid()
    retries = int(options.get("retries") or 0)
    payload: dict[str, Any] = {"class": job.name, "jid": task_id, "queue": job.queue, "args": args,
                               "retry": job.payload_retry, **job.options}
    if options.get("headers"):
        payload["headers"] = dict(options["headers"])
    hostname = socket.gethostname()
    while True:
        if retries:
            payload["retry_count"] = retries - 1
        request = Request(id=task_id, retries=retries, queue=job.queue, args=args, kwargs=kwargs, payload=payload,
                          hostname=hostname, task=job.name, is_eager=True)
        events = task_events.for_run(job, request)
        try:
            if events is not None:
                events.before()
            result = job.run(request)
            if asyncio.iscoroutine(result):
                result = asyncio.run(result)
        except Exception as error:
            decision = decide(payload, error, job, job.queue, get_config().max_retries)
            again = decision.target == "retry" and (isinstance(error, Retry) or autoretried(job, error))
            if events is not None:
                events.ended_badly(error, will_retry=again)
            if again:
                retries += 1
                continue
            shown = task_events.shown_error(error)
            if options.get("throw"):
                raise shown
            return EagerResult(task_id, shown, FAILURE, ExceptionInfo(shown).traceback, job.name)
        if events is not None:
            events.succeeded(result)
        return EagerResult(task_id, result, SUCCESS, None, job.name)
