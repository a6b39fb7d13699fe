"""The Django Tasks form of an iterable job: a ``@task`` body iterates with ``djwork.resumable``.

    @task(takes_context=True)
    def export_orders(context, since):
        paid = Order.objects.filter(paid=True, created__gte=since)
        for order in djwork.resumable(context, lambda cursor: djwork.iterate.queryset(paid, cursor)):
            write_row(order)

The walk is the ``IterableJob``'s (walk.py's ``Segment``): the cursor kept in
``djwork:iteration:<result id>``, checkpoints, a stop between two items when
the worker quiets or stops (``Interrupted`` leaves the task's loop and its
run; the run hook sends it back to its queue), and the next run resumes
after the cursor. Only a djwork worker's run saves and resumes; under another
backend, or called directly, the loop walks every item in one go.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from djwork.iterable.state import Progress
from djwork.iterable.walk import Segment, check_intervals, worker_run


class Resumable:
    """The items of one run's segment; iterate it once, in the task that made it."""

    def __init__(self, context: Any, build_iterator: Callable[[Any], Iterable[tuple[Any, Any]]], *,
                 checkpoint_items: int | None = None, checkpoint_seconds: float | None = None,
                 cancel_check_seconds: float = 1.0) -> None:
        check_intervals("djwork.resumable", checkpoint_items, checkpoint_seconds, cancel_check_seconds)
        task_result = getattr(context, "task_result", None)
        jid = str(getattr(task_result, "id", "") or "")
        slot = worker_run.get()
        # Only the worker's run of this very task saves: a context passed along to other code, or a task
        # run by another backend, has nothing that would resume it.
        keep = bool(jid) and slot is not None and slot.jid == jid
        self._segment = Segment(jid, keep, checkpoint_items, checkpoint_seconds, cancel_check_seconds)
        self._build = build_iterator
        self._started = False

    @property
    def progress(self) -> Progress:
        """The iteration's progress: ``cursor``, ``items``, ``checkpoints``, ``segments``, ``resumed``."""
        self._segment.sync()
        return self._segment.progress

    @property
    def cursor(self) -> Any:
        """The saved cursor this run resumes after (None the first time), then the last item's done."""
        return self._segment.progress.cursor

    @property
    def cancelled(self) -> bool:
        """The loop ended early because the task was cancelled (``djwork.revoke``)."""
        return self._segment.cancelled

    def __iter__(self) -> Iterator[Any]:
        if self._started:
            raise RuntimeError("djwork.resumable: iterate it once (a second loop would walk from the cursor "
                               "again); make a new one")
        self._started = True
        return self._segment.items(self._build(self._segment.progress.cursor))


def resumable(context: Any, build_iterator: Callable[[Any], Iterable[tuple[Any, Any]]], *,
              checkpoint_items: int | None = None, checkpoint_seconds: float | None = None,
              cancel_check_seconds: float = 1.0) -> Resumable:
    """A Django task's resumable loop: ``build_iterator(cursor)`` returns ``(item, cursor)`` pairs starting
    just after ``cursor`` (None the first time), as ``IterableJob.build_iterator`` does; ``context`` is
    the task's (``@task(takes_context=True)``). docs/iterable.md, The Django Tasks form."""
    return Resumable(context, build_iterator, checkpoint_items=checkpoint_items,
                     checkpoint_seconds=checkpoint_seconds, cancel_check_seconds=cancel_check_seconds)
