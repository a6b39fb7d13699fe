"""Recent executions from the ``djwork:history`` STREAM (docs/history.md), newest first, filtered.

A Ruby Sidekiq cluster has no such stream: the History page is then empty,
not broken.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from djwork import keys
from djwork.api import access
from djwork.api.records import text, to_datetime, to_float

STATUSES = ("ok", "retry", "dead", "failed", "expired", "rescheduled", "invalidated")
SCAN_LIMIT = 5000  # entries examined per page when filtering, so a rare filter can't scan the whole stream
BATCH = 500


@dataclass(frozen=True)
class Run:
    id: str
    jid: str
    klass: str
    queue: str
    status: str
    started: dt.datetime | None
    duration_ms: float | None
    error_class: str
    error_message: str
    identity: str

    @classmethod
    def from_fields(cls, entry_id: Any, fields: dict[Any, Any]) -> Run:
        values = {text(key): text(value) for key, value in fields.items()}
        return cls(id=text(entry_id), jid=values.get("jid", ""), klass=values.get("class", ""),
                   queue=values.get("queue", ""), status=values.get("status", ""),
                   started=to_datetime(to_float(values.get("started"))),
                   duration_ms=to_float(values.get("duration_ms")), error_class=values.get("error_class", ""),
                   error_message=values.get("error_message", ""), identity=values.get("identity", ""))

    @property
    def failed(self) -> bool:
        return self.status not in ("ok", "")


@dataclass(frozen=True)
class HistoryPage:
    runs: list[Run]
    next_before: str | None  # pass as ``before`` for the next (older) page; None at the end
    truncated: bool = False  # the filter stopped after SCAN_LIMIT entries before filling the page


class History:
    @staticmethod
    def length() -> int:
        reply = access.read(lambda conn: conn.pipeline(transaction=False).xlen(keys.HISTORY)
                             .execute(raise_on_error=False)[0])
        return reply if isinstance(reply, int) else 0

    @staticmethod
    def recent(count: int = 50, *, klass: str = "", status: str = "", queue: str = "",
               before: str | None = None) -> HistoryPage:
        """Up to ``count`` runs older than entry id ``before``, matching every filter given.

        ``klass`` matches a substring, case-insensitively; ``status`` and ``queue`` exactly.
        """
        needle = klass.strip().lower()

        def keep(run: Run) -> bool:
            return ((not needle or needle in run.klass.lower()) and (not status or run.status == status)
                    and (not queue or run.queue == queue))

        def read(conn: Any) -> HistoryPage:
            found: list[Run] = []
            upper = f"({before}" if before else "+"
            scanned = 0
            while scanned < SCAN_LIMIT:
                try:
                    rows = conn.xrevrange(keys.HISTORY, max=upper, min="-", count=BATCH)
                except ResponseError:
                    return HistoryPage([], None)  # missing-as-wrong-type or a bad id: nothing to show
                for entry_id, fields in rows:
                    scanned += 1
                    run = Run.from_fields(entry_id, fields)
                    if keep(run):
                        found.append(run)
                        if len(found) == count:
                            return HistoryPage(found, run.id)
                if len(rows) < BATCH:
                    return HistoryPage(found, None)
                upper = f"({text(rows[-1][0])}"
            return HistoryPage(found, upper[1:], truncated=True)

        return access.read(read)
