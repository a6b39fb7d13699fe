"""One segment of an iteration: resume from the saved cursor, hand out items, checkpoint, stop between items.

The contract (docs/iterable.md): the saved cursor is always the cursor of an
item whose work returned, so a resumed segment never repeats an item that
was done and checkpointed. A segment stops between two items when the worker
quiets or stops (``Interrupted``: the run hook sends the job back to its
queue), at a soft time limit (the same, the item in flight run again), when
the job was cancelled (``djwork.revoke``: it ends as done), and on an
exception in an item's work (saved first, so the retry resumes after the
last item done). Only a ``kill -9`` loses the items since the last
checkpoint, which the next segment runs again.

``Segment`` is the one walk both forms share: ``IterableJob`` (``walk``
below calls ``each`` per item) and the Django Tasks form (task_form.py: the
task's own ``for`` loop does the item's work).
"""

from __future__ import annotations

import contextvars
import math
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from djwork.exceptions import SoftTimeLimitExceeded
from djwork.iterable import state
from djwork.results.revoke_flag import revoked
from djwork.settings.conf import get_config

if TYPE_CHECKING:
    from djwork.jobs.task_class import Request


class Interrupted(Exception):
    """An iterable job stopped between two items because its worker is quieting or stopping."""


def _never() -> bool:
    return False


def _nothing() -> None:
    return None


class RunSlot:
    """What the run hook shares with the segment a worker's run walks (run_hook.py sets it around the run).

    ``stopping`` asks whether the process is quieting or stopping; ``segment`` is filled by the segment
    itself, so the hook can save a failure the walk did not see (the Tasks form) and mark the history's
    run as resumed.
    """

    __slots__ = ("jid", "segment", "stopping")

    def __init__(self, jid: str, stopping: Callable[[], bool]) -> None:
        self.jid = jid
        self.stopping = stopping
        self.segment: Segment | None = None


# Set by the run hook around a worker's run. Outside a worker (a direct call, ``apply()``, another
# Tasks backend) there is none, and nothing interrupts, saves or resumes an iteration.
worker_run: contextvars.ContextVar[RunSlot | None] = contextvars.ContextVar("djwork_iteration_run", default=None)


def check_intervals(where: str, items: Any, seconds: Any, cancel: Any) -> None:
    """TypeError for a checkpoint or cancel interval a run could not use: found at definition, not by every run."""
    if items is not None and (isinstance(items, bool) or not isinstance(items, int) or items < 1):
        raise TypeError(f"{where}: checkpoint_items must be None or an integer >= 1, got {items!r}")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0):
        raise TypeError(f"{where}: checkpoint_seconds must be None or a number > 0, got {seconds!r}")
    if isinstance(cancel, bool) or not isinstance(cancel, (int, float)) or cancel < 0:
        raise TypeError(f"{where}: cancel_check_seconds must be a number >= 0, got {cancel!r}")


