"""Execution metrics by class, queue samples by queue, deploy marks: the read side of docs/metrics.md.

The class queries follow Sidekiq 8's ``Sidekiq::Metrics::Query`` step by
step (the same keys, the same walk back from ``now`` one stride at a time,
the same totals), so this API and Sidekiq's Metrics page agree on every
number. Unlike Sidekiq's page, nothing here keeps only the top 20 classes.
"""

from __future__ import annotations

import datetime as dt
import subprocess
from dataclasses import dataclass, field
from typing import Any

from djwork.api import access
from djwork.api.metrics_queues import QueueSeries, read_queue_series
from djwork.metrics.layout import BUCKET_BOUNDS, BUCKETS, HISTOGRAM_READ
from djwork.redis import keys

# Period name -> (granularity, buckets): minutes for up to 8 h, 10-minute rollups beyond (Sidekiq's METRICS_PERIODS).
PERIODS: dict[str, tuple[str, int]] = {
    "1h": ("minutely", 60), "2h": ("minutely", 120), "4h": ("minutely", 240), "8h": ("minutely", 480),
    "24h": ("hourly", 24 * 6), "48h": ("hourly", 48 * 6), "72h": ("hourly", 72 * 6),
}
STRIDES = {"minutely": 60, "hourly": 600}


