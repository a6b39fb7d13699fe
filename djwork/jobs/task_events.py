"""A job run's hooks and signals, in Celery's order, each one guarded (docs/celery.md).

    success: task_prerun, before_start, (body), on_success, task_success, after_return("SUCCESS"), task_postrun
    retry:   task_prerun, before_start, (body), on_retry, task_retry, task_postrun
    failure: task_prerun, before_start, (body), on_failure, task_failure, after_return("FAILURE"), task_postrun

"Retry" means the job goes to the retry set and will run again; "failure" that it
will not (dead set, or dropped). ``after_return`` is not called for a retry, as in
Celery (its trace skips it for RETRY): code that cleans up there expects one call
per job, at its end. A hook or receiver that raises is logged and
changes nothing: the job's outcome is its body's. The worker (and ``task.apply``)
makes a ``RunEvents`` only when the job's class has hooks or a signal has a
receiver, so a plain job pays one check.
"""

from __future__ import annotations

import logging
from typing import Any

from djwork import signals
from djwork.jobs.task_class import ExceptionInfo, Request, Retry, Task
from djwork.worker.run_hooks import OK, RESCHEDULED, JobRun, RunHook, build_request
from djwork.worker.run_hooks import RETRY as RETRIED

logger = logging.getLogger("djwork")

SUCCESS, RETRY, FAILURE = "SUCCESS", "RETRY", "FAILURE"


def for_run(job: Any, request: Request) -> RunEvents | None:
    """The events of this run, or None when nothing would observe them."""
    if job.hooked:
        return RunEvents(job, request, True)
    if signals.any_task_receivers():
        return RunEvents(job, request, False)
    return None


def shown_error(error: BaseException) -> BaseException:
    """The exception a hook is told about: a ``self.retry(exc=...)``'s ``exc``, else the error itself."""
    if isinstance(error, Retry) and error.exc is not None:
        return error.exc
    return error


class RunEvents:
    __slots__ = ("hooked", "job", "request", "started")

    def __init__(self, job: Task, request: Request, hooked: bool) -> None:
        self.job = job
        self.request = request
        self.hooked = hooked
        self.started = False

    def before(self) -> None:
        """Just before the body: task_prerun, then before_start."""
        self.started = True
        request = self.request
        if signals.task_prerun.receivers:
            self._signal(signals.task_prerun, self.job, task_id=request.id, task=self.job, args=request.args,
                         kwargs=request.kwargs)
        if self.hooked:
            self._hook("before_start", request.id, request.args, request.kwargs)

    def succeeded(self, result: Any) -> None:
        request = self.request
        if self.hooked:
            self._hook("on_success", result, request.id, request.args, request.kwargs)
        if signals.task_success.receivers:
            self._signal(signals.task_success, self.job, result=result)
        self._finish(SUCCESS, result, None)

    def ended_badly(self, error: BaseException, will_retry: bool) -> None:
        """The body raised: ``will_retry`` when the job went to the retry set."""
        request = self.request
        shown = shown_error(error)
        if will_retry:
            einfo = ExceptionInfo(error)
            if self.hooked:
                self._hook("on_retry", shown, request.id, request.args, request.kwargs, einfo)
            if signals.task_retry.receivers:
                self._signal(signals.task_retry, self.job, request=request, reason=error, einfo=einfo)
            self._finish(RETRY, error, einfo)
            return
        einfo = ExceptionInfo(shown)
        if self.hooked:
            self._hook("on_failure", shown, request.id, request.args, request.kwargs, einfo)
        if signals.task_failure.receivers:
            self._signal(signals.task_failure, self.job, task_id=request.id, exception=shown, args=request.args,
                         kwargs=request.kwargs, traceback=shown.__traceback__, einfo=einfo)
        self._finish(FAILURE, shown, einfo)

    def _finish(self, state: str, retval: Any, einfo: ExceptionInfo | None) -> None:
        request = self.request
        if self.hooked and state != RETRY:
            self._hook("after_return", state, retval, request.id, request.args, request.kwargs, einfo)
        if signals.task_postrun.receivers:
            self._signal(signals.task_postrun, self.job, task_id=request.id, task=self.job, args=request.args,
                         kwargs=request.kwargs, retval=retval, state=state)

    def _signal(self, signal: Any, sender: Any, **arguments: Any) -> None:
        # Sent with the run's request pushed, as Celery does: a receiver may read sender.request.
        self.job.push_request(self.request)
        try:
            signals.send(signal, sender, **arguments)
        finally:
            self.job.pop_request()

    def _hook(self, name: str, *arguments: Any) -> None:
        # The run's request is self.request inside a hook too, as in the body.
        self.job.push_request(self.request)
        try:
            getattr(self.job, name)(*arguments)
        except Exception:
            logger.exception("djwork: %s.%s raised; ignored (the job's outcome stands)", self.job.name, name)
        finally:
            self.job.pop_request()


class CeleryEvents(RunHook):
    """A djwork job's run as Celery's hooks and signals see it, on the worker: ``before`` just before its
    body (inside the middleware and limits), the ending ones before its settlement is written."""

    def joins(self, target: Any, config: Any) -> bool:
        return isinstance(target, Task)

    def before(self, run: JobRun) -> None:
        events = for_run(run.target, run.request)  # None unless hooks or receivers exist
        if events is not None:
            run.note(self, events)
            run.off_loop = True  # the ending hooks are user code: off the event loop
            events.before()

    def after(self, run: JobRun, error: BaseException | None) -> None:
        events = run.noted(self)
        # Not for a job abandoned at its hard time limit: its body may still run on its thread.
        if events is None or not events.started or run.unit.timed_out:
            return
        if error is None:
            if run.status == OK:
                events.succeeded(run.result)
            return
        events.ended_badly(error, will_retry=run.status in (RETRIED, RESCHEDULED))


class TaskReceived(RunHook):
    """Celery's ``task_received``: sent as the worker takes a djwork job, before the admission checks that
    may drop it (expiry, its batch's end), as Celery's worker sends it on taking the message."""

    def __init__(self, identity: str) -> None:
        self.identity = identity

    def joins(self, target: Any, config: Any) -> bool:
        return isinstance(target, Task)

    def admit(self, run: JobRun) -> str | None:
        if signals.task_received.receivers:
            request = build_request(run.payload, run.unit.queue, run.jid, self.identity)
            signals.send(signals.task_received, run.target, request=request)
        return None
