"""Queues: sizes, latency, paused state; browse, delete one job, pause/resume, clear."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse

from djwork import api
from djwork_dashboard.views.base import (
    PER_PAGE,
    NotFound,
    action_view,
    back,
    clamp_page,
    confirm,
    newest_first,
    page_number,
    page_view,
    render_page,
    safe_next,
)


@page_view
def queues(request: HttpRequest) -> HttpResponse:
    return render_page(request, "djwork_dashboard/queues.html", {"queues": api.Queue.all()})


def known(queue: api.Queue, size: int) -> bool:
    """A queue the cluster knows: in ``queues``, holding jobs (isolated ones too) or listened to by a process.

    An empty queue a process listens to is a real page (nothing waiting), not a typo."""
    if size or queue.name in api.Queue.names() or queue.isolated_size():
        return True
    return any(queue.name in process.queues for process in api.ProcessSet(cleanup=False).all())


@page_view
def queue(request: HttpRequest, name: str) -> HttpResponse:
    queue = api.Queue(name)
    desc = newest_first(request, True)
    page = clamp_page(request, queue.jobs(page_number(request), PER_PAGE, oldest_first=not desc),
                      lambda number: queue.jobs(number, PER_PAGE, oldest_first=not desc))
    if not known(queue, page.total):
        raise NotFound(f"No queue {name}", "No job is in it, it is not in the queues list, and no process "
                                           "listens to it.", "djwork_dashboard:queues", "Queues")
    return render_page(request, "djwork_dashboard/queue.html", {
        "queue": queue, "name": name, "page": page, "latency": queue.latency(), "paused": queue.paused(),
        "order": "desc" if desc else "asc",
        # The Priority column shows while the queue has priority lanes (docs/priority.md), else Sidekiq's page.
        "lanes": any(job.lane for job in page.items) or len(queue.lists()) > 1,
        # An interrupted iterable job's saved progress (docs/iterable.md): one MGET for the page.
        "iterations": api.Iterations.of([job.jid for job in page.items]),
    })


@action_view
def queue_action(request: HttpRequest, name: str) -> HttpResponse:
    queue = api.Queue(name)
    action = request.POST.get("action", "")
    if action == "pause":
        queue.pause()
        messages.success(request, f"Paused {name}: workers stop fetching from it within a few seconds.")
    elif action == "resume":
        queue.resume()
        messages.success(request, f"Resumed {name}.")
    elif action == "delete":
        ident = request.POST.get("job", "")
        if not ident:
            messages.error(request, "No job was chosen.")
        elif not request.POST.get("confirmed"):
            # Sidekiq asks too: one stray click on a row's Delete loses a job for good.
            record = queue.find_job(ident)
            if record is None:
                raise api.StaleEntry(f"job {ident} is no longer in queue {name} (it may have run already)")
            return confirm(request, f"Delete this job from {name}?",
                           f"{record.display_class} {record.jid} with arguments ({record.args_text[:200]}) will be"
                           " deleted. This can't be undone.",
                           {"action": "delete", "job": ident, "next": safe_next(request)},
                           button="Delete job")
        else:
            record = queue.delete_job(ident)
            messages.success(request, f"Deleted {record.display_class} {record.ident} from {name}.")
    elif action == "clear":
        if not request.POST.get("confirmed"):
            size = queue.size()
            return confirm(request, f"Clear queue {name}?",
                           f"All {size:,} job{'s' if size != 1 else ''} in {name} will be deleted. This can't be"
                           " undone.",
                           {"action": "clear"}, button="Clear queue")
        removed = queue.clear()
        messages.success(request, f"Cleared {name}: {removed:,} jobs deleted.")
        return back(request, "djwork_dashboard:queues")
    else:
        messages.error(request, f"Unknown action “{action[:40]}”.")
    return back(request, "djwork_dashboard:queue", name)
