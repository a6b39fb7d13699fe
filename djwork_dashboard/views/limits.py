"""Limits: every rate limiter's usage and stats, one limiter's holders and waiting jobs; Reset and Delete.

A limiter name comes from the URL or from the registry; only a valid name
(docs/limiters.md: letters, digits and _ . : -, at most 200) gets a page or an
action, so a hand-written registry entry such as "a<b" is listed as text
and never reaches a key or a link.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from djwork import api
from djwork_dashboard.views.base import (
    PER_PAGE,
    NotFound,
    action_view,
    back,
    clamp_page,
    confirm,
    page_number,
    page_view,
    render_page,
    safe_next,
)
from djwork_dashboard.views.sets import plural

PERIODS = {1.0: "second", 60.0: "minute", 3600.0: "hour", 86400.0: "day"}
ACTIONS = {"reset": "Reset", "delete": "Delete"}
HIGH_USAGE = 0.75  # the bar turns amber from here, red when nothing is left


@dataclass(frozen=True)
class LimiterRow:
    """A summary plus what the templates can't compute: its page, its limit in words, its usage bar."""

    summary: api.LimiterSummary
    url: str  # "" when the stored name is not a valid limiter name (no page, no actions)
    limit: str
    percent: int
    level: str  # "" | "high" | "full"

    @property
    def name(self) -> str:
        return self.summary.name


def valid_name(name: str) -> str | None:
    try:
        return api.Limiter(name).name
    except ValueError:
        return None


def limiter_or_404(name: str) -> api.Limiter:
    try:
        return api.Limiter(name)
    except ValueError:
        raise NotFound(f"No limiter {name}", "That is not a limiter name (letters, digits and _ . : -, at most 200 "
                                             "characters).", "djwork_dashboard:limits", "Limits") from None


def limit_text(summary: api.LimiterSummary) -> str:
    if summary.kind == "concurrent" and summary.size >= 1:
        return f"{summary.size:,} at once"
    if summary.size < 1 or summary.interval <= 0:
        return "—"  # unreadable metadata (the summary's problems say why)
    period = PERIODS.get(summary.interval) or f"{summary.interval:g}s"
    unit = " points" if summary.kind == "points" else ""
    return f"{summary.size:,}{unit} / {period}"


def row(summary: api.LimiterSummary) -> LimiterRow:
    name = valid_name(summary.name)
    fraction = summary.used_fraction
    level = "full" if summary.size and summary.available <= 0 else "high" if fraction >= HIGH_USAGE else ""
    return LimiterRow(summary, reverse("djwork_dashboard:limiter", args=[name]) if name else "",
                      limit_text(summary), round(fraction * 100), level)


@page_view
def limits(request: HttpRequest) -> HttpResponse:
    term = request.GET.get("q", "").strip()[:200]
    listing = api.Limiters(term)
    page = clamp_page(request, listing.page(page_number(request), PER_PAGE),
                      lambda number: listing.page(number, PER_PAGE))
    return render_page(request, "djwork_dashboard/limits.html", {
        "page": page, "rows": [row(summary) for summary in page.items], "q": term,
    })


@page_view
def limiter(request: HttpRequest, name: str) -> HttpResponse:
    detail = limiter_or_404(name).detail()
    if detail is None:
        raise NotFound(f"No limiter {name}", "It expired, was deleted, or has never been used.",
                       "djwork_dashboard:limits", "Limits")
    return render_page(request, "djwork_dashboard/limiter.html", {
        "name": name, "row": row(detail.summary), "limiter": detail.summary,
        "stats": detail.summary.stats, "holders": detail.holders, "waiters": detail.waiters,
    })


def _freed(slots: int) -> str:
    return f" {plural(slots, 'slot')} freed." if slots else ""


def _question(action: str, detail: api.LimiterDetail) -> str:
    summary = detail.summary
    if action == "delete":
        return (f"Every key of {summary.name} is removed: its usage, stats, holders and waiting list. "
                f"Its next use registers it again with the options in the code. This can't be undone.")
    if summary.kind == "concurrent":
        return (f"{plural(len(detail.holders), 'slot')} held now will be freed, and waiting jobs admitted at once. "
                f"Jobs holding a slot keep running, so more than {summary.size:,} may run at once until they "
                f"finish. Stats are kept.")
    return (f"Its count starts again from zero, so up to {summary.size:,} more may be admitted at once. "
            f"Stats are kept.")


@action_view
def limiter_action(request: HttpRequest, name: str) -> HttpResponse:
    target = limiter_or_404(name)
    action = request.POST.get("action", "")
    if action not in ACTIONS:
        messages.error(request, f"Unknown action “{action[:40]}”.")
        return back(request, "djwork_dashboard:limiter", name)
    if not request.POST.get("confirmed"):
        detail = target.detail()
        if detail is None:
            messages.error(request, f"No limiter {name}: it expired or was deleted meanwhile.")
            return back(request, "djwork_dashboard:limits")
        return confirm(request, f"{ACTIONS[action]} limiter {name}?", _question(action, detail),
                       {"action": action, "next": safe_next(request)}, button=f"{ACTIONS[action]} limiter")
    if action == "reset":
        freed = target.reset()
        messages.success(request, f"Reset {name}: its usage starts again from zero.{_freed(freed)}")
        return back(request, "djwork_dashboard:limiter", name)
    freed = target.delete()
    messages.success(request, f"Deleted limiter {name}.{_freed(freed)}")
    # Its page is gone with it: a next pointing there would only bounce with "No limiter".
    if urlsplit(safe_next(request)).path == reverse("djwork_dashboard:limiter", args=[name]):
        return HttpResponseRedirect(reverse("djwork_dashboard:limits"))
    return back(request, "djwork_dashboard:limits")
