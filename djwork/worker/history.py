"""The execution history stream: every run, success or failure, about HISTORY_MAX_LENGTH runs kept.

STREAM ``djwork:history`` (keys.HISTORY). Runs are buffered by the worker and
written every FLUSH_INTERVAL, off the processor threads, in one
history_append.lua call: one stream entry per chunk of at most CHUNK runs,
fields ``identity``, ``count``, ``through`` (the stream's running total of runs)
and ``runs`` (a JSON array of [jid, class, queue, status, started, duration_ms,
error_class, error_message, resumed]). Like the stat counters a lost flush is accepted
rather than replayed (a replay would duplicate runs). docs/history.md
documents the stream; djwork.api.History reads it.
"""

from __future__ import annotations

import collections
import logging
from typing import Any

import orjson

from djwork import redis as redis_layer
from djwork.redis import keys, scripts
from djwork.worker.component import PeriodicComponent
from djwork.worker.run_hooks import JobRun, RunHook

logger = logging.getLogger("djwork.history")

FLUSH_INTERVAL = 0.25
MAX_BUFFER = 50_000
# Runs per stream entry: bounds what a reader pulls for one entry (a page of 50
# runs never drags in a whole 500-run flush) and how far the cap can overshoot.
CHUNK = 200


class HistoryRecorder(PeriodicComponent):
    name = "history"

    def __init__(self, identity: str, max_length: int) -> None:
        super().__init__()
        self.identity = identity
        self.max_length = max_length
        self.dropped = 0  # runs refused by a full buffer since the last flush
        self._buffer: collections.deque[tuple[str, str, str, str, float, float, str, str, int]] = collections.deque()

    def interval(self) -> float:
        return FLUSH_INTERVAL

    def record(self, jid: str, class_name: str, queue: str, status: str, started: float,
               duration_ms: float, error_class: str = "", error_message: str = "", resumed: bool = False) -> None:
        # Kept raw (a tuple, formatted at flush time): this runs on the
        # processor thread for every job. ``resumed`` as 1/0: one byte a run in the stream, not "false".
        entry = (jid or "", class_name, queue, status, started, duration_ms, error_class,
                 error_message[:1000] if error_message else "", 1 if resumed else 0)
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
        runs = []
        try:
            while True:
                runs.append(self._buffer.popleft())
        except IndexError:
            pass
        if not runs:
            return

        try:
            redis_layer.run(lambda conn: append(conn, self.identity, self.max_length, runs))
        except Exception as error:
            logger.warning("djwork: %d history entries lost: %s", len(runs), error)

    def stop(self, timeout: float = 5.0) -> None:
        super().stop(timeout)
        self.flush()


def append(conn: Any, identity: str, max_length: int, runs: list[Any]) -> int:
    """Write ``runs`` (tuples as ``record`` keeps them, oldest first) in one history_append.lua call.

    One entry per CHUNK runs; returns the runs appended. The stream then keeps about ``max_length`` runs.
    """
    args: list[Any] = [max_length, identity]
    for start in range(0, len(runs), CHUNK):
        chunk = runs[start:start + CHUNK]
        args += (len(chunk), orjson.dumps(chunk))
    return scripts.evaluate(conn, "history_append", [keys.HISTORY], args)


class RunHistory(RunHook):
    """Every run's ending, a drop's too, as one buffered history entry."""

    def __init__(self, recorder: HistoryRecorder) -> None:
        self.recorder = recorder

    def after(self, run: JobRun, error: BaseException | None) -> None:
        self.recorder.record(run.jid, run.class_name, run.unit.queue, run.status, run.started, run.elapsed_ms,
                             run.error_class, run.error_message, run.resumed)
