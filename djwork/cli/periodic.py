"""``periodic``: every periodic entry (the Periodic page); ``periodic run|pause|resume <entry>``: its buttons."""

from __future__ import annotations

from typing import Any

from djwork import api
from djwork.cli.confirm import confirm
from djwork.cli.output import OK, Context, Failure, table, when
from djwork.cli.parsing import looking

ACTIONS = ("run", "pause", "resume")


def entry_json(entry: api.PeriodicEntry) -> dict[str, Any]:
    last = next((run for run in entry.runs if run.kind != "skipped"), None)
    return {"id": entry.id, "cron": entry.cron, "tz": entry.tz, "job": entry.job, "queue": entry.queue,
            "configured": entry.configured, "paused": entry.paused, "next_run": entry.next_run_utc,
            "overdue": entry.overdue, "last_slot": entry.last_slot, "last_jid": last.jid if last else None,
            "last_outcome": last.outcome if last else None, "running_jid": entry.running_jid or None,
            "counters": entry.counters}


def run_periodic(ctx: Context) -> int:
    action, entry_id = ctx.options["action"], ctx.options["entry"]
    if action:
        if action not in ACTIONS:
            raise Failure(f"{action!r} is not a periodic action: {', '.join(ACTIONS)}, or none to list the entries")
        if not entry_id:
            raise Failure(f"periodic {action}: name the entry (`manage.py djwork periodic` lists them)")
        return _act(ctx, action, entry_id)
    entries = api.Periodic().entries(runs=5)
    if ctx.json:
        ctx.emit_lines(entry_json(entry) for entry in entries)
        return OK
    if not entries:
        ctx.say("No periodic entry is configured or recorded.")
        return OK
    rows = []
    for entry in entries:
        data = entry_json(entry)
        state = "paused" if entry.paused else "retired" if not entry.configured else "overdue" if entry.overdue else ""
        rows.append((entry.id, entry.cron, entry.job, state, when(entry.next_run_utc), data["last_outcome"] or "-"))
    ctx.say(table(("ENTRY", "CRON", "JOB", "STATE", "NEXT RUN (UTC)", "LAST"), rows))
    return OK


def _act(ctx: Context, action: str, entry_id: str) -> int:
    periodic = api.Periodic()
    entry = periodic.get(entry_id, runs=1)  # StaleEntry (exit 2) for an unknown id
    if action == "pause":
        if entry.paused:
            ctx.say(f"{entry_id} is already paused: nothing to do.")
            return OK
        confirm(ctx, f"Pause {entry_id}: none of its slots is enqueued until it is resumed; the slots skipped "
                     "meanwhile do not run later.")
        periodic.pause(entry_id)
        done = f"Paused {entry_id}."
        jid = None
    elif action == "resume":
        if not entry.paused:
            ctx.say(f"{entry_id} is not paused: nothing to do.")
            return OK
        confirm(ctx, f"Resume {entry_id}: it fires again from its next slot.")
        periodic.unpause(entry_id)
        done, jid = f"Resumed {entry_id}.", None
    else:
        confirm(ctx, f"Run {entry_id} now: job {entry.job} is pushed{f' to queue {entry.queue}' if entry.queue else ''}"
                     " with its configured arguments, outside the schedule.")
        jid = periodic.run_now(entry_id)
        done = f"Enqueued {entry_id} now as job {jid}."
    if ctx.json:
        ctx.emit({"action": f"periodic {action}", "entry": entry_id, "done": 1, "jid": jid})
    else:
        ctx.say(done)
    return OK


def register(verbs: Any) -> None:
    parser = looking(verbs, "periodic", run_periodic, "every periodic entry; or run, pause or resume one",
                     "Without an action, list every periodic entry. `periodic run|pause|resume ENTRY` acts on one "
                     "(it asks first; --yes answers for a script).")
    parser.add_argument("action", nargs="?", default="", metavar="run|pause|resume", help="what to do")
    parser.add_argument("entry", nargs="?", default="", help="the entry's id")
    parser.add_argument("--yes", "-y", action="store_true", help="act without asking")
