"""History: recent runs from the djwork:history stream, filtered by class, status and queue."""

from __future__ import annotations

import re

from django.contrib import messages
from django.http import HttpRequest, HttpResponse

from djwork import api
from djwork.api.history import STATUSES
from djwork_dashboard.views.base import page_view, render_page

# A run id: "<stream entry id>/<index in the entry>", or a bare entry id (older one-run entries).
RUN_ID = re.compile(r"\A[0-9]+-[0-9]+(/[0-9]+)?\Z")
# Where a run with this outcome left its job: the row's jid links to that set, searched for the jid.
RUN_SETS = {"retry": "retries", "dead": "dead", "rescheduled": "scheduled"}
PER_PAGE = 50


@page_view
def history(request: HttpRequest) -> HttpResponse:
    klass = request.GET.get("class", "").strip()[:200]
    status = request.GET.get("status", "")
    queue = request.GET.get("queue", "").strip()[:200]
    before = request.GET.get("before", "") or None
    if status and status not in STATUSES:
        messages.warning(request, f"“{status[:40]}” is not a status; showing every status.")
        status = ""
    if before and not RUN_ID.match(before):
        messages.warning(request, "That page marker is not a history run id; showing the newest runs.")
        before = None
    page = api.History.recent(PER_PAGE, klass=klass, status=status, queue=queue, before=before)
    filters = {"class": klass, "status": status, "queue": queue}
    return render_page(request, "djwork_dashboard/history.html", {
        "page": page, "filters": filters, "statuses": STATUSES, "before": before,
        "length": api.History.length(), "filtered": any(filters.values()), "run_sets": RUN_SETS,
        "revoked": api.Revoked.recent(),
    })
