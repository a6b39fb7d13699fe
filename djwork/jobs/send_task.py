"""``djwork.send_task("name", args, kwargs, **options)``: enqueue a job by its name, without importing it.

Celery's ``app.send_task``. It is only a push: the job need not be registered
in this process (a worker elsewhere, even Ruby Sidekiq, runs it), so nothing
checks the arguments against a function, and the job's own defaults (its
``queue``, ``retry``, ``expires``, ``ignore_result``) are not known here: the
call's options and djwork's defaults (queue ``default``, ``retry`` true,
results as the ``RESULTS`` setting says) apply, in every process alike.
docs/celery.md, send_task.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from djwork import options as enqueue_options
from djwork.jobs import decorator_options as job_options
from djwork.jobs import priority as job_priority
from djwork.jobs.decorator_options import check_ignore_result, check_payload_options, check_retry
from djwork.jobs.enqueue import PAYLOAD_OPTIONS, Enqueueing, JobRef
from djwork.payload import build, check_arguments
from djwork.results import record as result_record
from djwork.settings.conf import get_config


class NamedJob(Enqueueing):
    """The enqueue verbs for a job known only by name (``send_task`` uses ``apply_async``)."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name.strip():
            raise enqueue_options.OptionError(f"send_task: the job's name must be a non-empty string, got {name!r}")
        self.name = name

    def __repr__(self) -> str:
        return f"<djwork.send_task {self.name}>"

    def build_payload(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None, *,
                      countdown: float | None = None, eta: dt.datetime | float | None = None,
                      expires: dt.datetime | float | None = None, queue: str | None = None,
                      retry: bool | int | None = None, jid: str | None = None, ignore_result: bool | None = None,
                      **options: Any) -> tuple[dict[str, Any], float | None]:
        if args is not None and (isinstance(args, (str, bytes, dict)) or not isinstance(args, Iterable)):
            raise TypeError(f"send_task {self.name}: args must be a list or tuple, got {args!r}")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise TypeError(f"send_task {self.name}: kwargs must be a dict, got {kwargs!r}")
        args, kwargs = list(args or []), dict(kwargs or {})
        if get_config().strict_args:
            check_arguments(self.name, args, kwargs)
        jid, extra = job_options.call_options(options, self.name, jid)
        unknown = set(options) - set(PAYLOAD_OPTIONS)
        if unknown:
            raise TypeError(f"send_task {self.name}: unknown option(s) {sorted(unknown)}")
        check_payload_options(options, self.name)
        extra.update(options)
        job_priority.settle_lane(extra)
        at = enqueue_options.run_at(eta, countdown, self.name)
        if expires is not None:
            extra["expires_at"] = enqueue_options.expires_at(expires, at, self.name)
        if jid is not None:
            enqueue_options.check_jid(jid, self.name)
        # The job's own ignore_result is not known here: the call's, else the RESULTS setting, so
        # send_task(...).get() works as Celery's does (a Ruby worker ignores the field).
        ignore = check_ignore_result(ignore_result, self.name)
        if ignore is None:
            ignore = not get_config().results
        if not ignore:
            extra[result_record.PAYLOAD_FIELD] = True
        payload = build(self.name, args, kwargs,
                        queue=enqueue_options.check_queue(queue or "default", self.name),
                        retry=True if retry is None else check_retry(retry, self.name), jid=jid, extra=extra)
        return payload, at


def send_task(name: str, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
              **options: Any) -> JobRef:
    """Push the job called ``name`` with these arguments; the options are ``apply_async``'s."""
    return NamedJob(name).apply_async(args, kwargs, **options)
