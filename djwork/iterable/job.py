"""``djwork.IterableJob``: a job that walks an iterator item by item and can stop between any two.

    class ExportOrders(djwork.IterableJob):
        queue = "exports"

        def build_iterator(self, cursor, since):
            return djwork.iterate.queryset(Order.objects.filter(created__gte=since), cursor)

        def each(self, order, since):
            write_row(order)

    ExportOrders.delay("2026-01-01")

One instance per subclass, made when the class is defined and registered
under the class's dotted path; the class's enqueue verbs (``delay``,
``apply_async``, ``set``, ...) are that instance's. The walk itself
(checkpoints, interruption, cancel) is djwork/iterable/walk.py.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any, ClassVar

from djwork.iterable.state import Progress, current
from djwork.iterable.walk import check_intervals, walk
from djwork.jobs import Job
from djwork.jobs.task_class import Request

# The enqueue verbs a subclass answers on the class itself (``MyJob.delay(...)``), as a function job does.
CLASS_VERBS = ("delay", "perform_async", "perform_in", "perform_at", "apply_async", "delay_many",
               "delay_on_commit", "set", "signature", "s", "si", "apply", "build_payload")


class _OnTheInstance:
    """A verb looked up on the class answers with the class's one registered instance."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type) -> Any:
        target = obj if obj is not None else owner.instance()
        return getattr(Job, self.name).__get__(target, type(target))


class IterableJob(Job):
    """Subclass it with ``build_iterator(cursor, *args, **kwargs)`` and ``each(item, *args, **kwargs)``.

    ``build_iterator`` returns an iterator of ``(item, cursor)`` pairs starting just after ``cursor``
    (None the first time); the cursor is JSON, saved at least every ``checkpoint_items`` items or
    ``checkpoint_seconds`` seconds (None: the ITERABLE_CHECKPOINT_* settings). ``job_options`` takes
    any ``@djwork.job`` option (``unique_for``, ``limits``, ``retry``...). docs/iterable.md.
    """

    checkpoint_items: ClassVar[int | None] = None
    checkpoint_seconds: ClassVar[float | None] = None
    # How often a running iteration asks whether it was cancelled (djwork.revoke): 0 asks after every item.
    cancel_check_seconds: ClassVar[float] = 1.0
    job_options: ClassVar[dict[str, Any]] = {}
    _instances: ClassVar[dict[type, IterableJob]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "build_iterator" in cls.__dict__ or "each" in cls.__dict__:
            cls._instances[cls] = cls()

    @classmethod
    def instance(cls) -> IterableJob:
        found = cls._instances.get(cls)
        if found is None:
            raise TypeError(f"{cls.__qualname__} defines no build_iterator/each: it can't be enqueued")
        return found

    def __init__(self) -> None:
        cls = type(self)
        if cls.build_iterator is IterableJob.build_iterator or cls.each is IterableJob.each:
            raise TypeError(f"{cls.__module__}.{cls.__qualname__}: an IterableJob defines both "
                            "build_iterator(cursor, ...) and each(item, ...)")
        where = f"{cls.__module__}.{cls.__qualname__}"
        # Checked when the class is defined: a bad interval found by the first run would fail every run.
        check_intervals(where, cls.checkpoint_items, cls.checkpoint_seconds, cls.cancel_check_seconds)
        parameters = list(inspect.signature(cls.build_iterator).parameters.values())[2:]  # self, cursor

        def iteration(*args: Any, **kwargs: Any) -> None:
            raise TypeError("an IterableJob runs through its worker (djwork.iterable.walk)")

        # Job reads the arguments' shape, the name and the module from the function it wraps.
        iteration.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        iteration.__module__, iteration.__qualname__ = cls.__module__, cls.__qualname__
        iteration.__doc__ = cls.__doc__
        super().__init__(iteration, **dict(cls.job_options))

    def build_iterator(self, cursor: Any, *args: Any, **kwargs: Any) -> Iterator[tuple[Any, Any]]:
        raise NotImplementedError

    def each(self, item: Any, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    # --- hooks: each receives the job's arguments; self.progress is the iteration's state -----------
    def on_start(self, *args: Any, **kwargs: Any) -> None:
        """The first segment starts (no saved cursor)."""

    def on_resume(self, *args: Any, **kwargs: Any) -> None:
        """A later segment starts from the saved cursor (after an interruption, a retry or a kill)."""

    def on_stop(self, *args: Any, **kwargs: Any) -> None:
        """The segment stopped before the end: interrupted (quiet, stop) or cancelled; the cursor is saved."""

    def on_complete(self, *args: Any, **kwargs: Any) -> None:
        """The iterator is exhausted: every item done."""

    @property
    def progress(self) -> Progress:
        """The running iteration's progress (this thread's or task's; a fresh one outside a run)."""
        return current.get() or Progress()

    def run(self, request: Request) -> Any:
        var = self.request_var()
        token = var.set(request)
        try:
            return walk(self, request)
        finally:
            var.reset(token)


for _verb in CLASS_VERBS:
    setattr(IterableJob, _verb, _OnTheInstance(_verb))
