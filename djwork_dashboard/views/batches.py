"""Batches: every batch with its progress, one batch's counts, jids and callbacks; Invalidate.

A bid comes from the URL; only one shaped as djwork makes them (letters,
digits, ``_`` and ``-``) reaches the API, anything else is a 404.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.http import urlencode

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

BID = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")
# The list's kind filter: the batches a canvas makes for its steps (17 rows for a few canvases) hide by default.
KINDS = {"batch": "Batches", "canvas": "Canvas steps", "all": "All"}
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
        if s.success or s.settled or s.complete:
            return "succeeded" if s.success else "settled" if s.settled else "complete"
        # A canvas step whose job the step before has not pushed yet is queued nowhere: not "running".
        return {"waiting": "waiting", "never": "never runs"}.get(s.after_state, "running")

    @property
    def kind(self) -> str:
        return self.status.kind


def callback_rows(s: api.BatchStatus, runs: dict[str, api.Run]) -> list[dict[str, object]]:
    """Each event's callback: its class and jid, when it fired, and what became of it.

    An event claimed after Invalidate pushed nothing; one claimed before it ran as usual, so only the
    former is "not pushed" (the page said so of a callback that had already run)."""
    rows = []
    for event in api.BATCH_EVENTS:
        fired = s.fired_at.get(event)
        jid = s.callback_jids.get(event, "")
        suppressed = fired is not None and s.invalidated_at is not None and fired >= s.invalidated_at
        rows.append({"event": event, "callback": s.callbacks.get(event, ""), "at": _when(fired),
                     "error": s.callback_errors.get(event, ""), "suppressed": suppressed,
                     "jid": jid if jid != "?" else "", "run": runs.get(jid) if fired and not suppressed else None})
    return rows


def bid_or_404(bid: str) -> str:
    if not BID.match(bid):
        raise NotFound(f"No batch {bid}", "That is not a batch id.", "djwork_dashboard:batches", "Batches")
    return bid


@page_view
def batches(request: HttpRequest) -> HttpResponse:
    term = request.GET.get("q", "").strip()[:200]
    kind = request.GET.get("kind", "batch")
    if kind not in KINDS:
        messages.warning(request, f"“{kind[:40]}” is not a kind of batch; showing {KINDS['batch'].lower()}.")
        kind = "batch"
    listing = api.Batches(term, kind=kind)
    page = clamp_page(request, listing.page(page_number(request), PER_PAGE),
                      lambda number: listing.page(number, PER_PAGE))
    query = urlencode({**({"q": term} if term else {}), **({"kind": kind} if kind != "batch" else {})})
    return render_page(request, "djwork_dashboard/batches.html", {
        "page": page, "rows": [BatchRow(status) for status in page.items], "q": term, "kind": kind,
        "kinds": KINDS.items(), "query": query + "&" if query else "",
    })


def failures(s: api.BatchStatus) -> list[tuple[str, api.SortedEntry]]:
    """The failing and dead jobs' entries (class, error) with their set, as Sidekiq Pro's batch page lists them.

    Only when their jids are listed (at most JIDS_SHOWN of each); a jid that left its set meanwhile is left out."""
    found = [("retries", entry) for entry in api.RetrySet().find_jobs(s.failed_jids).values()] if s.failed_jids else []
    found += [("dead", entry) for entry in api.DeadSet().find_jobs(s.dead_jids).values()] if s.dead_jids else []
    return sorted(found, key=lambda pair: pair[1].score, reverse=True)


@page_view
def batch(request: HttpRequest, bid: str) -> HttpResponse:
    status = api.Batch(bid_or_404(bid)).status(jids_up_to=JIDS_SHOWN)
    if status is None:
        raise NotFound(f"No batch {bid}", "It expired (a day after its success, 30 days otherwise) or never "
                                          "existed.", "djwork_dashboard:batches", "Batches")
    parent = reverse("djwork_dashboard:batch", args=[status.parent]) if status.parent and BID.match(
        status.parent) else ""
    after = reverse("djwork_dashboard:batch", args=[status.after]) if status.after and BID.match(
        status.after) else ""
    runs = api.History.latest_runs([jid for event, jid in status.callback_jids.items() if event in status.fired_at])
    return render_page(request, "djwork_dashboard/batch.html", {
        "row": BatchRow(status), "s": status, "jids_shown": JIDS_SHOWN, "parent_url": parent, "after_url": after,
        "callbacks": callback_rows(status, runs), "failures": failures(status),
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
