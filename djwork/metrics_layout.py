"""Sidekiq 8's execution-metrics layout, shared by the worker's recorder and the read API (docs/metrics.md).

The histogram's 26 buckets: a successful run of ``ms`` milliseconds counts
in the first bucket whose bound exceeds it (a run of exactly 20 ms is in
bucket 1, "30ms"); the last bucket takes everything from 335 s up.
"""

from __future__ import annotations

import bisect

# Upper bounds, exclusive, in milliseconds (Sidekiq::Metrics::Histogram::BUCKET_INTERVALS without its 1e20).
BUCKET_BOUNDS: tuple[int, ...] = (
    20, 30, 45, 65, 100,
    150, 225, 335, 500, 750,
    1100, 1700, 2500, 3800, 5750,
    8500, 13000, 20000, 30000, 45000,
    65000, 100000, 150000, 225000, 335000,
)
BUCKET_LABELS: tuple[str, ...] = (
    "20ms", "30ms", "45ms", "65ms", "100ms",
    "150ms", "225ms", "335ms", "500ms", "750ms",
    "1.1s", "1.7s", "2.5s", "3.8s", "5.75s",
    "8.5s", "13s", "20s", "30s", "45s",
    "65s", "100s", "150s", "225s", "335s",
    "Slow",
)
BUCKETS = len(BUCKET_LABELS)  # 26

# BITFIELD_RO arguments reading all 26 counters, bucket 0 first.
HISTOGRAM_READ: tuple[str, ...] = tuple(part for index in range(BUCKETS) for part in ("GET", "u16", f"#{index}"))


def bucket_index(ms: float) -> int:
    """The bucket of a run of ``ms`` milliseconds: the first whose bound is greater than ``ms``."""
    return bisect.bisect_right(BUCKET_BOUNDS, ms)


def histogram_increments(counts: list[int]) -> list[str]:
    """``OVERFLOW SAT INCRBY u16 #i n ...`` for the non-zero buckets (Histogram#persist)."""
    parts = ["OVERFLOW", "SAT"]
    for index, value in enumerate(counts):
        if value:
            parts += ["INCRBY", "u16", f"#{index}", str(value)]
    return parts
