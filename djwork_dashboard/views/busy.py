"""Busy: every process and its running jobs; Quiet and Stop, per process or for all."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse

from djwork import api
from djwork_dashboard.views.base import action_view, back, confirm, page_view, render_page, safe_next

SIGNALS = {"quiet": "TSTP", "stop": "TERM"}


@page_view
def busy(request: HttpRequest) -> HttpResponse:
    processes = api.ProcessSet().all()
    works = api.WorkSet().all(processes)
    return render_page(request, "djwork_dashboard/busy.html", {
        "processes": processes, "works": works, "leader": api.ProcessSet.leader(),
        "total_busy": sum(process.busy for process in processes),
        "total_concurrency": sum(process.concurrency for process in processes),
        "total_rss": sum(process.rss_kb for process in processes),
    })


@action_view
def busy_action(request: HttpRequest) -> HttpResponse:
    action = request.POST.get("action", "")
    if action not in SIGNALS:
        messages.error(request, f"Unknown action “{action[:40]}”.")
        return back(request, "djwork_dashboard:busy")
    if request.POST.get("all"):
        if action == "stop" and not request.POST.get("confirmed"):
            return confirm(request, "Stop every process?",
                           "Every non-embedded process finishes or requeues its running jobs and exits.",
                           {"action": action, "all": "1", "next": safe_next(request)},
                           button="Stop all")
        done = api.ProcessSet(cleanup=False).signal_all(SIGNALS[action])
        verb = "Quieting" if action == "quiet" else "Stopping"
        messages.success(request, f"{verb} {len(done)} process{'es' if len(done) != 1 else ''}.")
        return back(request, "djwork_dashboard:busy")
    identity = request.POST.get("identity", "")
    if not identity:
        messages.error(request, "No process was chosen.")
        return back(request, "djwork_dashboard:busy")
    api.ProcessSet.signal(identity, SIGNALS[action])
    if action == "quiet":
        messages.success(request, f"Asked {identity} to stop fetching jobs; it shows as quiet within two beats.")
    else:
        messages.success(request, f"Asked {identity} to stop; it finishes or requeues its jobs and exits.")
    return back(request, "djwork_dashboard:busy")
