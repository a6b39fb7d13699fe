"""Periodic: every cron entry, its schedule, next and last runs; one entry's history; Pause, Unpause, Run now.

Entries come from ``djwork.api.Periodic`` (docs/periodic.md): this deploy's
``PERIODIC`` and ``@djwork.periodic`` plus what the leaders recorded, so an
entry no longer configured stays listed with its history. An entry id from a
URL must be a valid id and a known entry, or the answer is a 404 and nothing
is written; an id recorded in Redis that is not a valid one (written by
hand) is listed as text, with no link and no buttons.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.http import urlencode

from djwork import api
from djwork_dashboard.templatetags.djwork_dashboard import status_badge
from djwork_dashboard.views.base import NotFound, action_view, back, confirm, page_view, render_page, safe_next

ACTIONS = {"pause": "Pause", "unpause": "Unpause", "run_now": "Run now", "release_lock": "Release lock"}
# Where a run's job is, by its last status in the history: the set whose search finds it by jid.
OUTCOME_SET = {"dead": "dead", "retry": "retries", "rescheduled": "scheduled"}


@dataclass(frozen=True)
class RunRow:
    """A run or skip, with the page that finds its job (if any) and the badge of its outcome."""

    run: api.PeriodicRun
    url: str  # the set whose search finds the job by jid, when its outcome says it is there; else ""
    badge: str


@dataclass(frozen=True)
class EntryRow:
    """An entry plus what the templates can't compute: its page, its last run, whether it can run here."""

    entry: api.PeriodicEntry
    url: str  # "" when the id is not a valid entry id (no page, no actions)
    last: RunRow | None  # the newest run (a slot or a run now), skips left out
    runnable: bool  # configured in this deploy, so Run now can push its job


def run_row(run: api.PeriodicRun) -> RunRow:
    kind = OUTCOME_SET.get(run.outcome)
    url = f"{reverse('djwork_dashboard:set', args=[kind])}?{urlencode({'q': run.jid})}" if kind and run.jid else ""
    return RunRow(run, url, status_badge(run.outcome))


def row(entry: api.PeriodicEntry, periodic: api.Periodic) -> EntryRow:
    valid = bool(api.PERIODIC_ENTRY_ID.match(entry.id))
    last = next((run_row(run) for run in entry.runs if run.kind != "skipped"), None)
    return EntryRow(entry, reverse("djwork_dashboard:periodic_entry", args=[entry.id]) if valid else "", last,
                    entry.id in periodic.local)


def entry_or_404(periodic: api.Periodic, entry_id: str, runs: int | None = None) -> api.PeriodicEntry:
    missing = NotFound(f"No periodic entry {entry_id}", "It is neither configured in this deploy nor recorded by a "
                                                        "leader.", "djwork_dashboard:periodic", "Periodic")
    if not api.PERIODIC_ENTRY_ID.match(entry_id):  # the id rule of docs/periodic.md; the URL allows any length
        raise missing
    try:
        return periodic.get(entry_id) if runs is None else periodic.get(entry_id, runs=runs)
    except api.StaleEntry:
        raise missing from None


@page_view
def periodic_list(request: HttpRequest) -> HttpResponse:
    periodic = api.Periodic()
    rows = [row(entry, periodic) for entry in periodic.entries(runs=10)]
    return render_page(request, "djwork_dashboard/periodic.html", {
        "rows": rows, "problems": periodic.problems, "paused": sum(r.entry.paused for r in rows),
        "retired": sum(not r.entry.configured for r in rows),
    })


@page_view
def periodic_entry(request: HttpRequest, entry_id: str) -> HttpResponse:
    periodic = api.Periodic()
    entry = entry_or_404(periodic, entry_id)
    return render_page(request, "djwork_dashboard/periodic_entry.html", {
        "row": row(entry, periodic), "entry": entry, "runs": [run_row(run) for run in entry.runs],
        "arguments": json.dumps(entry.args, ensure_ascii=False, default=str),
        "keywords": json.dumps(entry.kwargs, ensure_ascii=False, default=str) if entry.kwargs else "",
    })


