"""``track_started``: a job's result record reads STARTED while it runs (Celery's option; docs/celery.md).

Off by default, as in Celery: the write is a Redis round trip of its own as
the job starts (no step a worker already makes carries it), so only jobs
that ask for it pay it, with ``track_started=True`` on the job or the
TRACK_STARTED setting. A job that stores no result (``ignore_result``, or
pushed without ``djwork_result``) writes nothing. The write goes through
the mode's result write (lua/store_results.lua; on a cluster
lua/store_result.lua), so it follows the results' rules: it lives RESULT_TTL
seconds, a REVOKED record stays REVOKED, and a waiting ``get()`` is woken
(it finds the job not ready and waits again). The job's end (its ack, or
fail.lua) writes its final state over it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from djwork.results import record as result_record
from djwork.worker import fetch, mode
from djwork.worker.run_hooks import JobRun, RunHook

if TYPE_CHECKING:
    from djwork.settings.conf import Config

logger = logging.getLogger("djwork")


def tracked(target: Any, payload: dict[str, Any], config: Config) -> bool:
    """Whether this run writes STARTED: the job's ``track_started``, else TRACK_STARTED; only with results on."""
    flag = getattr(target, "track_started", False)  # a Django task has none: its backend writes RUNNING
    if flag is None:
        flag = config.track_started
    return flag is True and result_record.wants_result(payload)


def started_spec(identity: str, config: Config) -> str:
    # Celery's STARTED meta: the worker's pid and hostname (AsyncResult.info returns it).
    meta = orjson.dumps({"pid": os.getpid(), "hostname": identity}).decode()
    return result_record.spec(result_record.STARTED, meta, config.result_ttl)


def mark_started(jid: str, identity: str, config: Config,
                 store: Callable[[Sequence[tuple[str, str]]], None] = fetch.store_results) -> None:
    """Write STARTED into ``jid``'s result record now; a failed write is logged, and the job runs anyway.

    ``store`` is the mode's result write (djwork/worker/mode.py): one server's by default.
    """
    if not jid:
        return
    try:
        # Replay-safe: it completes before the body runs, so no replay can land after the job's end.
        store([(jid, started_spec(identity, config))])
    except Exception as error:
        logger.warning("djwork: recording STARTED for job %s failed (it runs anyway): %s", jid, error,
                       extra={"jid": jid})


class TrackStarted(RunHook):
    """STARTED written just before the body of a job that asked for it (after a limiter let it in)."""

    blocking = True  # a round trip of its own

    def __init__(self, config: Config, identity: str) -> None:
        self.config = config
        self.identity = identity
        self.store = mode.mode_for(config).store_results  # the mode, chosen once

    def joins(self, target: Any, config: Config) -> bool | tuple[str, ...]:
        flag = getattr(target, "track_started", False)  # a Django task has none: its backend writes RUNNING
        if flag is None:
            flag = config.track_started
        return (result_record.PAYLOAD_FIELD,) if flag is True else False

    def before(self, run: JobRun) -> None:
        if result_record.wants_result(run.payload):
            mark_started(run.jid, self.identity, self.config, self.store)
