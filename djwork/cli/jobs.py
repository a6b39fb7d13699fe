"""``jobs`` and ``job``: a queue's or a set's jobs (filtered), and one job wherever it is now.

A target names a sorted set (``retry``, ``scheduled``, ``dead``) or a queue;
``queue:NAME`` names a queue even when it is called ``retry``, as Sidekiq allows.
"""

from __future__ import annotations

from typing import Any

from djwork import api
from djwork.api.records import decode_backtrace
from djwork.cli.output import ATTENTION, OK, Context, ago, table, when
from djwork.cli.parsing import looking, positive_int
from djwork.cli.queues import queue_name

SETS: dict[str, type[api.JobSet]] = {"retry": api.RetrySet, "retries": api.RetrySet,
                                     "scheduled": api.ScheduledSet, "dead": api.DeadSet}
BACKTRACE_SHOWN = 20  # lines of a stored backtrace in the text view; --json has it whole
SET_NAMES = {api.RetrySet: "retry", api.ScheduledSet: "scheduled", api.DeadSet: "dead"}


def target(value: str) -> api.JobSet | api.Queue:
    """The set or queue a TARGET argument names."""
    if value.startswith("queue:"):
        return api.Queue(queue_name(value.removeprefix("queue:")))
    if value in SETS:
        return SETS[value]()
    return api.Queue(queue_name(value))


def target_name(where: api.JobSet | api.Queue) -> str:
    return f"queue {where.name}" if isinstance(where, api.Queue) else SET_NAMES[type(where)]


def job_json(job: api.JobRecord, where: str, entry: api.SortedEntry | None = None) -> dict[str, Any]:
    return {
        "jid": job.jid, "class": job.display_class, "queue": job.queue, "where": where,
        "at": entry.at if entry else None, "address": entry.address if entry else None,
        "args": job.display_args, "enqueued_at": job.enqueued_at, "created_at": job.created_at,
        "retry_count": job.retry_count, "error_class": job.error_class, "error_message": job.error_message,
        "problems": job.problems, "lane": job.lane if where == "queued" else None, "priority": job.priority,
    }


JOB_FIELDS = ("jid", "class", "queue", "where", "at", "address", "args", "enqueued_at", "created_at", "retry_count",
              "error_class", "error_message", "problems", "lane", "priority")


def run_json(run: api.Run) -> dict[str, Any]:
    return {"id": run.id, "jid": run.jid, "class": run.klass, "queue": run.queue, "status": run.status,
            "started": run.started, "duration_ms": run.duration_ms, "error_class": run.error_class,
            "error_message": run.error_message, "identity": run.identity, "resumed": run.resumed}


def run_jobs(ctx: Context) -> int:
    where = target(ctx.options["target"])
    klass, term, limit = ctx.options["klass"], ctx.options["search"], ctx.options["limit"]
    filtered = bool(klass or term)
    in_queue = isinstance(where, api.Queue)
    if filtered:
        chosen = (api.select_queue_jobs if in_queue else api.select_entries)(where, klass, term, limit)
        found, total, complete = chosen.entries, chosen.total, chosen.complete
    else:
        page = where.jobs(1, limit) if in_queue else where.page(1, limit)
        found, total, complete = page.items, page.total, True
    rows = [(job, None) for job in found] if in_queue else [(entry.job, entry) for entry in found]
    place = "queued" if in_queue else SET_NAMES[type(where)]
    if ctx.json:
        ctx.emit_lines(job_json(job, place, entry) for job, entry in rows)
        return OK
    name = target_name(where)
    if not rows:
        ctx.say(f"No job in {name} matches." if filtered else f"No job in {name}.")
        return OK
    when_header = {"scheduled": "RUNS AT", "retry": "NEXT RETRY", "dead": "DIED"}.get(place, "ENQUEUED")
    # A queue with priority lanes lists them highest first (docs/priority.md): each row says its lane.
    lane_column = in_queue and any(job.lane for job, _entry in rows)
    ctx.say(table(("JID", "CLASS", "QUEUE") + (("LANE",) if lane_column else ()) + (when_header, "ARGS", "ERROR"), [
        (job.jid or job.ident, job.display_class, job.queue) + ((str(job.lane),) if lane_column else ())
        + (when(entry.at if entry else job.enqueued_at), _short(job.args_text, 40),
           _short(f"{job.error_class}: {job.error_message}" if job.error_class else "", 60)) for job, entry in rows]))
    shown = f"{len(rows):,} shown"
    if filtered:
        looked = "" if complete else " (stopped early: narrow the filter or raise --limit)"
        ctx.say(f"\n{shown}, matching in {name} ({total:,} jobs){looked}.")
    else:
        ctx.say(f"\n{shown} of {total:,} in {name}{'' if total <= len(rows) else '; --limit N shows more'}.")
    return OK