def _question(action: str, entry: api.PeriodicEntry) -> str:
    if action == "pause":
        return (f"No slot of {entry.id} is enqueued until it is unpaused. Slots while paused are skipped and "
                f"counted, not queued up: unpausing fires no backlog. Run now still works while it is paused.")
    if action == "unpause":
        return (f"{entry.id} fires again from its next slot. The slots skipped while it was paused do not run.")
    if action == "run_now":
        where = f" to queue {entry.queue}" if entry.queue else ""
        arguments = json.dumps(entry.args, ensure_ascii=False, default=str)
        if entry.kwargs:
            arguments += " " + json.dumps(entry.kwargs, ensure_ascii=False, default=str)
        text = (f"Job {entry.job} is pushed{where} now, with its configured arguments {arguments[:300]} and a new "
                f"jid, outside the schedule: the next scheduled slot fires as usual.")
        if entry.paused:
            text += " The entry stays paused."
        if not entry.overlap:
            text += " It does not overlap runs: its slots are skipped while this run is queued, running or retrying."
        return text
    return (f"Job {entry.running_jid} holds the running lock of {entry.id}. Released, the next slot fires even "
            f"if that job is still queued, running or retrying, so two runs may overlap. Release it only when "
            f"that job is gone (deleted, or lost in a crash). This can't be undone.")


@action_view
def periodic_action(request: HttpRequest, entry_id: str) -> HttpResponse:
    periodic = api.Periodic()
    entry = entry_or_404(periodic, entry_id, runs=1)
    action = request.POST.get("action", "")
    if action not in ACTIONS:
        messages.error(request, f"Unknown action “{action[:40]}”.")
        return back(request, "djwork_dashboard:periodic_entry", entry_id)
    confirmed = bool(request.POST.get("confirmed"))
    refusal = _refusal(action, entry, periodic, request.POST.get("holder", ""), confirmed)
    if refusal:
        messages.warning(request, refusal)
        return back(request, "djwork_dashboard:periodic_entry", entry_id)
    if not confirmed:
        fields = {"action": action, "next": safe_next(request)}
        if action == "release_lock":
            fields["holder"] = entry.running_jid  # released only if this job still holds it (see _refusal)
        return confirm(request, f"{ACTIONS[action]} {entry_id}?", _question(action, entry), fields,
                       danger=action in ("pause", "release_lock"), button=ACTIONS[action])
    if action == "pause":
        periodic.pause(entry_id)
        messages.success(request, f"Paused {entry_id}: its slots are skipped (and counted) until it is unpaused.")
    elif action == "unpause":
        periodic.unpause(entry_id)
        messages.success(request, f"Unpaused {entry_id}: it fires again from its next slot.")
    elif action == "run_now":
        jid = periodic.run_now(entry_id)
        messages.success(request, f"Enqueued {entry_id} now as job {jid}.")
    elif periodic.release_lock(entry_id, request.POST.get("holder") or None):
        messages.success(request, f"Released the running lock of {entry_id} (job {entry.running_jid}).")
    else:
        messages.warning(request, f"The running lock of {entry_id} was no longer held: nothing was released.")
    return back(request, "djwork_dashboard:periodic_entry", entry_id)


def _refusal(action: str, entry: api.PeriodicEntry, periodic: api.Periodic, holder: str, confirmed: bool) -> str:
    """Why this action can't be done now (a message, before any confirmation), or ""."""
    if action == "pause" and entry.paused:
        return f"{entry.id} is already paused."
    if action == "pause" and not entry.configured:
        return f"{entry.id} is no longer configured: it does not fire, so there is nothing to pause."
    if action == "unpause" and not entry.paused:
        return f"{entry.id} is not paused."
    if action == "run_now" and entry.id not in periodic.local:
        return f"{entry.id} is not configured in this deploy: it can't run."
    if action == "release_lock":
        if not entry.running_jid:
            return f"{entry.id} holds no running lock: nothing to release."
        # The page and the confirmation name the job that held the lock; a lock since passed to the next run
        # is that run's, and releasing it would let a third run start beside it.
        if confirmed and not holder:
            return "Say which job's lock to release (the holder's jid): nothing was released."
        if holder and holder != entry.running_jid:
            return (f"The running lock of {entry.id} is now held by job {entry.running_jid}, not {holder[:40]}: "
                    f"nothing was released.")
    return ""
