"""``metrics``: every class's runs, failures and times over a period (the Metrics page's table)."""

from __future__ import annotations

from typing import Any

from djwork import api
from djwork.api.metrics import PERIODS
from djwork.cli.output import OK, Context, table
from djwork.cli.parsing import looking

HOURS = sorted(int(period.removesuffix("h")) for period in PERIODS)


def run_metrics(ctx: Context) -> int:
    period = f"{ctx.options['hours']}h"
    result = api.Metrics().by_class(period, class_filter=ctx.options["klass"] or None)
    rows = result.sorted("seconds")
    if ctx.json:
        ctx.emit_lines({"class": item.name, "period": period, "processed": item.processed, "failed": item.failed,
                        "seconds": round(item.seconds, 3), "average_ms": round(item.average_ms, 3),
                        "rescheduled": item.rescheduled} for item in rows)
        return OK
    if not rows:
        ctx.say(f"No run recorded in the last {period}.")
        return OK
    ctx.say(table(("CLASS", "RUNS", "FAILED", "TOTAL TIME", "AVERAGE"), [
        (item.name, f"{item.processed:,}", f"{item.failed:,}", f"{item.seconds:,.1f} s",
         f"{item.average_ms:,.1f} ms") for item in rows]))
    ctx.say(f"\nOver the last {period} ({result.starts_at:%H:%M} to {result.ends_at:%H:%M} UTC).")
    return OK


def register(verbs: Any) -> None:
    parser = looking(verbs, "metrics", run_metrics, "every class's runs, failures and time over the last hours")
    parser.add_argument("--hours", type=int, choices=HOURS, default=1, help="the period (default 1)")
    parser.add_argument("--class", dest="klass", default="", metavar="TEXT",
                        help="only classes whose name contains TEXT")
