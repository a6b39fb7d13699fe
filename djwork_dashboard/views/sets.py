"""Scheduled, Retries and Dead: paged and searchable lists, job detail, per-job and bulk actions."""

from __future__ import annotations

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
    newest_first,
    page_number,
    page_view,
    render_page,
)


@dataclass(frozen=True)
class SetKind:
    slug: str
    title: str
    job_set: type[api.JobSet]
    when: str  # what the score means on this set
    actions: tuple[tuple[str, str], ...]  # per job or on the selected jobs
    all_actions: tuple[tuple[str, str], ...]  # on every job, after a confirmation

    def new(self) -> api.JobSet:
        return self.job_set()


KINDS = {
    "scheduled": SetKind("scheduled", "Scheduled", api.ScheduledSet, "When",
                         (("enqueue", "Enqueue now"), ("delete", "Delete"), ("kill", "Kill")),
                         (("enqueue_all", "Enqueue all"), ("delete_all", "Delete all"))),
    "retries": SetKind("retries", "Retries", api.RetrySet, "Next retry",
                       (("retry", "Retry now"), ("delete", "Delete"), ("kill", "Kill")),
                       (("retry_all", "Retry all"), ("delete_all", "Delete all"), ("kill_all", "Kill all"))),
    "dead": SetKind("dead", "Dead", api.DeadSet, "Died",
                    (("retry", "Retry now"), ("delete", "Delete")),
                    (("retry_all", "Retry all"), ("delete_all", "Delete all"))),
}
DONE = {"retry": "Retried", "enqueue": "Enqueued", "delete": "Deleted", "kill": "Killed"}


def kind_or_404(slug: str) -> SetKind:
    try:
        return KINDS[slug]
    except KeyError:
        raise Http404(f"no job set {slug!r}")


def plural(count: int, word: str = "job") -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


@page_view
def set_list(request: HttpRequest, kind: str) -> HttpResponse:
    spec = kind_or_404(kind)
    job_set = spec.new()
    desc = newest_first(request, job_set.newest_first_default)
    term = request.GET.get("q", "").strip()[:200]
    context = {"kind": spec, "order": "desc" if desc else "asc", "q": term, "size": job_set.size()}
    if term:
        result = job_set.search_text(term, newest_first=desc)
        context.update(entries=result.entries, search=result, search_limit=api.sorted_sets.SEARCH_LIMIT)
    else:
        page = clamp_page(request, job_set.page(page_number(request), PER_PAGE, newest_first=desc),
                          lambda number: job_set.page(number, PER_PAGE, newest_first=desc))
        context.update(page=page, entries=page.items)
    # An interrupted or failed iterable job's saved progress (docs/iterable.md): one MGET for the page.
    context["iterations"] = api.Iterations.of([entry.job.jid for entry in context["entries"]])
    return render_page(request, "djwork_dashboard/set_list.html", context)


@page_view
def set_entry(request: HttpRequest, kind: str, address: str) -> HttpResponse:
    spec = kind_or_404(kind)
    try:
        entry = spec.new().get(address)
    except ValueError:
        messages.error(request, f"“{address[:80]}” is not a job address (expected <score>-<jid>).")
        return HttpResponseRedirect(reverse("djwork_dashboard:set", args=[kind]))
    if entry is None:
        messages.error(request, f"That job is no longer in {spec.title} (it may have been retried, run or deleted).")
        return HttpResponseRedirect(reverse("djwork_dashboard:set", args=[kind]))
    iteration = api.Iterations.of([entry.job.jid]).get(entry.job.jid)
    return render_page(request, "djwork_dashboard/set_entry.html", {"kind": spec, "entry": entry, "job": entry.job,
                                                                   "iteration": iteration})


@action_view
def set_action(request: HttpRequest, kind: str) -> HttpResponse:
    spec = kind_or_404(kind)
    job_set = spec.new()
    action = request.POST.get("action", "")
    all_actions = dict(spec.all_actions)
    if action in all_actions:
        return _act_on_all(request, spec, job_set, action, all_actions[action])
    if action not in dict(spec.actions):
        messages.error(request, f"Unknown action “{action[:40]}” for {spec.title}.")
        return back(request, "djwork_dashboard:set", kind)
    addresses = request.POST.getlist("key")
    if not addresses:
        messages.error(request, "Select at least one job first.")
        return back(request, "djwork_dashboard:set", kind)
    handler = {"retry": job_set.retry, "enqueue": job_set.add_to_queue, "delete": job_set.delete,
               "kill": job_set.kill}[action]
    done, problems = 0, []
    for address in addresses[:1000]:
        try:
            entry = job_set.get(address)
        except ValueError:
            problems.append(f"“{address[:80]}” is not a job address.")
            continue
        if entry is None:
            problems.append(f"Job {address.partition('-')[2][:40]} was no longer in {spec.title}.")
            continue
        try:
            handler(entry)
            done += 1
        except api.RedisUnavailable:
            raise  # the whole request failed (a 503 page), not this one job
        except api.ApiError as error:
            problems.append(str(error))
    if done:
        messages.success(request, f"{DONE[action]} {plural(done)}.")
    for problem in problems[:10]:
        messages.error(request, problem)
    if len(problems) > 10:
        messages.error(request, f"…and {len(problems) - 10} more problems.")
    # From a detail page the job has usually left the set: go to the list.
    if request.POST.get("from") == "detail":
        return HttpResponseRedirect(reverse("djwork_dashboard:set", args=[kind]))
    return back(request, "djwork_dashboard:set", kind)


def _act_on_all(request: HttpRequest, spec: SetKind, job_set: api.JobSet, action: str, label: str) -> HttpResponse:
    if not request.POST.get("confirmed"):
        jobs = f"All {plural(job_set.size())} in {spec.title}"
        # Said in the future tense: the page asks before anything happened. Only what loses jobs is red.
        question = {"retry_all": f"{jobs} will be pushed back to their queues now.",
                    "enqueue_all": f"{jobs} will be pushed to their queues now, ahead of their time.",
                    "kill_all": f"{jobs} will be moved to Dead, where they are not retried.",
                    "delete_all": f"{jobs} will be deleted. This can't be undone."}[action]
        return confirm(request, f"{label} in {spec.title}?", question, {"action": action},
                       danger=action in ("delete_all", "kill_all"), button=label)
    if action == "delete_all":
        messages.success(request, f"Deleted {plural(job_set.clear())} from {spec.title}.")
    else:
        run = {"retry_all": job_set.retry_all, "enqueue_all": job_set.add_all_to_queue,
               "kill_all": job_set.kill_all}[action]
        done, skipped = run()
        messages.success(request, f"{label}: {plural(done)} done.")
        if skipped:
            messages.warning(request, f"{plural(skipped)} skipped (unreadable, or gone meanwhile).")
    return HttpResponseRedirect(reverse("djwork_dashboard:set", args=[spec.slug]))
