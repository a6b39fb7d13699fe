"""Busy: every process and its running jobs; Quiet and Stop, per process or for all."""

from __future__ import annotations

from collections import Counter

from django.contrib import messages
from django.http import HttpRequest, HttpResponse

from djwork import api
from djwork.api.in_progress import taken_since_beat
from djwork_dashboard.views.base import action_view, back, confirm, page_view, render_page, safe_next

SIGNALS = {"quiet": "TSTP", "stop": "TERM"}
ALL_QUESTIONS = {
    "quiet": ("Quiet every process?", "Every process stops fetching new jobs and finishes the ones it runs. Jobs"
              " then wait in their queues until the processes are restarted: this can't be undone from here."),
    "stop": ("Stop every process?", "Every process finishes or requeues its running jobs and exits (a djwork"
             " worker embedded in a web process stops alone; the web process keeps serving). Nothing takes jobs"
             " until processes are started again."),
}
REFRESH_SECONDS = 5


@page_view
def busy(request: HttpRequest) -> HttpResponse:
    processes = api.ProcessSet().all()
    works = api.WorkSet().all(processes)
    taken = taken_since_beat(processes, works)
    # A process's busy count comes with its beat; a job it took since then is a row already, so the count
    # is at least its rows (it read "0 / 5" beside a running job).
    rows = Counter(work.identity for work in works + taken)
    busy = {process.identity: max(process.busy, rows[process.identity]) for process in processes}
    return render_page(request, "djwork_dashboard/busy.html", {
        "processes": processes, "works": works + taken, "taken": len(taken), "leader": api.ProcessSet.leader(),
        "busy": busy, "total_busy": sum(busy.values()),
        # An iterable job's progress at its last checkpoint (docs/iterable.md): one MGET for the page.
        "iterations": api.Iterations.of([work.job.jid for work in works + taken]),
        "total_concurrency": sum(process.concurrency for process in processes),
        "total_rss": sum(process.rss_kb for process in processes),
        "refresh_seconds": REFRESH_SECONDS,
    })


@action_view
def busy_action(request: HttpRequest) -> HttpResponse:
    action = request.POST.get("action", "")
    if action not in SIGNALS:
        messages.error(request, f"Unknown action “{action[:40]}”.")
        return back(request, "djwork_dashboard:busy")
    if request.POST.get("all"):
        if not request.POST.get("confirmed"):
            # Both are cluster-wide and can't be undone from here (a quiet process takes no more jobs until
            # it is restarted), so both ask first, as Sidekiq's Web UI does.
            return confirm(request, *ALL_QUESTIONS[action], {"action": action, "all": "1", "next": safe_next(request)},
                           button="Quiet all" if action == "quiet" else "Stop all")
        done = api.ProcessSet(cleanup=False).signal_all(SIGNALS[action])
        plural = "es" if len(done) != 1 else ""
        messages.success(request, f"{action.capitalize()} requested for {len(done)} process{plural}: the signal "
                         "is queued and each takes it at its next beat.")
        return back(request, "djwork_dashboard:busy")
    identity = request.POST.get("identity", "")
    if not identity:
        messages.error(request, "No process was chosen.")
        return back(request, "djwork_dashboard:busy")
    api.ProcessSet.signal(identity, SIGNALS[action])
    if action == "quiet":
        messages.success(request, f"Quiet requested for {identity}: the signal is queued; at its next beat the "
                                  "process stops fetching jobs.")
    else:
        messages.success(request, f"Stop requested for {identity}: the signal is queued; at its next beat the "
                                  "process finishes or requeues its jobs and exits.")
    return back(request, "djwork_dashboard:busy")