def bucket_time(moment: dt.datetime, granularity: str) -> str:
    """The bucket a moment falls in, as Sidekiq names it: ISO-8601 UTC floored to 1 or 10 minutes."""
    stride = STRIDES[granularity]
    epoch = int(moment.timestamp())
    return dt.datetime.fromtimestamp(epoch - epoch % stride, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def percentile_ms(counts: list[int], fraction: float) -> float | None:
    """Upper bound (ms) of the bucket holding the ``fraction`` quantile; inf for the last bucket; None if empty."""
    total = sum(counts)
    if not total:
        return None
    rank = fraction * total
    running = 0
    for index, count in enumerate(counts):
        running += count
        if count and running >= rank:
            return float(BUCKET_BOUNDS[index]) if index < len(BUCKET_BOUNDS) else float("inf")
    return float("inf")


@dataclass
class ClassMetrics:
    """One class over a period: totals (``p`` runs, ``f`` failures, ``ms`` of successful runs, ``r`` jobs a
    rate limiter sent back to wait, which are not runs) and series."""

    name: str
    totals: dict[str, int] = field(default_factory=lambda: {"p": 0, "f": 0, "ms": 0, "r": 0})
    series: dict[str, dict[str, int]] = field(default_factory=lambda: {"p": {}, "f": {}, "ms": {}, "r": {}})
    histograms: dict[str, list[int]] = field(default_factory=dict)  # bucket time -> 26 counts (minutely only)

    def add(self, metric: str, bucket: str, value: int) -> None:
        self.totals[metric] = self.totals.get(metric, 0) + value
        column = self.series.setdefault(metric, {})
        column[bucket] = column.get(bucket, 0) + value

    @property
    def processed(self) -> int:
        return self.totals.get("p", 0)

    @property
    def failed(self) -> int:
        return self.totals.get("f", 0)

    @property
    def succeeded(self) -> int:
        return self.processed - self.failed

    @property
    def rescheduled(self) -> int:
        """Jobs a rate limiter sent back to wait (``|r``): not in ``processed``, their wait not in ``seconds``."""
        return self.totals.get("r", 0)

    @property
    def seconds(self) -> float:
        return self.totals.get("ms", 0) / 1000.0

    @property
    def average_ms(self) -> float:
        """Mean time of a successful run (Sidekiq's total_avg: ms over p - f)."""
        return self.totals.get("ms", 0) / self.succeeded if self.succeeded else 0.0

    @property
    def histogram(self) -> list[int]:
        """The period's histogram: every minute's counts added up."""
        summed = [0] * BUCKETS
        for counts in self.histograms.values():
            for index, value in enumerate(counts):
                summed[index] += value
        return summed

    def percentiles(self) -> dict[str, float | None]:
        counts = self.histogram
        return {"p50": percentile_ms(counts, 0.50), "p95": percentile_ms(counts, 0.95),
                "p99": percentile_ms(counts, 0.99)}


@dataclass(frozen=True)
class Mark:
    at: dt.datetime
    label: str
    bucket: str


@dataclass
class MetricsResult:
    period: str
    granularity: str
    starts_at: dt.datetime
    ends_at: dt.datetime
    buckets: list[str]  # oldest first
    classes: dict[str, ClassMetrics]
    marks: list[Mark]

    def sorted(self, by: str = "seconds", reverse: bool = True) -> list[ClassMetrics]:
        if by == "name":
            return sorted(self.classes.values(), key=lambda item: item.name, reverse=reverse)
        return sorted(self.classes.values(), key=lambda item: (getattr(item, by), item.name), reverse=reverse)


def _period(period: str) -> tuple[str, int]:
    if period not in PERIODS:
        raise ValueError(f"unknown period {period!r}; one of {', '.join(PERIODS)}")
    return PERIODS[period]


def _walk(now: dt.datetime, granularity: str, count: int) -> list[dt.datetime]:
    """The moments Sidekiq's Query reads, newest first: ``now``, then one stride back each time."""
    stride = dt.timedelta(seconds=STRIDES[granularity])
    return [now - stride * index for index in range(count)]


def _key(moment: dt.datetime, granularity: str, queue_samples: bool = False) -> str:
    if queue_samples:
        minutely = granularity == "minutely"
        return keys.queue_metrics_minute(moment) if minutely else keys.queue_metrics_ten_minutes(moment)
    return keys.metrics_minute(moment) if granularity == "minutely" else keys.metrics_ten_minutes(moment)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


class Metrics:
    """Queries over the last 1 h ... 72 h, as of ``now`` (default: this host's clock, UTC)."""

    def __init__(self, now: dt.datetime | None = None) -> None:
        self.now = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)

    def by_class(self, period: str = "1h", class_filter: str | None = None) -> MetricsResult:
        """Every class's totals and series (Query#top_jobs, without its cut to 20 classes)."""
        granularity, count = _period(period)
        moments = _walk(self.now, granularity, count)

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for moment in moments:
                pipe.hgetall(_key(moment, granularity))
            return pipe.execute(raise_on_error=False)

        replies = access.read(read)
        needle = class_filter.lower() if class_filter else None
        classes: dict[str, ClassMetrics] = {}
        for moment, reply in zip(moments, replies, strict=True):
            if not isinstance(reply, dict):
                continue
            bucket = bucket_time(moment, granularity)
            for raw_field, raw_value in reply.items():
                name, _, metric = _text(raw_field).partition("|")
                if needle is not None and needle not in name.lower():
                    continue
                if name not in classes:
                    classes[name] = ClassMetrics(name)
                classes[name].add(metric.partition("|")[0], bucket, _int(raw_value))
        return self._result(period, granularity, moments, classes)

    def for_class(self, name: str, period: str = "1h") -> MetricsResult:
        """One class, with its per-minute histograms when the period is minutely (Query#for_job)."""
        granularity, count = _period(period)
        moments = _walk(self.now, granularity, count)
        fields = (f"{name}|ms", f"{name}|p", f"{name}|f", f"{name}|r")

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for moment in moments:
                pipe.hmget(_key(moment, granularity), *fields)
            if granularity == "minutely":
                for moment in moments:
                    pipe.execute_command("BITFIELD_RO", keys.metrics_histogram(name, moment), *HISTOGRAM_READ)
            return pipe.execute(raise_on_error=False)

        replies = access.read(read)
        item = ClassMetrics(name)
        for moment, reply in zip(moments, replies[:count], strict=True):
            if not isinstance(reply, list):
                continue
            bucket = bucket_time(moment, granularity)
            for metric, value in zip(("ms", "p", "f", "r"), reply, strict=True):
                if value is not None:
                    item.add(metric, bucket, _int(value))
        for moment, reply in zip(moments, replies[count:], strict=False):
            if isinstance(reply, list) and any(reply):
                item.histograms[bucket_time(moment, granularity)] = [_int(value) for value in reply]
        return self._result(period, granularity, moments, {name: item})

    def by_queue(self, period: str = "1h") -> QueueSeries:
        """The leader's queue samples: per bucket, the mean of each queue's size and latency (docs/metrics.md)."""
        granularity, count = _period(period)
        moments = _walk(self.now, granularity, count)
        return read_queue_series(period, granularity, [bucket_time(moment, granularity) for moment in moments],
                                 [_key(moment, granularity, queue_samples=True) for moment in moments])

    def marks(self, starts_at: dt.datetime, ends_at: dt.datetime, granularity: str = "minutely") -> list[Mark]:
        """Deploy marks between the two moments (Query#fetch_marks): one ``YYYYMMDD-marks`` hash per day."""
        span = (ends_at.date() - starts_at.date()).days
        days = [starts_at.date() + dt.timedelta(days=offset) for offset in range(span + 1)]

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for day in days:
                pipe.hgetall(keys.deploy_marks(day))
            return pipe.execute(raise_on_error=False)

        found: list[Mark] = []
        for reply in access.read(read):
            if not isinstance(reply, dict):
                continue
            for raw_stamp, raw_label in reply.items():
                try:
                    at = dt.datetime.fromisoformat(_text(raw_stamp).replace("Z", "+00:00")).astimezone(dt.UTC)
                except ValueError:
                    continue
                if starts_at <= at <= ends_at:
                    found.append(Mark(at, _text(raw_label), bucket_time(at, granularity)))
        return sorted(found, key=lambda mark: mark.at)

    @staticmethod
    def known_class(name: str) -> bool:
        """Whether ``name`` has ever run here (the running totals, which outlive every period, count it)."""
        reply = access.read(lambda conn: conn.pipeline(transaction=False).hexists(keys.METRICS_TOTALS, f"{name}|p")
                            .execute(raise_on_error=False)[0])
        return reply is True or reply == 1

    @staticmethod
    def running_totals() -> dict[str, ClassMetrics]:
        """Every class's totals since the counters began (``djwork:metrics:totals``), with their histograms."""

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            pipe.hgetall(keys.METRICS_TOTALS)
            pipe.hgetall(keys.METRICS_HISTOGRAM_TOTALS)
            return pipe.execute(raise_on_error=False)

        totals, histograms = access.read(read)
        classes: dict[str, ClassMetrics] = {}
        for raw_field, raw_value in (totals.items() if isinstance(totals, dict) else ()):
            name, _, metric = _text(raw_field).rpartition("|")
            classes.setdefault(name, ClassMetrics(name)).add(metric, "total", _int(raw_value))
        for raw_field, raw_value in (histograms.items() if isinstance(histograms, dict) else ()):
            name, _, index = _text(raw_field).rpartition("|")
            if not index.isdigit() or int(index) >= BUCKETS:
                continue
            counts = classes.setdefault(name, ClassMetrics(name)).histograms.setdefault("total", [0] * BUCKETS)
            counts[int(index)] += _int(raw_value)
        return classes

    def _result(self, period: str, granularity: str, moments: list[dt.datetime],
                classes: dict[str, ClassMetrics]) -> MetricsResult:
        starts_at = moments[-1] - dt.timedelta(seconds=STRIDES[granularity])
        buckets = [bucket_time(moment, granularity) for moment in reversed(moments)]
        return MetricsResult(period, granularity, starts_at, self.now, buckets, classes,
                             self.marks(starts_at, self.now, granularity))


