"""``sig.apply()``, ``chain.apply()``, ``group.apply()``, ``chord.apply()``: a canvas run now, in this process.

Celery's eager ``apply``: each task runs through ``task.apply()`` (djwork/jobs/eager.py: its request, hooks,
signals and retries), in canvas order, each result passed on as it would be by the workers. Nothing
touches Redis. A task that fails stops the canvas there, and its ``EagerResult`` is the canvas's
(``.get()`` re-raises its exception).
"""

from __future__ import annotations

from typing import Any

from djwork.canvas.nest import steps_of
from djwork.canvas.plan import takes_request
from djwork.canvas.shapes import group, unrolled
from djwork.canvas.signature import APPLY, CanvasError, Signature, is_task
from djwork.jobs.eager import FAILURE, SUCCESS, EagerResult
from djwork.jobs.task_class import Request
from djwork.payload import new_jid

NOTHING = object()  # no previous result: the first step of a canvas


def _task(sig: Signature, first: Any) -> EagerResult:
    from djwork.jobs import resolve

    job = resolve(sig.task)
    if job is None:
        raise CanvasError(f"{sig.task}: applying a signature runs its job in this process, "
                          "and no djwork job of that name is registered here")
    args = list(sig.args) if sig.immutable or first is NOTHING else [first, *sig.args]
    result = job.apply(args, dict(sig.kwargs), task_id=sig.options.get("jid"))
    follow = sig.options.get("link") if result.state == SUCCESS else sig.options.get("link_error")
    if follow is None:
        return result
    if result.state == SUCCESS:
        run(follow, result.result)
    elif not follow.immutable and takes_request(follow.task):
        # Celery calls a (request, exc, traceback) errback in the failed task's process, with its request.
        errback = resolve(follow.task)
        errback(Request(id=result.id, task=sig.task, args=args, kwargs=dict(sig.kwargs), is_eager=True),
                result.result, result.traceback, *follow.args, **follow.kwargs)
    else:
        run(follow, result.id)
    return result


def run(node: Any, first: Any = NOTHING) -> EagerResult:
    """Run ``node`` (its first tasks get ``first`` before their own arguments); the canvas's result."""
    if is_task(node):
        return _task(node, first)
    if isinstance(node, group):
        results = [run(task, first) for task in unrolled(node.tasks)]
        failed = [result for result in results if result.state == FAILURE]
        if failed:
            return failed[0]
        return EagerResult(new_jid(), [result.result for result in results], SUCCESS, name="group")
    result: EagerResult | None = None
    for step in steps_of(node)[0]:
        result = run(step, first)
        if result.state == FAILURE:
            return result
        first = result.result
    if result is None:
        raise CanvasError("an empty chain has nothing to run")
    return result


APPLY["eager"] = run
