"""``task_revoked`` for jobs a revoke stopped before they ran (Celery's signal; docs/celery.md, Signals).

Sent where the job is discarded, with a request built from its removed
payload: by ``djwork.revoke()`` in the calling process for each job it took
off a queue, `schedule` or `retry` (lua/revoke.lua returns their payloads),
and by a worker for each revoked job its fetch or taker dropped unrun
(lua/fetch.lua, lua/drop_revoked.lua). Not for a running job, which only gets
the cooperative flag: Celery sends nothing either without ``terminate``. A
job dropped because it expired sends it from the executor (``expired=True``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from djwork import signals
from djwork.jobs.task_class import Request
from djwork.payload import PayloadError, loads

logger = logging.getLogger("djwork.worker")


def request_of(payload: dict[str, Any], hostname: str | None = None) -> Request:
    """The ``request`` a receiver gets: what the job's own ``self.request`` would have been."""
    jid = payload.get("jid") if isinstance(payload.get("jid"), str) else None
    retry_count = payload.get("retry_count")
    args = payload.get("args")
    kwargs = payload.get("kwargs")
    queue = payload.get("queue")
    return Request(id=jid, retries=(retry_count + 1) if isinstance(retry_count, int) else 0,
                   queue=queue if isinstance(queue, str) else "default",
                   args=list(args) if isinstance(args, list) else [],
                   kwargs=dict(kwargs) if isinstance(kwargs, dict) else {}, payload=payload, hostname=hostname,
                   task=payload.get("class") if isinstance(payload.get("class"), str) else None)


# djwork.jobs.resolve, set by djwork.jobs as it loads: djwork.revoke (which sends from here) sits below
# djwork.jobs in the imports (task_class and results use it), so this module must not import jobs.
resolve_job: Callable[[str], Any] | None = None


def sender_of(class_name: Any) -> Any:
    """The job (its name when it is not registered or importable here), as for the other run signals."""
    found = resolve_job(class_name) if resolve_job is not None and isinstance(class_name, str) else None
    return found if found is not None else class_name


def _payloads(raws: Iterable[Any]) -> list[dict[str, Any]]:
    found = []
    for raw in raws:
        try:
            found.append(loads(raw))
        except PayloadError:  # Lua decoded it, Python can't (not UTF-8): dropped all the same, no signal
            logger.info("djwork: dropped a revoked job whose payload Python can't read")
    return found


def removed(raws: Iterable[Any]) -> None:
    """``djwork.revoke()`` took these payloads off where they waited: ``task_revoked`` for each."""
    if not signals.task_revoked.receivers:
        return
    for payload in _payloads(raws):
        signals.revoked(sender_of(payload.get("class")), request_of(payload))


def dropped(raws: Iterable[Any], identity: str) -> None:
    """A worker dropped these fetched payloads unrun because they were revoked: a log line and the signal each."""
    for payload in _payloads(raws):
        logger.info("djwork: dropped revoked job %s instead of running it", payload.get("jid"))
        if signals.task_revoked.receivers:
            signals.revoked(sender_of(payload.get("class")), request_of(payload, identity))
