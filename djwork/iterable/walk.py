"""One segment of an iteration: resume from the saved cursor, run ``each`` per item, checkpoint, stop between items.

The contract (docs/iterable.md): the saved cursor is always the cursor of an
item whose ``each`` returned, so a resumed segment never repeats an item that
was done and checkpointed. A segment stops between two items when the worker
quiets or stops (``Interrupted``: the run hook sends the job back to its
queue), at a soft time limit (the same, the item in flight run again), when
the job was cancelled (``djwork.revoke``: it ends as done), and on an
exception in ``each`` (saved first, so the retry resumes after the last item
done). Only a ``kill -9`` loses the items since the last checkpoint, which
the next segment runs again.
"""

from __future__ import annotations

import contextvars
import math
import time
from collections.abc import Callable
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


# Set by the run hook around a worker's run: whether the process is quieting or stopping.
# Outside a worker (a direct call, ``apply()``) nothing interrupts an iteration.
stop_requested: contextvars.ContextVar[Callable[[], bool]] = contextvars.ContextVar("djwork_iteration_stop",
                                                                                   default=_never)


def walk(job: Any, request: Request) -> None:
    """One segment of ``job`` (an ``IterableJob``; not imported here: it imports this module)."""
    config = get_config()
    every = job.checkpoint_items or config.iterable_checkpoint_items
    seconds = job.checkpoint_seconds if job.checkpoint_seconds is not None else config.iterable_checkpoint_seconds
    ttl = config.iterable_state_ttl
    args, kwargs = request.args, request.kwargs
    jid = request.id or ""
    # Only a worker's run saves and resumes: a direct call, apply() and the testing modes run the whole
    # walk in one go, and nothing would ever resume (or delete) what they saved.
    keep = bool(jid) and bool(request.hostname) and not request.called_directly and not request.is_eager
    progress = state.load(jid) if keep else state.Progress()
    progress.segments += 1
    token = state.current.set(progress)
    try:
        if progress.resumed:
            job.on_resume(*args, **kwargs)
        else:
            job.on_start(*args, **kwargs)

        base_items = progress.items
        # Items done in this segment, a local for the per-item cost: progress.items is brought up to date
        # at each checkpoint and before each hook that follows the first item.
        done_here = 0

        def sync() -> None:
            progress.items = base_items + done_here

        def checkpoint() -> None:
            sync()
            if keep:
                progress.checkpoints += 1
                state.save(jid, progress, ttl)

        # Per item: one clock read and a few local comparisons; the Redis write only every `every` items
        # or `seconds` (docs/iterable.md quotes bench/iterable.py).
        stopping = stop_requested.get() if keep else _never
        now = time.monotonic()
        save_after, save_at = every, now + seconds
        cancel_every = job.cancel_check_seconds
        cancel_at = now + cancel_every if keep else math.inf
        each = job.each
        try:
            for item, cursor in job.build_iterator(progress.cursor, *args, **kwargs):
                try:
                    each(item, *args, **kwargs)
                except BaseException as error:
                    # The retry resumes after the last item done, not from the last checkpoint.
                    if done_here and not isinstance(error, SoftTimeLimitExceeded):
                        checkpoint()
                    raise
                progress.cursor = cursor
                done_here += 1
                now = time.monotonic()
                if done_here >= save_after or now >= save_at:
                    checkpoint()
                    save_after, save_at = done_here + every, now + seconds
                if stopping():
                    checkpoint()
                    job.on_stop(*args, **kwargs)
                    raise Interrupted(f"interrupted after {progress.items} items (segment {progress.segments}); "
                                      "back to its queue to resume")
                if now >= cancel_at:
                    cancel_at = now + cancel_every
                    if revoked(jid):
                        sync()
                        state.delete(jid)
                        job.on_stop(*args, **kwargs)
                        return None
        except SoftTimeLimitExceeded as error:
            # A segment that made progress goes back to its queue with its cursor, as at a stop; one that
            # could not finish a single item inside the limit fails as any job past its limit does, or it
            # would come back forever.
            if not keep or not done_here:
                raise
            checkpoint()
            job.on_stop(*args, **kwargs)
            raise Interrupted(f"soft time limit after {progress.items} items (segment {progress.segments}); "
                              "back to its queue to resume") from error
        sync()
        if keep:
            state.delete(jid)
        job.on_complete(*args, **kwargs)
        return None
    finally:
        state.current.reset(token)
