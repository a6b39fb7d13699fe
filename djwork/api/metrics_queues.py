"""The leader's queue samples over a period (docs/metrics.md, Queue samples): a bucket's mean is sum / samples."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from djwork.api import access

GLOBALS = ("retry", "dead", "scheduled", "processes", "busy", "concurrency")


@dataclass
class QueuePoint:
    bucket: str
    size: float  # mean queue length over the bucket's samples
    latency: float  # mean age of the oldest job, seconds


@dataclass
class QueueSeries:
    period: str
    granularity: str
    buckets: list[str]  # oldest first
    queues: dict[str, list[QueuePoint]] = field(default_factory=dict)  # oldest first, sampled buckets only
    totals: dict[str, list[tuple[str, float]]] = field(default_factory=dict)  # global -> (bucket, mean)

    def latest(self, queue: str) -> QueuePoint | None:
        points = self.queues.get(queue)
        return points[-1] if points else None


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def read_queue_series(period: str, granularity: str, buckets: list[str], names: list[str]) -> QueueSeries:
    """``buckets`` and ``names`` (the hashes' keys) newest first, as the walk back from now produced them."""

    def read(conn: Any) -> list[Any]:
        pipe = conn.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(name)
        return pipe.execute(raise_on_error=False)

    replies = access.read(read)
    series = QueueSeries(period, granularity, list(reversed(buckets)))
    for bucket, reply in reversed(list(zip(buckets, replies, strict=True))):
        if not isinstance(reply, dict) or not reply:
            continue
        values: dict[str, int] = {}
        for raw_field, raw_value in reply.items():
            try:
                values[_text(raw_field)] = int(raw_value)
            except (TypeError, ValueError):
                continue
        samples = values.get("n", 0)
        if samples:
            for name in GLOBALS:
                series.totals.setdefault(name, []).append((bucket, values.get(name, 0) / samples))
        for key, count in values.items():
            if not (key.startswith("q|") and key.endswith("|n")) or count <= 0:
                continue
            queue = key[2:-2]
            series.queues.setdefault(queue, []).append(QueuePoint(
                bucket, values.get(f"q|{queue}|size", 0) / count, values.get(f"q|{queue}|lat", 0) / count / 1000.0))
    return series
