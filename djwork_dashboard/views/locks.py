"""Locks: every unique job's lock (``unique:<digest>``), who holds it and where that job is now; Release.

Paged by SCAN cursor (``?cursor=``), as Redis lists these keys. Release is
owner-checked: it names the jid the page showed, so a lock that expired and
was taken by a new copy of the job since then is that copy's, and stays.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse

from djwork import api
from djwork_dashboard.views.base import action_view, back, confirm, page_view, render_page, safe_next

PER_PAGE = 50
WHERE_BADGE = {"running": "badge-ok", "queued": "badge-plain", "scheduled": "badge-plain", "retry": "badge-warn",
               "dead": "badge-bad", "gone": "badge-bad", "unknown": "badge-plain"}


@page_view
def locks(request: HttpRequest) -> HttpResponse:
    cursor = request.GET.get("cursor", "0") or "0"
    try:
        page = api.UniqueLocks().page(cursor, PER_PAGE)
    except ValueError:
        messages.warning(request, f"“{cursor[:40]}” is not a page marker; showing the first page.")
        cursor, page = "0", api.UniqueLocks().page("0", PER_PAGE)
    rows = [(lock, WHERE_BADGE.get(lock.where, "badge-plain")) for lock in page.locks]
    return render_page(request, "djwork_dashboard/locks.html", {
        "page": page, "rows": rows, "cursor": cursor, "first": cursor == "0",
    })


def _holder(digest: str, owner: str) -> str:
    """The job holding the lock as a person knows it, by class and arguments (a digest and a jid say little)."""
    lock = api.UniqueLocks().get(digest)
    if lock is None or lock.owner != owner:
        return f"Job {owner} (no longer holding it: the release will do nothing)"
    if lock.job is None:
        return f"Job {owner} ({lock.where}: its class and arguments were not found)"
    return f"{lock.job.display_class} {owner} with arguments ({lock.job.args_text[:200]}), {lock.where},"


@action_view
def lock_action(request: HttpRequest) -> HttpResponse:
    action = request.POST.get("action", "")
    digest = request.POST.get("digest", "")
    owner = request.POST.get("owner", "")
    if action != "release":
        messages.error(request, f"Unknown action “{action[:40]}”.")
        return back(request, "djwork_dashboard:locks")
    try:
        api.unique_locks.check_digest(digest)
    except ValueError as error:
        messages.error(request, str(error))
        return back(request, "djwork_dashboard:locks")
    if not owner:
        messages.error(request, "Say which job's lock to release (the owner's jid).")
        return back(request, "djwork_dashboard:locks")
    if not request.POST.get("confirmed"):
        return confirm(request, "Release this unique lock?",
                       f"{_holder(digest, owner)} holds lock {digest}. Released, a new copy of that job can be queued "
                       f"at once, next to the one holding it now (which keeps running or waiting). This can't be "
                       f"undone.",
                       {"action": action, "digest": digest, "owner": owner, "next": safe_next(request)},
                       button="Release lock")
    if api.UniqueLocks().release(digest, owner=owner):
        messages.success(request, f"Released lock {digest[:16]}… of job {owner}.")
    else:
        messages.warning(request, f"Lock {digest[:16]}… was no longer held by job {owner} (released by its job, "
                                  f"expired, or taken by a new copy since): nothing was released.")
    return back(request, "djwork_dashboard:locks")
