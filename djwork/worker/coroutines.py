"""Coroutines: the worker's one event loop thread, running many coroutine jobs at once.

A thread per job waiting on I/O costs a thread's stack and a GIL hand-off
per wake-up; one loop runs thousands of awaiting jobs on one thread. The
Manager decides what runs here and how many at once (its places,
``ASYNC_CONCURRENCY``; slots.py); this component only runs them, tracks
them per owner so a Manager can cancel its own at the shutdown deadline,
and keeps a small pool of finisher threads for the settling steps that
block on Redis (coroutine_jobs.py).

The loop thread starts with the first coroutine job, not with the worker:
most workers (and every embedded one serving a site with no ``async def``
job) never run one, and an idle thread is still a thread in the host
process. The finisher threads start on their first use too.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from djwork.worker.component import JOIN_TIMEOUT, safe_thread

logger = logging.getLogger("djwork.worker")

FINISHER_THREADS = 2


class Coroutines:
    """Owns the event loop thread; ``submit`` runs a coroutine there and calls ``done`` on the loop after it."""

    name = "coroutines"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._accepting = False  # between start() and stop(): a submit may start the loop
        # Touched only on the loop thread: no lock.
        self._tasks: dict[object, set[asyncio.Task[Any]]] = {}
        self.finisher = ThreadPoolExecutor(FINISHER_THREADS, thread_name_prefix="djwork-coroutine-finish")

    def start(self) -> None:
        """Allow coroutine jobs; the loop thread itself starts with the first one (``submit``)."""
        with self._lock:
            self._accepting = True

    def _started_loop(self) -> asyncio.AbstractEventLoop | None:
        """The running loop, started now if this is the first coroutine job (once, whichever thread asks)."""
        loop = self._loop
        if loop is not None:
            return loop
        with self._lock:
            if self._loop is None and self._accepting:
                self._loop = asyncio.new_event_loop()
                self._thread = safe_thread(self.name, self._run)
            return self._loop

    def _run(self) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        logger.info("djwork: event loop started for coroutine jobs")
        try:
            loop.run_forever()
            left = [task for tasks in self._tasks.values() for task in tasks]
            if left:
                # Normally none: each Manager cancels its own at its deadline. Cancelled
                # and awaited here, bounded, so their places and work entries are settled.
                for task in left:
                    task.cancel()
                loop.run_until_complete(asyncio.wait(left, timeout=JOIN_TIMEOUT))
        finally:
            loop.close()

    def submit(self, owner: object, coroutine: Coroutine[Any, Any, None], done: Callable[[], None]) -> None:
        """Run ``coroutine`` on the loop; ``done()`` runs on the loop thread once it ended, however it ended."""
        loop = self._started_loop()
        if loop is None or loop.is_closed():
            coroutine.close()
            raise RuntimeError("djwork: the coroutine loop is not running")
        loop.call_soon_threadsafe(self._begin, owner, coroutine, done)

    def _begin(self, owner: object, coroutine: Coroutine[Any, Any, None], done: Callable[[], None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        tasks = self._tasks.setdefault(owner, set())
        tasks.add(task)

        def ended(_task: asyncio.Task[Any]) -> None:
            tasks.discard(task)
            try:
                done()
            except Exception:
                # A place never given back would shrink the loop's share for good: say so.
                logger.exception("djwork: settling a coroutine job's place failed")

        # Also when cancelled before its first step (the body never ran): the place must come back.
        task.add_done_callback(ended)

    def cancel(self, owner: object) -> None:
        """Cancel every coroutine ``owner`` submitted that is still running (the shutdown deadline)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def cancel_all() -> None:
            for task in list(self._tasks.get(owner, ())):
                task.cancel()

        try:
            loop.call_soon_threadsafe(cancel_all)
        except RuntimeError:  # closed meanwhile: nothing runs there any more
            pass

    def stop(self, timeout: float = JOIN_TIMEOUT) -> None:
        with self._lock:
            self._accepting = False  # a submit racing the stop must not start a loop nobody stops
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            self.finisher.shutdown(wait=False)
            return
        try:
            loop.call_soon_threadsafe(loop.stop)
        except RuntimeError:
            pass
        if thread is not threading.current_thread():
            thread.join(timeout + JOIN_TIMEOUT)
            if thread.is_alive():
                logger.warning("djwork: the coroutine loop did not stop within %.1fs", timeout + JOIN_TIMEOUT)
        self.finisher.shutdown(wait=False)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