def run_job(ctx: Context) -> int:
    found = api.find_job(ctx.options["jid"])
    job = found.job
    # Exit 1 for a jid known nowhere, so a script can tell "no such job" from a job that ran and left.
    code = ATTENTION if job is None and not found.runs else OK
    if ctx.json:
        out = job_json(job, found.where) if job else {key: None for key in JOB_FIELDS}
        out.update(jid=found.jid, where=found.where, at=found.at, address=found.address or None,
                   payload=job.shown_item if job else None, error_backtrace=_backtrace(job),
                   runs=[run_json(run) for run in found.runs])
        ctx.emit(out)
        return code
    if job is None:
        if not found.runs:
            ctx.say(f"Job {found.jid} was found nowhere: not running, queued, scheduled, retrying or dead, and not "
                    "in the recent execution history" + (
                        "." if found.where == "gone" else " (a queue too long to read whole may still hold it)."))
            return code
        ctx.say(f"Job {found.jid} is no longer waiting anywhere ({found.where}).")
    else:
        ctx.say(f"Job {found.jid}: {found.where}" + (f" ({when(found.at)} UTC)" if found.at else ""))
        ctx.say(f"  class    {job.display_class}\n  queue    {job.queue}\n  args     {_short(job.args_text, 200)}")
        if job.enqueued_at:
            ctx.say(f"  enqueued {when(job.enqueued_at)} ({ago(job.enqueued_at)})")
        if job.retry_count is not None:
            ctx.say(f"  retries  {job.retry_count}")
        if job.error_class:
            ctx.say(f"  error    {job.error_class}: {job.error_message}")
            for line in (_backtrace(job) or [])[:BACKTRACE_SHOWN]:
                ctx.say(f"           {line}")
        for problem in job.problems:
            ctx.say(f"  problem  {problem}")
        ctx.say("\nPayload:\n" + job.pretty)
    if found.runs:
        ctx.say("\nRuns (newest first):")
        ctx.say(table(("STARTED", "STATUS", "DURATION", "PROCESS", "ERROR"), [
            (when(run.started), run.status, f"{run.duration_ms:.0f} ms" if run.duration_ms is not None else "-",
             run.identity, _short(f"{run.error_class}: {run.error_message}" if run.error_class else "", 60))
            for run in found.runs]))
    return OK


def _backtrace(job: api.JobRecord | None) -> list[str] | None:
    if job is None or "error_backtrace" not in job.item:
        return None
    return decode_backtrace(job.item["error_backtrace"])[0]


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def add_filters(parser: Any) -> None:
    parser.add_argument("--class", dest="klass", default="", metavar="CLASS",
                        help="only jobs of this class (exact, as listed)")
    parser.add_argument("--search", default="", metavar="TEXT",
                        help="only jobs whose class, jid, error or arguments contain TEXT (any case)")


def register(verbs: Any) -> None:
    parser = looking(verbs, "jobs", run_jobs, "the jobs of a queue or of retry / scheduled / dead")
    parser.add_argument("target", help="retry, scheduled, dead, or a queue name (queue:NAME for a queue "
                                       "called like a set)")
    add_filters(parser)
    parser.add_argument("--limit", type=positive_int, default=25, help="jobs shown at most (default 25)")
    parser = looking(verbs, "job", run_job, "one job: where it is now, its payload, error and runs")
    parser.add_argument("jid")