def default_label() -> str:
    """``<short sha> <subject>`` of the checkout's last commit (Sidekiq::Deploy's label), or "deploy"."""
    try:
        done = subprocess.run(["git", "log", "-1", "--format=%h %s"], capture_output=True, text=True, timeout=5,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return "deploy"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "deploy"


def mark_deploy(label: str | None = None, at: dt.datetime | None = None) -> bool:
    """Mark a deploy at the minute of ``at`` (Sidekiq::Deploy#mark!); False if this label was marked this minute.

    Every process of a deploy may call it: the time is floored to the minute
    and a 60-second lock per label keeps it to one mark.
    """
    label = label or default_label()
    whence = (at or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).replace(second=0, microsecond=0)
    stamp = whence.strftime("%Y-%m-%dT%H:%M:%SZ")
    marks_key = keys.deploy_marks(whence.date())

    def write(conn: Any) -> bool:
        lock = keys.deploy_lock(label)
        # A lock holding our own stamp is ours (a replay) or a twin's of the same minute, whose HSETNX is ours too.
        if not conn.set(lock, stamp, nx=True, ex=keys.DEPLOY_LOCK_TTL) and _text(conn.get(lock) or b"") != stamp:
            return False
        pipe = conn.pipeline(transaction=True)
        pipe.hsetnx(marks_key, stamp, label)
        pipe.expire(marks_key, keys.DEPLOY_MARKS_TTL)
        pipe.execute()
        return True

    # Replayed: a replay finds its own stamp in the lock and writes the same field (HSETNX never overwrites).
    return access.write(write, replay=True)

