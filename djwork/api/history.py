"""Recent executions from the ``djwork:history`` STREAM (docs/history.md), newest first, filtered.

An entry holds the runs of one worker flush (fields ``identity``, ``count``,
``through``, ``runs``); entries an older djwork wrote hold one run each (field
``jid`` and the others by name) and are still read. A Ruby Sidekiq cluster has
no such stream: the History page is then empty, not broken.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from redis.exceptions import ResponseError

from djwork.api import access
from djwork.api.records import text, to_datetime, to_float, to_int
from djwork.redis import keys

STATUSES = ("ok", "retry", "dead", "failed", "expired", "rescheduled", "invalidated")
SCAN_LIMIT = 5000  # runs examined per page when filtering, so a rare filter can't scan the whole stream
BATCH_RUNS = 500  # about this many runs per XREVRANGE: entries hold 1 (older format) to 200 runs
FIRST_BATCH = 4  # entries in the first read: a page of 50 runs rarely needs more
MAX_BATCH = 500
STRING_FIELDS = (0, 1, 2, 3, 6, 7)  # jid, class, queue, status, error_class, error_message


@dataclass(frozen=True)
class Run:
    id: str  # "<entry id>/<index in the entry>", or the bare entry id for an older one-run entry
    jid: str
    klass: str
    queue: str
    status: str
    started: dt.datetime | None
    duration_ms: float | None
    error_class: str
    error_message: str
    identity: str
    # A segment of an iterable job that started from a saved cursor (docs/history.md, position 8).
    resumed: bool = False

    @classmethod
    def from_fields(cls, entry_id: Any, fields: dict[Any, Any]) -> Run:
        """A one-run entry of the older format (every field by name, numbers as strings)."""
        values = {text(key): text(value) for key, value in fields.items()}
        return cls(id=text(entry_id), jid=values.get("jid", ""), klass=values.get("class", ""),
                   queue=values.get("queue", ""), status=values.get("status", ""),
                   started=to_datetime(to_float(values.get("started"))),
                   duration_ms=to_float(values.get("duration_ms")), error_class=values.get("error_class", ""),
                   error_message=values.get("error_message", ""), identity=values.get("identity", ""))

    @classmethod
    def from_record(cls, run_id: str, record: Any, identity: str) -> Run | None:
        """One element of a batched entry's ``runs``; None when it is not the documented shape."""
        # At least the 8 documented values: a later writer may append more, and must not blank the page.
        if not isinstance(record, list) or len(record) < 8:
            return None
        if not all(isinstance(record[index], str) for index in STRING_FIELDS):
            return None
        return cls(id=run_id, jid=record[0], klass=record[1], queue=record[2], status=record[3],
                   started=to_datetime(to_float(record[4])), duration_ms=to_float(record[5]),
                   error_class=record[6], error_message=record[7], identity=identity,
                   resumed=len(record) > 8 and record[8] in (1, True))

    @property
    def finished(self) -> dt.datetime | None:
        """When it ended: the stream holds runs in the order they finished, so this is the order they are listed."""
        if self.started is None:
            return None
        return self.started + dt.timedelta(milliseconds=self.duration_ms or 0)

    @property
    def failed(self) -> bool:
        return self.status not in ("ok", "")


@dataclass(frozen=True)
class HistoryPage:
    runs: list[Run]
    next_before: str | None  # pass as ``before`` for the next (older) page; None at the end
    truncated: bool = False  # the filter stopped after SCAN_LIMIT runs before filling the page


def expand(entry_id: Any, fields: dict[Any, Any]) -> list[tuple[str, Run | None]]:
    """An entry's runs in the order they finished, each with its id; None for one that cannot be read."""
    entry = text(entry_id)
    values = {text(key): value for key, value in fields.items()}
    if "runs" not in values:
        return [(entry, Run.from_fields(entry, fields))]
    try:
        records = orjson.loads(values["runs"])
    except orjson.JSONDecodeError:
        return []
    if not isinstance(records, list):
        return []
    identity = text(values.get("identity"))
    return [(f"{entry}/{index}", Run.from_record(f"{entry}/{index}", record, identity))
            for index, record in enumerate(records)]


