"""The user's ``SERVER_MIDDLEWARE`` as one hook of a job's run (djwork/middleware.py; docs/api.md).

It wraps the body inside the job's limits (a wait for a limiter's slot must
not sit inside a transaction or a span a middleware opened) and outside
Celery's ``task_prerun``/``before_start``; the first entry is the outermost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from djwork.middleware import build_server_chain
from djwork.worker.run_hooks import JobRun, RunHook


class ServerMiddleware(RunHook):
    """Registered only when SERVER_MIDDLEWARE is set; it keeps a coroutine job on a processor thread, since a
    middleware wraps the call synchronously and would time and hold nothing around an unawaited coroutine."""

    def __init__(self, chain: tuple[Callable[..., Any], ...]) -> None:
        self.chain = chain

    def around(self, run: JobRun, call_next: Callable[[], Any]) -> Any:
        return build_server_chain(self.chain, call_next, run.target, run.payload, run.unit.queue)()
