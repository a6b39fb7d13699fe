"""The execution history stream: one entry per run, success or failure, capped.

STREAM ``djwork:history`` (keys.HISTORY), ``XADD ... MAXLEN ~ HISTORY_MAX_LENGTH``.
Fields (all strings): jid, class, queue, status (ok | retry | dead | failed |
expired), started (epoch seconds), duration_ms, error_class, error_message,
identity. Entries are buffered by the worker and written in one
history_append.lua call every FLUSH_INTERVAL, off the processor threads; like the stat counters a
lost flush is accepted rather than replayed (a replay would duplicate
entries). docs/history.md documents the stream; djwork.api.History reads it.
"""

from __future__ import annotations

import collections
import logging
from typing import Any

import orjson

from djwork import keys, scripts
from djwork import redis as redis_layer
from djwork.worker.component import PeriodicComponent

logger = logging.getLogger("djwork.history")

FLUSH_INTERVAL = 0.25
MAX_BUFFER = 50_000
FIELDS = ("jid", "class", "queue", "status", "started", "duration_ms", "error_class", "error_message", "identity")
FIELD_NAMES_JSON = orjson.dumps(FIELDS)


class HistoryRecorder(PeriodicComponent):
    name = "history"

    def __init__(self, identity: str, max_length: int) -> None:
        super().__init__()
        self.identity = identity
        self.max_length = max_length
        self.dropped = 0  # entries refused by a full buffer since the last flush
        self._buffer: collections.deque[tuple[str, str, str, str, float, float, str, str]] = collections.deque()

    def interval(self) -> float:
        return FLUSH_INTERVAL

    def record(self, jid: str, class_name: str, queue: str, status: str, started: float,
               duration_ms: float, error_class: str = "", error_message: str = "") -> None:
        # Kept raw (a tuple, formatted at flush time): this runs on the
        # processor thread for every job.
        entry = (jid or "", class_name, queue, status, started, duration_ms, error_class,
                 error_message[:1000] if error_message else "")
        # deque.append is atomic: no lock on the per-job path.
        if len(self._buffer) < MAX_BUFFER:
            self._buffer.append(entry)
        else:
            # Full while Redis is away: counted, and the count logged by the next
            # flush, so an outage's gap in the stream is never silent.
            self.dropped += 1

    def tick(self) -> None:
        self.flush()

    def flush(self) -> None:
        dropped, self.dropped = self.dropped, 0
        if dropped:
            logger.warning("djwork: %d history entries dropped: the buffer was full (%d) while Redis was away",
                           dropped, MAX_BUFFER)
        entries = []
        try:
            while True:
                entries.append(self._buffer.popleft())
        except IndexError:
            pass
        if not entries:
            return

        args = [self.max_length, FIELD_NAMES_JSON, orjson.dumps(entries), self.identity]

        def write(conn: Any) -> None:
            scripts.evaluate(conn, "history_append", [keys.HISTORY], args)

        try:
            redis_layer.run(write)
        except Exception as error:
            logger.warning("djwork: %d history entries lost: %s", len(entries), error)

    def stop(self, timeout: float = 5.0) -> None:
        super().stop(timeout)
        self.flush()