def runs_before(conn: Any, before: str | None = None) -> Iterator[tuple[str, Run | None]]:
    """Every run older than run id ``before`` (all, without it), newest first, with its id.

    Raises ResponseError for a wrong-type key or a malformed ``before``.
    """
    entry, index = "", None
    if before:
        entry, _slash, position = before.partition("/")
        if position:
            if not position.isdecimal():
                raise ResponseError(f"not a history run id: {before!r}")
            index = int(position)
    # "E/i": the runs of E below i come first (E itself is included); a bare "E": entries older than E.
    upper = entry if index is not None else (f"({entry}" if entry else "+")
    batch = FIRST_BATCH
    while True:
        rows = conn.xrevrange(keys.HISTORY, max=upper, min="-", count=batch)
        seen = 0
        for entry_id, fields in rows:
            runs = expand(entry_id, fields)
            seen += len(runs)
            if index is not None and text(entry_id) == entry:
                runs = runs[:index]
            yield from reversed(runs)
        if len(rows) < batch:
            return
        upper = f"({text(rows[-1][0])}"
        # Sized by the runs per entry just seen: one-run entries are read 500 at a time, 200-run ones a few.
        batch = max(1, min(MAX_BATCH, BATCH_RUNS * len(rows) // max(seen, 1)))


class History:
    @staticmethod
    def length() -> int:
        """Runs recorded: the newest entry's running total less what preceded the oldest entry."""
        def read(conn: Any) -> list[Any]:
            return (conn.pipeline(transaction=False).xlen(keys.HISTORY).xrevrange(keys.HISTORY, count=1)
                    .xrange(keys.HISTORY, count=1).execute(raise_on_error=False))

        size, newest, oldest = access.read(read)
        if not isinstance(size, int) or not isinstance(newest, list) or not newest:
            return 0
        newest_through = _number(newest[0][1], "through")
        oldest_through = _number(oldest[0][1], "through") if isinstance(oldest, list) and oldest else None
        if newest_through is not None and oldest_through is not None:
            recorded = newest_through - oldest_through + (_number(oldest[0][1], "count") or 0)
            if recorded > 0:
                return recorded
        # Older one-run entries in the stream (or a running total that restarted): each entry counts
        # one run, plus the newest batched entry's total. An estimate while both formats are there,
        # off by the number of batched entries (each of which holds up to 200 runs).
        return size + max((newest_through or 0) - 1, 0)

    @staticmethod
    def recent(count: int = 50, *, klass: str = "", status: str = "", queue: str = "",
               before: str | None = None, jid: str = "") -> HistoryPage:
        """Up to ``count`` runs older than run id ``before``, matching every filter given.

        ``klass`` matches a substring, case-insensitively; ``status``, ``queue`` and ``jid`` exactly.
        """
        needle = klass.strip().lower()

        def keep(run: Run) -> bool:
            return ((not needle or needle in run.klass.lower()) and (not status or run.status == status)
                    and (not queue or run.queue == queue) and (not jid or run.jid == jid))

        def read(conn: Any) -> HistoryPage:
            found: list[Run] = []
            scanned = 0
            try:
                for run_id, run in runs_before(conn, before):
                    scanned += 1
                    if run is not None and keep(run):
                        found.append(run)
                        if len(found) == count:
                            return HistoryPage(found, run.id)
                    if scanned >= SCAN_LIMIT:
                        return HistoryPage(found, run_id, truncated=True)
            except ResponseError:
                return HistoryPage([], None)  # missing-as-wrong-type or a bad id: nothing to show
            return HistoryPage(found, None)

        return access.read(read)

    @staticmethod
    def latest_runs(jids: list[str]) -> dict[str, Run]:
        """Each jid's newest run among the last SCAN_LIMIT runs (a batch's callbacks): jid -> run.

        A jid that has not run (or not lately) is left out."""
        wanted = set(jids)

        def read(conn: Any) -> dict[str, Run]:
            found: dict[str, Run] = {}
            try:
                for scanned, (_run_id, run) in enumerate(runs_before(conn)):
                    if run is not None and run.jid in wanted:
                        found.setdefault(run.jid, run)
                    if len(found) == len(wanted) or scanned >= SCAN_LIMIT:
                        break
            except ResponseError:
                return {}
            return found

        return access.read(read) if wanted else {}


def _number(fields: dict[Any, Any], name: str) -> int | None:
    for key, value in fields.items():
        if text(key) == name:
            return to_int(value)
    return None
