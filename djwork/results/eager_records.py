"""The outcomes of jobs run at their push (``ALWAYS_EAGER``, ``djwork.testing.inline()``), kept in this process.

Celery's ``task_always_eager`` gives ``delay()`` an ``EagerResult`` whose ``get()`` needs no backend. A djwork
job run at its push has its ``JobRef`` as usual; its result record is kept here, in memory, so ``get()``,
``state`` and ``result`` read it without Redis (they looked in Redis, found nothing, and waited until
``ResultTimeout`` or failed to connect). The newest ``KEPT`` records are kept: a long-lived process left in
eager mode does not grow without bound.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from djwork.results import record as result_record
from djwork.settings.conf import get_config

KEPT = 10_000

_records: OrderedDict[str, dict[str, str]] = OrderedDict()
_lock = threading.Lock()


def remember(jid: str, value: Any) -> None:
    """Keep a job's return value as the record a worker would have stored (JSON, RESULT_MAX_BYTES)."""
    _ttl, state, _date, result, trace = result_record.success_spec(value, get_config()).split("\n", 4)
    record = {"state": state, "result": result, "date_done": repr(time.time())}
    if trace:
        record["traceback"] = trace
    with _lock:
        _records[jid] = record
        _records.move_to_end(jid)
        while len(_records) > KEPT:
            _records.popitem(last=False)


def record(jid: str) -> dict[str, str] | None:
    """The kept record of a job run at its push in this process, or None."""
    return _records.get(jid)


def forget(jid: str) -> None:
    with _lock:
        _records.pop(jid, None)
