"""The jobs behind ``task.map()``, ``task.starmap()`` and ``task.chunks()`` (Celery's ``celery.map``/``starmap``).

One job calls the task in-process on each item, in order, and returns the list of
results, as Celery's built-in tasks do: the items are one job's work, not a job each.
"""

from __future__ import annotations

from typing import Any

from djwork.jobs import job, resolve


def _task(name: str) -> Any:
    found = resolve(name)
    if found is None:
        raise LookupError(f"no djwork job named {name!r} is registered in this process")
    return found


@job(name="djwork.canvas.builtins.xmap")
def xmap(task: str, items: list[Any]) -> list[Any]:
    run = _task(task)
    return [run(item) for item in items]


@job(name="djwork.canvas.builtins.xstarmap")
def xstarmap(task: str, items: list[list[Any]]) -> list[Any]:
    run = _task(task)
    return [run(*item) for item in items]


@job(name="djwork.canvas.builtins.call_errback", retry=0)
def call_errback(task_id: str, errback: dict[str, Any], request_id: str | None = None) -> Any:
    """A Celery errback of the new style, ``errback(request, exc, traceback)``, called here as Celery calls it
    in the failed task's worker: the request names the failed job, ``exc`` and ``traceback`` are read back
    from its result record (a canvas's jobs keep one). Pushed once, by the Lua step that recorded the death.
    With ``request_id`` (a chord's body, whose header failed) the request names that task and ``exc`` is a
    ``ChordError`` naming the failed one (no traceback): Celery's chord_error_from_stack calls a body's errbacks so."""
    from djwork.canvas.signature import ChordError, signature
    from djwork.jobs.task_class import Request
    from djwork.results import AsyncResult, JobError

    sig = signature(errback)
    found = AsyncResult(task_id)
    exc = found.result if isinstance(found.result, BaseException) else JobError(
        "djwork.JobDied", f"job {task_id} died and left no result record (killed or deleted)")
    traceback = found.traceback
    if request_id is not None:
        exc, traceback = ChordError(f"Dependency {task_id} raised {exc!r}"), None
    request = Request(id=request_id or task_id)
    run = _task(sig.task)
    return run(request, exc, traceback, *sig.args, **sig.kwargs)


@job(name="djwork.canvas.builtins.hand_on")
def hand_on(value: Any) -> Any:
    """``value`` as its result (Celery's ``celery.accumulate``): the last job of a replacement or an empty
    group, which takes an id whose record, or a place in a chain, needs a job's result."""
    return value
