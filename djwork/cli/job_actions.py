"""``retry``, ``delete``, ``kill`` and ``clear``: the Retries, Scheduled, Dead and Queue pages' actions.

On a set they take one jid, a filter (``--class``, ``--search``) or ``--all``,
never nothing: an empty filter acting on every job would be one typo away.
A filter selects first and the confirmation states how many jobs it chose;
exactly those are acted on (``djwork.api.selection``).
"""

from __future__ import annotations

from typing import Any

from djwork import api
from djwork.cli.confirm import confirm
from djwork.cli.jobs import add_filters, target, target_name
from djwork.cli.output import ATTENTION, OK, Context, Failure, plural
from djwork.cli.parsing import acting

# What each verb does to a job, said before it happens.
EFFECT = {"retry": "pushed to their queues now", "delete": "deleted (this can't be undone)",
          "kill": "moved to dead, where they are not retried"}
DONE = {"retry": "Retried", "delete": "Deleted", "kill": "Killed"}
PROBLEMS_SHOWN = 10


def run_action(ctx: Context) -> int:
    verb = ctx.options["verb"]
    where = target(ctx.options["target"])
    if isinstance(where, api.Queue):
        return _delete_from_queue(ctx, where) if verb == "delete" else _refuse_on_queue(verb, where)
    if verb == "kill" and isinstance(where, api.DeadSet):
        raise Failure("jobs in dead are dead already: kill moves retry or scheduled jobs to dead")
    # "Retry" on the Scheduled page is its "Enqueue now": the job keeps its retry count.
    method = "add_to_queue" if verb == "retry" and isinstance(where, api.ScheduledSet) else verb
    jid, klass, term, everything = (ctx.options[name] for name in ("jid", "klass", "search", "all"))
    name = target_name(where)
    if sum((bool(jid), bool(klass or term), everything)) != 1:
        raise Failure(f"{verb} {name}: say which jobs, with one of a jid, --class/--search, or --all")
    if everything:
        return _on_all(ctx, verb, where, name)
    if jid:
        entry = where.find_job(jid)
        if entry is None:
            raise Failure(f"job {jid} is not in {name} (it may have been retried, run or deleted)")
        entries, what = [entry], f"job {jid} ({entry.job.display_class})"
    else:
        selection = api.select_entries(where, klass, term)
        if not selection.entries:
            ctx.say(f"No job in {name} matches: nothing to do.")
            return _report(ctx, verb, name, api.BulkOutcome())
        entries = selection.entries
        what = plural(len(entries)) + _filters_text(klass, term)
        if not selection.complete:
            what += f" (among the first {selection.scanned:,} of {selection.total:,}: run it again for the rest)"
    confirm(ctx, f"{verb.capitalize()} {what} in {name}: {'it is' if jid else 'they are'} {EFFECT[verb]}.")
    return _report(ctx, verb, name, api.act_on(where, entries, method))


def _on_all(ctx: Context, verb: str, where: api.JobSet, name: str) -> int:
    size = where.size()
    if not size:
        ctx.say(f"{name.capitalize()} is empty: nothing to do.")
        return _report(ctx, verb, name, api.BulkOutcome())
    confirm(ctx, f"{verb.capitalize()} all {plural(size)} in {name}: they are {EFFECT[verb]}.")
    if verb == "delete":
        return _report(ctx, verb, name, api.BulkOutcome(where.clear()))
    run = {"retry": where.add_all_to_queue if isinstance(where, api.ScheduledSet) else where.retry_all,
           "kill": where.kill_all}[verb]
    done, skipped = run()
    return _report(ctx, verb, name, api.BulkOutcome(done, [f"{plural(skipped)} skipped (unreadable, or gone "
                                                           "meanwhile)"] if skipped else []))


def _delete_from_queue(ctx: Context, queue: api.Queue) -> int:
    jid = ctx.options["jid"]
    if not jid or ctx.options["klass"] or ctx.options["search"] or ctx.options["all"]:
        raise Failure(f"delete from queue {queue.name} takes one jid; `clear {queue.name}` deletes every job")
    record = queue.find_job(jid)
    if record is None:
        raise Failure(f"job {jid} is not in queue {queue.name} (it may have run already)")
    confirm(ctx, f"Delete job {jid} ({record.display_class}, arguments {record.args_text[:200]}) from queue "
                 f"{queue.name}: it is deleted (this can't be undone).")
    queue.delete_job(jid)
    return _report(ctx, "delete", f"queue {queue.name}", api.BulkOutcome(1))


def _refuse_on_queue(verb: str, queue: api.Queue) -> int:
    why = "they are waiting to run already" if verb == "retry" else "only retry and scheduled jobs can be killed"
    raise Failure(f"{verb} does not apply to queue {queue.name}: {why}")


def _filters_text(klass: str, term: str) -> str:
    return (f" of class {klass}" if klass else "") + (f" matching {term!r}" if term else "")


def _report(ctx: Context, verb: str, name: str, outcome: api.BulkOutcome) -> int:
    if ctx.json:
        ctx.emit({"action": verb, "target": name, "done": outcome.done, "skipped": len(outcome.problems),
                  "problems": outcome.problems})
    elif outcome.done or outcome.problems:
        ctx.say(f"{DONE[verb]} {plural(outcome.done)} in {name}.")
        for problem in outcome.problems[:PROBLEMS_SHOWN]:
            ctx.say(f"  skipped: {problem}")
        if len(outcome.problems) > PROBLEMS_SHOWN:
            ctx.say(f"  …and {len(outcome.problems) - PROBLEMS_SHOWN:,} more skipped.")
    return ATTENTION if outcome.problems else OK


def run_clear(ctx: Context) -> int:
    where = target(ctx.options["target"])
    name = target_name(where)
    size = where.size()
    confirm(ctx, f"Clear {name}: all {plural(size)} in it are deleted (this can't be undone).")
    removed = where.clear()
    if ctx.json:
        ctx.emit({"action": "clear", "target": name, "done": removed, "skipped": 0, "problems": []})
    else:
        ctx.say(f"Cleared {name}: {plural(removed)} deleted.")
    return OK


def register(verbs: Any) -> None:
    for verb, text in (("retry", "push jobs of retry / scheduled / dead to their queues now"),
                       ("delete", "delete jobs of retry / scheduled / dead, or one job of a queue"),
                       ("kill", "move jobs of retry / scheduled to dead")):
        parser = acting(verbs, verb, run_action, text)
        parser.add_argument("target", help="retry, scheduled, dead (or, for delete, a queue name)")
        parser.add_argument("jid", nargs="?", default="", help="one job")
        add_filters(parser)
        parser.add_argument("--all", action="store_true", help="every job of the set")
    parser = acting(verbs, "clear", run_clear, "delete every job of a queue or of retry / scheduled / dead")
    parser.add_argument("target", help="retry, scheduled, dead, or a queue name")
