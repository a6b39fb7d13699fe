"""Per-class execution metrics, recorded per job and written on each heartbeat (docs/metrics.md).

Sidekiq 8's layout: every beat adds this process's counts since the last
beat to the current minute's ``j|`` hash and ten-minute rollup, and its
execution-time histograms to the minute's ``h|`` keys; the minute's hash and
histograms also under Sidekiq 7's names, which its Metrics page reads (7.x
is what most Sidekiq clusters run); and, for Prometheus,
to running totals that never expire (``djwork:metrics:totals`` and
``djwork:metrics:histograms``). The write rides in
the heartbeat's stat-counter pipeline and, like it, is never replayed: a
replay after a lost reply would count the window twice, so a lost window is
accepted instead (Sidekiq does the same).

Recording is one ``deque.append`` of a tuple: atomic under the GIL, so the
processor threads take no lock of their own and never wait for the
heartbeat. The heartbeat drains the deque and aggregates (class, counts,
histogram buckets) on its own thread, once per beat.
"""

from __future__ import annotations

import datetime as dt
from bisect import bisect_right
from collections import deque
from typing import Any

from djwork import keys
from djwork.metrics_layout import BUCKET_BOUNDS, BUCKETS, histogram_increments
from djwork.worker.run_hooks import OK, JobRun, RunHook
from djwork.worker.run_hooks import RESCHEDULED as RESCHEDULED_RUN

RESCHEDULED = "rescheduled"  # an event's outcome in place of ``failed``: see record_rescheduled


class Window:
    """One beat's worth of counts: ``j|`` fields and per-class histograms."""

    __slots__ = ("fields", "histograms")

    def __init__(self) -> None:
        self.fields: dict[str, int] = {}
        self.histograms: dict[str, list[int]] = {}

    def __bool__(self) -> bool:
        return bool(self.fields)


class ExecutionMetrics:
    """Shared by every processor thread of a process (through its run hook) and its Heartbeat."""

    def __init__(self) -> None:
        self._events: deque[tuple[Any, float, bool | str]] = deque()

    def record(self, class_name: Any, elapsed_ms: float, failed: bool) -> None:
        """One execution: the per-job cost, so nothing but an append."""
        self._events.append((class_name, elapsed_ms, failed))

    def record_rescheduled(self, class_name: Any) -> None:
        """A job a rate limiter sent back to wait: counted in ``|r`` alone, neither a run nor run time.

        Counted as a success with its wait as run time, 4 jobs refused a few
        times each showed as 10 successful runs, their average the limiter's wait.
        """
        self._events.append((class_name, 0.0, RESCHEDULED))

    def take(self) -> Window:
        """Everything recorded since the last take, aggregated (Sidekiq's ExecutionTracker#track rules).

        A failed run counts in ``|p`` and ``|f`` only: its time is left out of
        ``|ms`` and the histogram, whose averages are about successful runs. A
        rescheduled job counts in ``|r`` only.
        """
        window = Window()
        per_class: dict[str, list[Any]] = {}  # class -> [runs, failures, ms, histogram, rescheduled]
        events = self._events
        pop = events.popleft
        bounds = BUCKET_BOUNDS
        # Bounded by the length at the start: threads appending meanwhile can't keep this loop going.
        for _ in range(len(events)):
            try:
                class_name, elapsed_ms, failed = pop()
            except IndexError:
                break
            if type(class_name) is not str:  # a hand-written payload's "wrapped" may be a list: unhashable
                class_name = str(class_name)
            entry = per_class.get(class_name)
            if entry is None:
                entry = per_class[class_name] = [0, 0, 0, [0] * BUCKETS, 0]
            if failed is RESCHEDULED:
                entry[4] += 1
                continue
            entry[0] += 1
            if failed:
                entry[1] += 1
                continue
            ms = int(elapsed_ms)  # Sidekiq counts whole milliseconds (a difference of monotonic ms)
            entry[2] += ms
            entry[3][bisect_right(bounds, ms)] += 1
        for name, (runs, failures, ms, counts, rescheduled) in per_class.items():
            if rescheduled:
                window.fields[name + "|r"] = window.fields.get(name + "|r", 0) + rescheduled
            if not runs:
                continue
            window.fields[name + "|p"] = window.fields.get(name + "|p", 0) + runs
            if failures:
                window.fields[name + "|f"] = window.fields.get(name + "|f", 0) + failures
            if runs > failures:
                window.fields[name + "|ms"] = window.fields.get(name + "|ms", 0) + ms
                window.histograms[name] = counts
        return window

    def pending(self) -> int:
        return len(self._events)


def queue_writes(pipe: Any, window: Window, now: dt.datetime) -> None:
    """Add a window's writes to ``pipe`` (Sidekiq's ExecutionTracker#flush, minus its separate round trips)."""
    for class_name, counts in window.histograms.items():
        increments = histogram_increments(counts)
        for key in (keys.metrics_histogram(class_name, now), keys.metrics_histogram_v7(class_name, now)):
            pipe.execute_command("BITFIELD", key, *increments)
            pipe.expire(key, keys.METRICS_MINUTE_TTL)
    for key, ttl in ((keys.metrics_ten_minutes(now), keys.METRICS_TEN_MINUTE_TTL),
                     (keys.metrics_minute(now), keys.METRICS_MINUTE_TTL),
                     (keys.metrics_minute_v7(now), keys.METRICS_MINUTE_TTL)):
        for field, value in window.fields.items():
            pipe.hincrby(key, field, value)
        pipe.expire(key, ttl)
    for field, value in window.fields.items():
        pipe.hincrby(keys.METRICS_TOTALS, field, value)
    for class_name, counts in window.histograms.items():
        for index, value in enumerate(counts):
            if value:
                pipe.hincrby(keys.METRICS_HISTOGRAM_TOTALS, f"{class_name}|{index}", value)


class ExecutionMetricsHook(RunHook):
    """Every run of a known class into ``ExecutionMetrics``: a success with its time, a failure, a reschedule."""

    def __init__(self, metrics: ExecutionMetrics) -> None:
        self.metrics = metrics

    def after(self, run: JobRun, error: BaseException | None) -> None:
        if run.target is None:  # an unknown class or an invalid payload ran nothing to measure
            return
        name = run.payload.get("wrapped") or run.class_name
        if run.status == OK:
            self.metrics.record(name, run.elapsed_ms, False)
        elif run.status == RESCHEDULED_RUN:  # neither a run nor a failure: its own count (docs/metrics.md)
            self.metrics.record_rescheduled(name)
        elif error is not None:
            self.metrics.record(name, run.elapsed_ms, True)