class Segment:
    """One run's part of an iteration: the saved progress loaded, the items handed out by ``items``.

    ``keep``: whether this run saves and resumes (a worker's run of ``jid``). A direct call, ``apply()``
    and the testing modes walk every item in one go, and nothing would ever resume (or delete) what
    they saved.
    """

    def __init__(self, jid: str, keep: bool, checkpoint_items: int | None = None,
                 checkpoint_seconds: float | None = None, cancel_check_seconds: float = 1.0,
                 on_stop: Callable[[], None] = _nothing) -> None:
        config = get_config()
        self.jid = jid
        self.keep = keep
        self.every = checkpoint_items or config.iterable_checkpoint_items
        self.seconds = checkpoint_seconds if checkpoint_seconds is not None else config.iterable_checkpoint_seconds
        self.cancel_every = cancel_check_seconds
        self.ttl = config.iterable_state_ttl
        self.on_stop = on_stop
        self.progress = state.load(jid) if keep else state.Progress()
        self.progress.segments += 1
        self.base_items = self.progress.items
        self.done = 0  # items done in this segment
        self.finished = False  # the iterator ran out, or the iteration was cancelled: nothing to resume
        self.cancelled = False
        self.settled = False  # a failure was seen (by the walk or the run hook, whichever came first)
        slot = worker_run.get() if keep else None
        self.stopping = slot.stopping if slot is not None else _never
        if slot is not None and slot.jid == jid:
            slot.segment = self

    def sync(self) -> None:
        self.progress.items = self.base_items + self.done

    def checkpoint(self) -> None:
        self.sync()
        if self.keep:
            self.progress.checkpoints += 1
            state.save(self.jid, self.progress, self.ttl)

    def items(self, pairs: Iterable[tuple[Any, Any]]) -> Iterator[Any]:
        """The items of ``pairs`` (``(item, cursor)``); an item counts as done when the next one is asked for.

        Per item: one clock read and a few local comparisons; the Redis write only every ``every`` items
        or ``seconds`` (docs/iterable.md quotes bench/iterable.py).
        """
        progress, jid, keep, every, seconds = self.progress, self.jid, self.keep, self.every, self.seconds
        stopping, cancel_every = self.stopping, self.cancel_every
        now = time.monotonic()
        save_after, save_at = every, now + seconds
        cancel_at = now + cancel_every if keep else math.inf
        for done, (item, cursor) in enumerate(pairs, start=1):
            yield item
            progress.cursor = cursor
            self.done = done
            now = time.monotonic()
            if done >= save_after or now >= save_at:
                self.checkpoint()
                save_after, save_at = done + every, now + seconds
            if stopping():
                self.checkpoint()
                self.on_stop()
                raise Interrupted(f"interrupted after {progress.items} items (segment {progress.segments}); "
                                  "back to its queue to resume")
            if now >= cancel_at:
                cancel_at = now + cancel_every
                if revoked(jid):
                    self.sync()
                    state.delete(jid)
                    self.finished = self.cancelled = True
                    self.on_stop()
                    return
        self.sync()
        if keep:
            state.delete(jid)
        self.finished = True

    def failed(self, error: BaseException) -> BaseException:
        """What a failed segment raises instead of ``error``; the cursor of the last item done is saved first.

        A soft time limit after some progress becomes ``Interrupted`` (back to the queue, no retry spent);
        one that cut the first item short fails as any job past its limit does, or it would come back
        forever. Anything else is raised as it is, and the retry resumes after the last item done.
        """
        if self.settled or self.finished or isinstance(error, Interrupted):
            return error
        self.settled = True
        if isinstance(error, SoftTimeLimitExceeded):
            if not self.keep or not self.done:
                return error
            self.checkpoint()
            self.on_stop()
            interrupted = Interrupted(f"soft time limit after {self.progress.items} items "
                                      f"(segment {self.progress.segments}); back to its queue to resume")
            interrupted.__cause__ = error
            return interrupted
        if self.done:
            self.checkpoint()
        return error


def walk(job: Any, request: Request) -> None:
    """One segment of ``job`` (an ``IterableJob``; not imported here: it imports this module)."""
    args, kwargs = request.args, request.kwargs
    jid = request.id or ""
    keep = bool(jid) and bool(request.hostname) and not request.called_directly and not request.is_eager
    segment = Segment(jid, keep, job.checkpoint_items, job.checkpoint_seconds, job.cancel_check_seconds,
                      on_stop=lambda: job.on_stop(*args, **kwargs))
    progress = segment.progress
    token = state.current.set(progress)
    try:
        if progress.resumed:
            job.on_resume(*args, **kwargs)
        else:
            job.on_start(*args, **kwargs)
        each = job.each
        try:
            for item in segment.items(job.build_iterator(progress.cursor, *args, **kwargs)):
                each(item, *args, **kwargs)
        except BaseException as error:
            raised = segment.failed(error)
            if raised is error:
                raise
            raise raised from error
        if not segment.cancelled:
            job.on_complete(*args, **kwargs)
        return None
    finally:
        state.current.reset(token)
