"""``history``: recent runs from the execution history (the History page), filtered."""

from __future__ import annotations

from typing import Any

from djwork import api
from djwork.api.history import STATUSES
from djwork.cli.jobs import run_json
from djwork.cli.output import OK, Context, table, when
from djwork.cli.parsing import looking, positive_int


def run_history(ctx: Context) -> int:
    page = api.History.recent(ctx.options["limit"], klass=ctx.options["klass"], status=ctx.options["status"] or "",
                              queue=ctx.options["queue"])
    if ctx.json:
        ctx.emit_lines(run_json(run) for run in page.runs)
        return OK
    if not page.runs:
        ctx.say("No run matches." if page.truncated else "No run recorded (or none matches).")
        return OK
    ctx.say(table(("FINISHED", "STATUS", "CLASS", "QUEUE", "JID", "DURATION", "ERROR"), [
        # A resumed segment of an iterable job says so, as the History page's badge does.
        (when(run.finished), f"{run.status} (resumed)" if run.resumed else run.status, run.klass, run.queue, run.jid,
         f"{run.duration_ms:.0f} ms" if run.duration_ms is not None else "-",
         f"{run.error_class}: {run.error_message}"[:80] if run.error_class else "") for run in page.runs]))
    if page.truncated:
        ctx.say("\n(the filter stopped after the newest 5,000 runs)")
    return OK


def register(verbs: Any) -> None:
    parser = looking(verbs, "history", run_history, "recent runs, newest first")
    parser.add_argument("--class", dest="klass", default="", metavar="TEXT", help="class contains TEXT (any case)")
    parser.add_argument("--status", choices=STATUSES, help="only runs that ended so")
    parser.add_argument("--queue", default="", help="only runs from this queue")
    parser.add_argument("--limit", type=positive_int, default=50, help="runs shown at most (default 50)")
