"""Batches: every batch with its progress, one batch's counts, jids and callbacks; Invalidate.

A bid comes from the URL; only one shaped as djwork makes them (letters,
digits, ``_`` and ``-``) reaches the API, anything else is a 404.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from djwork import api
from djwork_dashboard.views.base import (
    PER_PAGE,
    action_view,
    back,
    clamp_page,
    confirm,
    page_number,
    page_view,
    render_page,
    safe_next,
)

BID = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")
JIDS_SHOWN = 50  # a batch's pending, failing and dead jids are listed when there are at most this many


def _when(epoch: float | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(epoch, dt.UTC) if epoch is not None else None


@dataclass(frozen=True)
class BatchRow:
    """A status plus what the templates can't compute: its page, its progress bar, its times as datetimes."""

    status: api.BatchStatus

    @property
    def url(self) -> str:
        return reverse("djwork_dashboard:batch", args=[self.status.bid])

    @property
    def percent(self) -> int:
        total = self.status.total + self.status.kids
        return 100 if total == 0 else round((total - self.status.pending) * 100 / total)

    @property
    def level(self) -> str:
        return "full" if self.status.dead else "high" if self.status.failures else ""

    @property
    def created(self) -> dt.datetime | None:
        return _when(self.status.created_at)

    @property
    def state(self) -> str:
        s = self.status
        if s.invalidated:
            return "invalidated"
        return "succeeded" if s.success else "settled" if s.settled else "complete" if s.complete else "running"

    @property
    def events(self) -> list[dict[str, object]]:
        s = self.status
        return [{"event": event, "callback": s.callbacks.get(event, ""), "at": _when(s.fired_at.get(event)),
                 "error": s.callback_errors.get(event, "")} for event in api.BATCH_EVENTS]


def bid_or_404(bid: str) -> str:
    if not BID.match(bid):
        raise Http404("not a batch id")
    return bid


@page_view
def batches(request: HttpRequest) -> HttpResponse:
    term = request.GET.get("q", "").strip()[:200]
    listing = api.Batches(term)
    page = clamp_page(request, listing.page(page_number(request), PER_PAGE),
                      lambda number: listing.page(number, PER_PAGE))
    return render_page(request, "djwork_dashboard/batches.html", {
        "page": page, "rows": [BatchRow(status) for status in page.items], "q": term,
    })


@page_view
def batch(request: HttpRequest, bid: str) -> HttpResponse:
    status = api.Batch(bid_or_404(bid)).status(jids_up_to=JIDS_SHOWN)
    if status is None:
        messages.error(request, f"No batch {bid}: it expired (a day after its success, 30 days otherwise) "
                                f"or never existed.")
        return HttpResponseRedirect(reverse("djwork_dashboard:batches"))
    parent = reverse("djwork_dashboard:batch", args=[status.parent]) if status.parent and BID.match(
        status.parent) else ""
    return render_page(request, "djwork_dashboard/batch.html", {
        "row": BatchRow(status), "s": status, "jids_shown": JIDS_SHOWN, "parent_url": parent,
    })


@action_view
def batch_action(request: HttpRequest, bid: str) -> HttpResponse:
    target = api.Batch(bid_or_404(bid))
    if request.POST.get("action") != "invalidate":
        messages.error(request, f"Unknown action “{request.POST.get('action', '')[:40]}”.")
        return back(request, "djwork_dashboard:batch", bid)
    if not request.POST.get("confirmed"):
        return confirm(request, f"Invalidate batch {bid}?",
                       "Its jobs that have not started are skipped from about a second from now (each is "
                       "acked without running), and none of its callbacks will run. Jobs running now finish. "
                       "This can't be undone.",
                       {"action": "invalidate", "next": safe_next(request)}, button="Invalidate batch")
    if target.status(jids_up_to=0) is None:
        messages.error(request, f"No batch {bid}: it expired meanwhile.")
        return back(request, "djwork_dashboard:batches")
    target.invalidate()
    messages.success(request, f"Invalidated batch {bid}: its remaining jobs will be skipped.")
    return back(request, "djwork_dashboard:batch", bid)
