"""Canvases while jobs run at their push (``ALWAYS_EAGER``, ``djwork.testing.inline()``): run here, without Redis.

Celery's ``task_always_eager`` runs a chain, group or chord in the calling
thread. Applied for real, a canvas writes batches in Redis whose callbacks a
worker pushes; with jobs running at their push there is no worker and, in a
test, often no Redis, so applying one failed with a connection error. Here each
member runs through ``task.apply()`` (djwork/jobs/eager.py: hooks, signals, retries at
once) in Celery's order, each result passed on as Celery passes it: a chain
step gets the previous result first, a chord body the list of its header's.
A failure raises, as every job run at its push does; a signature's
``link_error`` runs first, with the failed job's id (Celery's old-style
errback). Results are kept as a job run at its push keeps them
(djwork/results/eager_records.py), so ``AsyncResult(id)`` reads them too.
"""

from __future__ import annotations

import importlib
from typing import Any

from djwork.canvas import shapes
from djwork.jobs.eager import EagerResult, apply
from djwork.results import eager_records as eager_results

# The module, not djwork.canvas.signature (the package exports a function of that name over it).
canvas = importlib.import_module("djwork.canvas.signature")

NOTHING = object()  # no previous result to pass on (a first step, a group member)


class EagerGroupResult:
    """A group's (or chord header's) results: ``.get()`` is the list of its members' results, in order."""

    def __init__(self, results: list[Any]) -> None:
        self.results = results

    def get(self, timeout: float | None = None, propagate: bool = True, **ignored: Any) -> list[Any]:
        return [result.get(propagate=propagate) for result in self.results]

    join = get

    def ready(self) -> bool:
        return True

    def successful(self) -> bool:
        return all(result.successful() for result in self.results)

    def failed(self) -> bool:
        return any(result.failed() for result in self.results)

    def completed_count(self) -> int:
        return sum(1 for result in self.results if result.successful())

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self) -> Any:
        return iter(self.results)

    def __getitem__(self, index: int) -> Any:
        return self.results[index]


def value_of(result: Any) -> Any:
    return result.get() if isinstance(result, (EagerResult, EagerGroupResult)) else result


def run_signature(sig: canvas.Signature, previous: Any = NOTHING) -> EagerResult:
    from djwork.jobs import resolve

    job = resolve(sig.task)
    if job is None:
        raise canvas.CanvasError(f"{sig.task}: no djwork job of that name is registered in this process")
    args = list(sig.args) if sig.immutable or previous is NOTHING else [previous, *sig.args]
    try:
        result = apply(job, args, dict(sig.kwargs), task_id=sig.options.get("jid"), throw=True)
    except Exception:
        errback = sig.options.get("link_error")
        if errback is not None:
            run_any(canvas.as_signature(errback, f"{sig.task} link_error").clone([sig.options.get("jid")]))
        raise
    eager_results.remember(result.id, result.result)
    link = sig.options.get("link")
    if link is not None:
        run_any(canvas.as_signature(link, f"{sig.task} link"), result.result)
    return result


def run_any(item: Any, previous: Any = NOTHING) -> Any:
    """Run a signature, chain, group or chord (nested ones too), ``previous`` passed to what comes first."""
    if isinstance(item, shapes.chain):
        return run_chain(item.tasks, item.options, previous)
    if isinstance(item, shapes.group):
        return EagerGroupResult([run_any(task, previous) for task in shapes.unrolled(item.tasks)])
    if isinstance(item, shapes.chord):
        return run_chord(item.header, item.body, item.options, previous)
    return run_signature(canvas.as_signature(item, "canvas"), previous)


def run_group(sigs: list[Any]) -> EagerGroupResult:
    return EagerGroupResult([run_any(sig) for sig in shapes.unrolled(sigs)])


def run_chord(header: list[Any], body: Any, options: dict[str, Any], previous: Any = NOTHING) -> Any:
    results = EagerGroupResult([run_any(task, previous) for task in shapes.unrolled(header)])
    return run_any(_with_links(body, options), results.get())


def run_chain(steps: list[Any], options: dict[str, Any], previous: Any = NOTHING) -> Any:
    result: Any = None
    for index, step in enumerate(steps):
        last = index == len(steps) - 1
        result = run_any(_with_links(step, options) if last else step, previous)
        previous = value_of(result)
    return result


def _with_links(item: Any, options: dict[str, Any]) -> Any:
    """``item`` with a chain's or chord's own ``link``/``link_error`` (they belong to its last job)."""
    links = {key: value for key, value in options.items() if key in canvas.LINK_OPTIONS and value is not None}
    if not links or not canvas.is_task(item):
        return item
    return item.clone(**links)


def run_chain_node(node: shapes.chain, options: dict[str, Any]) -> Any:
    return run_chain(node.tasks, {**node.options, **options})


def run_chord_node(node: shapes.chord, options: dict[str, Any]) -> Any:
    return run_chord(node.header, node.body, {**node.options, **options})


canvas.EAGER_APPLY.update(signature=run_signature, group=run_group, chord=run_chord_node, chain=run_chain_node,
                          stream=run_chord_node)
