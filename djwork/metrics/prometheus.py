"""The cluster's metrics in Prometheus's text format, computed from Redis at each scrape (docs/metrics.md).

One scrape of any web process covers every worker: the job counters come
from the running totals all workers add to, the gauges from the keys
themselves (queues, sets, process hashes). A fresh registry per scrape, so
nothing is kept in the web process between scrapes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from djwork import api
from djwork.metrics.layout import BUCKET_BOUNDS

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ClusterCollector:
    """A prometheus_client collector reading djwork.api once per ``collect``."""

    def collect(self) -> Iterator[Any]:
        classes = api.Metrics.running_totals()
        jobs = CounterMetricFamily("djwork_jobs", "Job executions by class and outcome (rescheduled: sent back "
                                   "by a rate limiter, not a run), cluster-wide.", labels=["class", "outcome"])
        durations = HistogramMetricFamily("djwork_job_duration_seconds",
                                          "Execution time of successful runs by class (Sidekiq's 26 buckets).",
                                          labels=["class"])
        for name in sorted(classes):
            item = classes[name]
            jobs.add_metric([name, "success"], item.succeeded)
            jobs.add_metric([name, "failure"], item.failed)
            # A limiter's refusal is not a run: neither a success nor a failure.
            jobs.add_metric([name, "rescheduled"], item.rescheduled)
            counts = item.histogram
            running = 0
            buckets: list[tuple[str, float]] = []
            for index, count in enumerate(counts):
                running += count
                bound = BUCKET_BOUNDS[index] / 1000.0 if index < len(BUCKET_BOUNDS) else math.inf
                buckets.append(("+Inf" if bound == math.inf else repr(bound), running))
            durations.add_metric([name], buckets, item.totals.get("ms", 0) / 1000.0)
        yield jobs
        yield durations

        stats = api.Stats.fetch()
        queues = api.Queue.all()
        size = GaugeMetricFamily("djwork_queue_size", "Jobs waiting in each queue.", labels=["queue"])
        latency = GaugeMetricFamily("djwork_queue_latency_seconds", "Age of each queue's oldest job.",
                                    labels=["queue"])
        for queue in queues:
            size.add_metric([queue.name], queue.size)
            latency.add_metric([queue.name], queue.latency)
        yield size
        yield latency
        processes = api.ProcessSet().all()
        for name, text, value in (
            ("djwork_retry_size", "Jobs in the retry set.", stats.retries),
            ("djwork_dead_size", "Jobs in the dead set.", stats.dead),
            ("djwork_scheduled_size", "Jobs in the scheduled set.", stats.scheduled),
            ("djwork_busy", "Jobs running now, cluster-wide.", sum(process.busy for process in processes)),
            ("djwork_concurrency", "Processor threads, cluster-wide.",
             sum(process.concurrency for process in processes)),
            ("djwork_processes", "Live worker processes.", len(processes)),
        ):
            yield GaugeMetricFamily(name, text, value=value)
        yield from limiter_families(api.Limiters().all())
        yield from periodic_families(api.Periodic().entries(runs=1))


def limiter_families(limiters: list[Any]) -> Iterator[Any]:
    """One series per live rate limiter (docs/limiters.md); a per-tenant limiter is one series per tenant."""
    used = GaugeMetricFamily("djwork_limiter_used", "Slots or units in use.", labels=["limiter", "kind"])
    size = GaugeMetricFamily("djwork_limiter_size", "The limiter's size.", labels=["limiter", "kind"])
    waiting = GaugeMetricFamily("djwork_limiter_waiting", "Callers in the waiting list.", labels=["limiter"])
    admitted = CounterMetricFamily("djwork_limiter_admissions", "Admissions, at once or after a wait.",
                                   labels=["limiter", "how"])
    refused = CounterMetricFamily("djwork_limiter_refusals", "OverLimit answers.", labels=["limiter"])
    for summary in limiters:
        used.add_metric([summary.name, summary.kind], summary.used)
        size.add_metric([summary.name, summary.kind], summary.size)
        waiting.add_metric([summary.name], summary.waiting)
        admitted.add_metric([summary.name, "immediate"], summary.stats.immediate)
        admitted.add_metric([summary.name, "waited"], summary.stats.waited)
        refused.add_metric([summary.name], summary.stats.over)
    yield from (used, size, waiting, admitted, refused)


def periodic_families(entries: list[Any]) -> Iterator[Any]:
    """One series per periodic entry (docs/periodic.md)."""
    runs = CounterMetricFamily("djwork_periodic_runs", "Jobs a periodic entry enqueued (slots and run-now).",
                               labels=["entry"])
    skipped = CounterMetricFamily("djwork_periodic_skipped", "Slots a periodic entry skipped, by reason.",
                                  labels=["entry", "reason"])
    paused = GaugeMetricFamily("djwork_periodic_paused", "1 while the entry is paused.", labels=["entry"])
    overdue = GaugeMetricFamily("djwork_periodic_overdue", "1 when the next slot is past and undecided (no leader).",
                                labels=["entry"])
    for entry in entries:
        counters = entry.counters
        runs.add_metric([entry.id], counters.get("fired", 0) + counters.get("run_now", 0))
        for reason in ("missed", "paused", "overlap", "middleware"):
            skipped.add_metric([entry.id, reason], counters.get(f"skipped_{reason}", 0))
        paused.add_metric([entry.id], 1 if entry.paused else 0)
        overdue.add_metric([entry.id], 1 if entry.overdue else 0)
    yield from (runs, skipped, paused, overdue)


def exposition() -> bytes:
    """The text a scrape gets; raises djwork.api.RedisUnavailable when Redis is away."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector())  # type: ignore[arg-type]
    return generate_latest(registry)
