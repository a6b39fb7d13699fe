"""The soft time limit of a coroutine job: SoftTimeLimitExceeded raised at the await it is suspended in.

A thread's asynchronous exception (time_limits.py) can't be used here: it
would surface in the event loop's own code, out of ``run_until_complete``
with the job's task still pending on the thread's loop, to resume inside the
next job run there. Instead the loop's own timer cancels the task at the
limit, and the wrapper below turns that cancellation, at the job's current
``await``, into ``SoftTimeLimitExceeded``, which the job may catch as a
thread job would. The hard limit is the watchdog's, for both kinds.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Coroutine, Generator
from typing import Any

from djwork.exceptions import SoftTimeLimitExceeded


def is_coroutine_job(target: Any) -> bool:
    """A djwork job or Django task whose function is ``async def``."""
    flag = getattr(target, "is_async", None)
    return flag if isinstance(flag, bool) else inspect.iscoroutinefunction(getattr(target, "func", None))


class _SoftLimited:
    """Drives ``coroutine`` as ``await`` would, turning the limit's cancellation into SoftTimeLimitExceeded."""

    def __init__(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        self.coroutine = coroutine
        self.fired = False
        self.converted = False

    def __await__(self) -> Generator[Any, Any, Any]:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                yielded = self.coroutine.send(value) if error is None else self.coroutine.throw(error)
            except StopIteration as stop:
                return stop.value
            value, error = None, None
            try:
                value = yield yielded
            except asyncio.CancelledError as cancelled:
                if self.fired and not self.converted:
                    # Ours, once: undone on the task so asyncio.timeout() and TaskGroup count right.
                    self.converted = True
                    task = asyncio.current_task()
                    if task is not None:
                        task.uncancel()
                    error = SoftTimeLimitExceeded()
                else:
                    error = cancelled
            except BaseException as other:
                error = other


async def with_soft_limit(coroutine: Coroutine[Any, Any, Any], seconds: float) -> Any:
    """Await ``coroutine``; at ``seconds`` raise SoftTimeLimitExceeded where it waits."""
    limited = _SoftLimited(coroutine)
    task = asyncio.current_task()

    def fire() -> None:
        limited.fired = True
        if task is not None:
            task.cancel()

    timer = asyncio.get_running_loop().call_later(seconds, fire)
    try:
        return await limited
    finally:
        timer.cancel()
