"""Celery's trace log records, for log pipelines that key on them (the ``CELERY_TRACE_LOG`` setting).

A team moving from Celery may have alerts and dashboards built on the records a Celery worker writes for
each task: ``Task add[id] received`` on ``celery.worker.strategy``, ``... succeeded in 0.01s: 4``,
``... retry: ...`` and ``... raised unexpected: ...`` on ``celery.app.trace``, each with a ``data`` dict
(``id``, ``name``, ``args``, ``kwargs``, and ``return_value``/``runtime`` or ``exc``) for structured
handlers. With the setting on, the worker writes the same records, message formats and ``data`` keys
included; ``args``/``kwargs`` are the call's ``argsrepr``/``kwargsrepr`` when it gave them
(djwork/jobs/argument_reprs.py), so a secret hidden from the dashboard is hidden here too.

Off by default: djwork's own ``start``/``done``/``fail`` lines say the same on the ``djwork`` logger
(docs/logging.md), and a project that never ran Celery would get every job logged twice, under a
``celery`` name it has no reason to route. The ``LOG_*`` constants are Celery's names, so code that
compares a record's ``msg`` with ``celery.app.trace.LOG_SUCCESS`` compares it with these.
"""

from __future__ import annotations

import logging
import reprlib
import traceback
from typing import TYPE_CHECKING, Any

from djwork.jobs.argument_reprs import shown
from djwork.jobs.task_events import shown_error
from djwork.worker.run_hooks import DEAD, FAILED, OK, RETRY, JobRun, RunHook

if TYPE_CHECKING:
    from djwork.settings.conf import Config

LOG_RECEIVED = "Task %(name)s[%(id)s] received"
LOG_SUCCESS = "Task %(name)s[%(id)s] succeeded in %(runtime)ss: %(return_value)s"
LOG_FAILURE = "Task %(name)s[%(id)s] %(description)s: %(exc)s"
LOG_RETRY = "Task %(name)s[%(id)s] retry: %(exc)s"

# The loggers Celery writes them on: the names are what a pipeline routes, so they are Celery's.
received_logger = logging.getLogger("celery.worker.strategy")
trace_logger = logging.getLogger("celery.app.trace")

# A return value is shown cut, as Celery's (1024 characters): a huge result must not make a huge record.
_short = reprlib.Repr()
_short.maxstring = _short.maxother = 1024
_short.maxlist = _short.maxtuple = _short.maxdict = _short.maxset = 64


def short_repr(value: Any) -> str:
    try:
        return _short.repr(value)
    except Exception as error:  # a broken __repr__ must not fail a job that succeeded
        return f"<unrepresentable {type(value).__name__}: {type(error).__name__}>"


class TraceLog(RunHook):
    """Installed only with ``CELERY_TRACE_LOG`` on: a record as the job is received and one as it ends."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def _context(self, run: JobRun) -> dict[str, Any]:
        payload = run.payload
        args, kwargs = shown(payload, payload.get("args"), payload.get("kwargs"))
        return {"id": run.jid, "name": run.class_name, "args": args, "kwargs": kwargs}

    def admit(self, run: JobRun) -> str | None:
        if received_logger.isEnabledFor(logging.INFO):
            # Celery's received record also carries the eta; a due Sidekiq job has none left (docs/celery.md).
            context = {**self._context(run), "eta": None}
            received_logger.info(LOG_RECEIVED, context, extra={"data": context})
        return None

    def after(self, run: JobRun, error: BaseException | None) -> None:
        if run.status == OK:
            if trace_logger.isEnabledFor(logging.INFO):
                context = {**self._context(run), "return_value": short_repr(run.result),
                           "runtime": run.elapsed_ms / 1000}
                trace_logger.info(LOG_SUCCESS, context, extra={"data": context})
        elif run.status == RETRY and error is not None:
            if trace_logger.isEnabledFor(logging.INFO):
                context = {**self._context(run), "exc": short_repr(shown_error(error))}
                trace_logger.info(LOG_RETRY, context, extra={"data": context})
        elif run.status in (DEAD, FAILED) and error is not None:
            shown_exc = shown_error(error)
            context = {**self._context(run), "exc": short_repr(shown_exc), "description": "raised unexpected",
                       "hostname": getattr(run.request, "hostname", None), "internal": False,
                       "traceback": "".join(traceback.format_exception(shown_exc))}
            trace_logger.error(LOG_FAILURE, context, exc_info=(type(shown_exc), shown_exc, shown_exc.__traceback__),
                               extra={"data": context})
