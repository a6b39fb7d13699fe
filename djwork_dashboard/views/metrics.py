"""Metrics pages: every class's execution totals with a chart of the top ones, one class's histogram and
percentiles, the queues' size and latency history (docs/metrics.md, docs/dashboard.md).

Read-only: the view permission is enough. Periods are Sidekiq's (1 h to 72 h);
the class page stops at 8 h, as the histograms do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.http import urlencode

from djwork import api
from djwork.api.metrics import PERIODS, percentile_ms
from djwork.conf import get_config
from djwork_dashboard.charts import Chart, bar_chart, line_chart
from djwork_dashboard.views.base import PER_PAGE, NotFound, page_number, page_view, render_page

CHARTED = 5  # classes (or queues) drawn on a chart; the table lists them all
SORTS = {"name": "name", "processed": "processed", "failed": "failed", "seconds": "seconds", "average": "average_ms"}
CLASS_PERIODS = [name for name, (granularity, _count) in PERIODS.items() if granularity == "minutely"]


@dataclass(frozen=True)
class SortLink:
    key: str
    label: str
    url: str
    current: str  # "" | "asc" | "desc"


def _period(request: HttpRequest, allowed: list[str]) -> str:
    period = request.GET.get("period", "1h")
    if period not in allowed:
        messages.warning(request, f"“{period[:20]}” is not one of the periods {', '.join(allowed)}; showing 1h.")
        return "1h"
    return period


def _query(request: HttpRequest, **changes: object) -> str:
    params = {key: value for key, value in request.GET.items() if key in ("period", "q", "sort", "order", "page")}
    params.update({key: str(value) for key, value in changes.items()})
    return "?" + urlencode({key: value for key, value in params.items() if value != ""})


def duration_ms(value: float | None) -> str:
    if value is None:
        return "—"
    if math.isinf(value):
        return "≥ 335 s"
    return f"< {value / 1000:g} s" if value >= 1000 else f"< {value:g} ms"


@page_view
def metrics_classes(request: HttpRequest) -> HttpResponse:
    period = _period(request, list(PERIODS))
    q = request.GET.get("q", "").strip()[:200]
    sort = request.GET.get("sort", "seconds")
    sort = sort if sort in SORTS else "seconds"
    order = request.GET.get("order", "asc" if sort == "name" else "desc")
    result = api.Metrics().by_class(period, class_filter=q or None)
    ranked = result.sorted("seconds")
    rows = result.sorted(SORTS[sort], reverse=order != "asc")
    number = page_number(request)
    pages = max(1, math.ceil(len(rows) / PER_PAGE))
    if number > pages:
        messages.warning(request, f"Page {number} is past the end ({pages} pages); showing the last page.")
        number = pages
    page = api.Page(rows[(number - 1) * PER_PAGE:][:PER_PAGE], len(rows), number, PER_PAGE)
    top = ranked[:CHARTED]
    chart = line_chart(result.buckets,
                       [(item.name, {bucket: ms / 1000 for bucket, ms in item.series["ms"].items()}) for item in top],
                       [(mark.bucket, mark.label) for mark in result.marks], unit=" s", wide=True,
                       last_in_progress=True)
    sorts = []
    for key, label in (("name", "Class"), ("processed", "Runs"), ("failed", "Failed"), ("seconds", "Total time"),
                       ("average", "Average")):
        current = order if key == sort else ""
        flip = "desc" if current == "asc" else "asc" if current == "desc" else ("asc" if key == "name" else "desc")
        sorts.append(SortLink(key, label, _query(request, sort=key, order=flip, page=""), current))
    return render_page(request, "djwork_dashboard/metrics.html", {
        "period": period, "periods": list(PERIODS), "q": q, "page": page, "chart": chart, "result": result,
        "sorts": sorts, "period_links": [(name, _query(request, period=name, page="")) for name in PERIODS],
        "page_links": {"first": _query(request, page=1), "prev": _query(request, page=page.number - 1),
                       "next": _query(request, page=page.number + 1), "last": _query(request, page=page.pages)},
    })


@page_view
def metrics_class(request: HttpRequest, name: str) -> HttpResponse:
    period = _period(request, CLASS_PERIODS)
    result = api.Metrics().for_class(name, period)
    item = result.classes[name]
    if not item.processed and not api.Metrics.known_class(name):
        raise NotFound(f"No job class {name}", "No run of it has been recorded.", "djwork_dashboard:metrics",
                       "Metrics")
    histogram = bar_chart(list(reversed(item.histogram)), list(reversed(api.BUCKET_LABELS)), wide=True)
    over_time = [(label, {bucket: (value if value is not None and not math.isinf(value) else 0.0) / 1000
                          for bucket, counts in item.histograms.items()
                          for value in [percentile_ms(counts, fraction)]})
                 for label, fraction in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))]
    runs = [("runs", {bucket: float(value) for bucket, value in item.series["p"].items()}),
            ("failed", {bucket: float(value) for bucket, value in item.series["f"].items()})]
    marks = [(mark.bucket, mark.label) for mark in result.marks]
    return render_page(request, "djwork_dashboard/metrics_class.html", {
        "name": name, "item": item, "period": period, "result": result,
        "period_links": [(each, f"?period={each}") for each in CLASS_PERIODS],
        "percentiles": [(key, duration_ms(value)) for key, value in item.percentiles().items()],
        "histogram_chart": histogram,
        "percentile_chart": line_chart(result.buckets, over_time, marks, unit=" s", last_in_progress=True),
        "runs_chart": line_chart(result.buckets, runs, marks, last_in_progress=True),
        "history_url": reverse("djwork_dashboard:history") + "?" + urlencode({"class": name}),
    })


@page_view
def metrics_queues(request: HttpRequest) -> HttpResponse:
    period = _period(request, list(PERIODS))
    series = api.Metrics().by_queue(period)
    config = get_config()
    health = api.Health.fetch(config.dashboard_latency_warning, config.heartbeat_interval)
    # A queue with jobs and nobody taking them is the one to see, and lost its place on the chart to busier
    # queues that were being drained: those come first, then the largest.
    unheard = {warning.queue for warning in health.warnings if warning.kind == "no-listener"}
    by_size = sorted(series.queues, key=lambda queue: (queue not in unheard,
                                                       -max(point.size for point in series.queues[queue]), queue))
    charted = by_size[:CHARTED]
    sizes = [(queue, {point.bucket: point.size for point in series.queues[queue]}) for queue in charted]
    latencies = [(queue, {point.bucket: point.latency for point in series.queues[queue]}) for queue in charted]
    workers = [(name, dict(series.totals.get(name, []))) for name in ("busy", "concurrency")]
    sets = [(name, dict(series.totals.get(name, []))) for name in ("retry", "dead", "scheduled")]
    def chart(lines: list[tuple[str, dict[str, float]]], unit: str = "") -> Chart:
        return line_chart(series.buckets, lines, unit=unit, last_in_progress=True)

    rows = [(queue, series.latest(queue), max(point.size for point in series.queues[queue]),
             max(point.latency for point in series.queues[queue])) for queue in by_size]
    return render_page(request, "djwork_dashboard/metrics_queues.html", {
        "period": period, "series": series, "rows": rows, "health": health, "unheard": unheard,
        "period_links": [(name, f"?period={name}") for name in PERIODS],
        "size_chart": chart(sizes), "latency_chart": chart(latencies, unit=" s"),
        "workers_chart": chart(workers), "sets_chart": chart(sets),
    })
