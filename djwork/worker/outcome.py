"""The worker's half of a job's result record (djwork/result_record.py): the spec its ending writes.

A success's spec rides on its ack, a failure's (RETRY or FAILURE) on its
filing: each is written by the Lua step that ends the job, never by a write
of its own. Kept out of djwork/result_record.py, which the enqueue side
imports: the exception's name and message come from the retry rules' own helpers.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

import orjson

from djwork import result_record as record
from djwork.conf import Config
from djwork.task_events import shown_error
from djwork.worker.retry import error_class_name, safe_message
from djwork.worker.run_hooks import FAILED_STATUSES, OK, RETRY, JobRun, RunHook


def failure_spec(state: str, error: BaseException, config: Config, wait: float = 0.0) -> str:
    """RETRY or FAILURE with the exception's class, message, JSON-able args and traceback.

    ``wait`` (seconds until a retry) lengthens the TTL: a RETRY record must outlive the wait.
    """
    args: Any = None
    try:
        candidate = orjson.dumps(list(error.args)).decode()
        if len(candidate) <= 10_000:
            args = orjson.loads(candidate)
    except (TypeError, ValueError):
        pass
    trace = "".join(traceback.format_exception(error))[-record.TRACEBACK_LIMIT:]
    trace = trace.encode("utf-8", "replace").decode("utf-8", "replace")
    return record.spec(state, record.error_json(error_class_name(error), safe_message(error), args),
                       config.result_ttl + max(0, int(wait)), trace)


class ResultRecords(RunHook):
    """The run's result spec into its settlement, for a job pushed with results on (``djwork_result``)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def joins(self, target: Any, config: Config) -> tuple[str, ...]:
        return (record.PAYLOAD_FIELD,)

    def after(self, run: JobRun, error: BaseException | None) -> None:
        if not record.wants_result(run.payload):
            return
        if run.status == OK:
            run.unit.result = record.success_spec(run.result, self.config)
        elif run.status in FAILED_STATUSES and error is not None and run.jid and run.decision is not None:
            retrying = run.status == RETRY
            wait = run.decision.score - time.time() if retrying else 0.0
            run.unit.result = failure_spec(record.RETRY if retrying else record.FAILURE, shown_error(error),
                                           self.config, wait)
