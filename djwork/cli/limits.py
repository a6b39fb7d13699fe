"""``limits``: every rate limiter's use (the Limits page); ``limit reset <name>``: its Reset button."""

from __future__ import annotations

from typing import Any

from djwork import api
from djwork.cli.confirm import confirm
from djwork.cli.output import OK, Context, plural, table, when
from djwork.cli.parsing import acting, looking


def limiter_json(summary: api.LimiterSummary) -> dict[str, Any]:
    return {"name": summary.name, "kind": summary.kind, "size": summary.size, "interval": summary.interval,
            "used": summary.used, "available": summary.available, "waiting": summary.waiting,
            "reset_at": summary.reset_at, "problems": list(summary.problems)}


def run_limits(ctx: Context) -> int:
    limiters = api.Limiters(ctx.options["search"]).all()
    if ctx.json:
        ctx.emit_lines(limiter_json(summary) for summary in limiters)
        return OK
    if not limiters:
        ctx.say("No rate limiter is in use.")
        return OK
    ctx.say(table(("LIMITER", "KIND", "LIMIT", "USED", "WAITING", "FREE AGAIN"), [
        (s.name, s.kind, f"{s.size:,}" + (f" / {s.interval:g}s" if s.interval else " at once"), f"{s.used:g}",
         f"{s.waiting:,}", when(s.reset_at)) for s in limiters]))
    return OK


def run_reset(ctx: Context) -> int:
    limiter = api.Limiter(ctx.options["name"])  # ValueError (exit 2) for a name no limiter can have
    detail = limiter.detail()
    if detail is None:
        ctx.say(f"No limiter {ctx.options['name']}: it expired, was deleted, or has never been used.")
        return OK
    concurrent = detail.summary.kind == "concurrent"
    held = f", freeing the {plural(len(detail.holders), 'slot')} held now" if concurrent else ""
    confirm(ctx, f"Reset limiter {detail.summary.name}: its count starts again from zero{held}, so more jobs may be "
                 "admitted at once. Its stats are kept.")
    freed = limiter.reset()
    if ctx.json:
        ctx.emit({"action": "limit reset", "name": detail.summary.name, "done": 1, "freed": freed})
    else:
        ctx.say(f"Reset limiter {detail.summary.name}" + (f": {plural(freed, 'slot')} freed." if freed else "."))
    return OK


def register(verbs: Any) -> None:
    parser = looking(verbs, "limits", run_limits, "every rate limiter: limit, use, waiting jobs")
    parser.add_argument("--search", default="", metavar="TEXT", help="only limiters whose name contains TEXT")
    parser = acting(verbs, "limit", run_reset, "reset a rate limiter: `limit reset NAME`")
    parser.add_argument("action", choices=["reset"], help="reset (the one action)")
    parser.add_argument("name", help="the limiter's name")
