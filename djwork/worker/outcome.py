"""The worker's half of a job's result record: its failure as a RETRY or FAILURE spec (djwork/result_record.py).

Kept out of djwork/result_record.py, which the enqueue side imports: the
exception's name and message come from the retry rules' own helpers.
"""

from __future__ import annotations

import traceback
from typing import Any

import orjson

from djwork import result_record as record
from djwork.conf import Config
from djwork.worker.retry import error_class_name, safe_message


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
