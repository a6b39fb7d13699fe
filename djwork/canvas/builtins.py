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
