"""Overview: totals, per-day history, the live rate graph's JSON, Redis INFO."""

from __future__ import annotations

import time

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse

from djwork import api
from djwork_dashboard.charts import sparkline
from djwork_dashboard.views.base import page_view, render_page

HISTORY_DAYS = (7, 30, 90)
POLL_SECONDS = 5


@page_view
def overview(request: HttpRequest) -> HttpResponse:
    raw_days = request.GET.get("days", "30")
    days = int(raw_days) if raw_days.isdigit() and int(raw_days) in HISTORY_DAYS else 30
    if raw_days != str(days):
        messages.warning(request, f"History covers 7, 30 or 90 days; showing {days}.")
    stats = api.Stats.fetch()
    history = api.Stats.history(days)
    chart = {
        "poll_url": reverse("djwork_dashboard:stats_json"),
        "poll_seconds": POLL_SECONDS,
        "stats": stats.as_json(),
        "history": [{"date": day.date.isoformat(), "processed": day.processed, "failed": day.failed}
                    for day in reversed(history)],
    }
    samples = api.Metrics().by_queue("1h")  # the leader's latency samples (docs/metrics.md)
    sparks = {queue: sparkline(samples.buckets, {point.bucket: point.latency for point in points})
              for queue, points in samples.queues.items()}
    return render_page(request, "djwork_dashboard/overview.html", {
        "summary": stats, "stats": stats, "history": history, "days": days, "day_choices": HISTORY_DAYS,
        "chart": chart, "redis": api.redis_info(), "redis_risks": api.redis_settings_risks(),
        "queues": api.Queue.all(),
        "quarantined": api.Quarantine.recent(), "sparks": sparks,
        "history_processed": sum(day.processed for day in history),
        "history_failed": sum(day.failed for day in history),
    })


@page_view
def stats_json(request: HttpRequest) -> JsonResponse:
    """What the live graph polls: the counters plus the server's clock, so rates need no client clock."""
    return JsonResponse({**api.Stats.fetch().as_json(), "time": time.time()})
