"""``batches``, ``batch <bid>``: the Batches pages; ``batch invalidate <bid>``: the batch page's button."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from djwork import api
from djwork.api.batches import KINDS
from djwork.cli.confirm import confirm
from djwork.cli.output import OK, Context, Failure, plural, table, when
from djwork.cli.parsing import looking, positive_int

BID = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")  # as djwork.Batch makes them (docs/batches.md)
JIDS_SHOWN = 50


def _at(epoch: float | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(epoch, dt.UTC) if epoch is not None else None


def state(s: api.BatchStatus) -> str:
    if s.invalidated:
        return "invalidated"
    if s.success or s.settled or s.complete:
        return "succeeded" if s.success else "settled" if s.settled else "complete"
    return {"waiting": "waiting", "never": "never runs"}.get(s.after_state, "running")


def batch_json(s: api.BatchStatus) -> dict[str, Any]:
    return {"bid": s.bid, "description": s.description, "kind": s.kind, "state": state(s), "total": s.total,
            "pending": s.pending, "failures": s.failures, "dead": s.dead, "succeeded": s.succeeded,
            "created_at": _at(s.created_at), "parent": s.parent, "callbacks": s.callbacks,
            "fired_at": {event: _at(at) for event, at in s.fired_at.items()}}


def run_batches(ctx: Context) -> int:
    listing = api.Batches(ctx.options["search"], kind=ctx.options["kind"])
    statuses = listing.page(1, ctx.options["limit"]).items
    if ctx.json:
        ctx.emit_lines(batch_json(s) for s in statuses)
        return OK
    if not statuses:
        ctx.say("No batch matches." if ctx.options["search"] else "No batch.")
        return OK
    ctx.say(table(("BID", "STATE", "DONE", "PENDING", "FAILING", "DEAD", "CREATED", "DESCRIPTION"), [
        (s.bid, state(s), f"{s.succeeded:,} / {s.total:,}", f"{s.pending:,}", f"{s.failures:,}", f"{s.dead:,}",
         when(_at(s.created_at)), s.description[:60]) for s in statuses]))
    return OK


def run_batch(ctx: Context) -> int:
    words = ctx.options["words"]
    if len(words) == 2 and words[0] == "invalidate":
        return _invalidate(ctx, _bid(words[1]))
    if len(words) != 1:
        raise Failure("batch takes a bid (`batch BID`), or `batch invalidate BID`")
    status = api.Batch(_bid(words[0])).status(jids_up_to=JIDS_SHOWN)
    if status is None:
        raise Failure(f"no batch {words[0]}: it expired (a day after its success, 30 days otherwise) or never existed")
    if ctx.json:
        ctx.emit({**batch_json(status), "pending_jids": status.pending_jids, "failed_jids": status.failed_jids,
                  "dead_jids": status.dead_jids, "callback_jids": status.callback_jids,
                  "invalidated_at": _at(status.invalidated_at)})
        return OK
    ctx.say(f"Batch {status.bid}: {state(status)}  {status.description}")
    ctx.say(f"  jobs     {status.total:,}: {status.succeeded:,} succeeded, {status.pending:,} pending "
            f"({status.failures:,} failing), {status.dead:,} dead")
    ctx.say(f"  created  {when(_at(status.created_at))} UTC" + (f"; child of {status.parent}" if status.parent else ""))
    for event, callback in status.callbacks.items():
        fired = status.fired_at.get(event)
        ctx.say(f"  on {event:<9}{callback}: " + (f"pushed {when(_at(fired))} UTC" if fired else "not yet"))
    for label, jids in (("pending", status.pending_jids), ("failing", status.failed_jids),
                        ("dead", status.dead_jids)):
        if jids:
            ctx.say(f"  {label:<9}{' '.join(jids)}")
    return OK


def _invalidate(ctx: Context, bid: str) -> int:
    status = api.Batch(bid).status(jids_up_to=0)
    if status is None:
        raise Failure(f"no batch {bid}: it expired or never existed")
    confirm(ctx, f"Invalidate batch {bid} ({plural(status.pending)} pending): its jobs that have not started are "
                 "skipped, and none of its callbacks will run. This can't be undone.")
    api.Batch(bid).invalidate()
    if ctx.json:
        ctx.emit({"action": "batch invalidate", "bid": bid, "done": 1})
    else:
        ctx.say(f"Invalidated batch {bid}: its remaining jobs will be skipped.")
    return OK


def _bid(value: str) -> str:
    if not BID.match(value):
        raise Failure(f"{value[:80]!r} is not a batch id")
    return value


def register(verbs: Any) -> None:
    parser = looking(verbs, "batches", run_batches, "batches, newest first, with their progress")
    parser.add_argument("--search", default="", metavar="TEXT", help="description contains TEXT (any case)")
    parser.add_argument("--kind", choices=KINDS, default="batch",
                        help="batch (djwork.Batch's, the default), canvas (a canvas's steps) or all")
    parser.add_argument("--limit", type=positive_int, default=25, help="batches shown at most (default 25)")
    parser = looking(verbs, "batch", run_batch, "one batch (`batch BID`), or `batch invalidate BID`")
    # A bid may start with "-" (djwork.Batch makes them with secrets.token_urlsafe): `batch -- -Xy3...`.
    parser.add_argument("words", nargs="+", metavar="[invalidate] BID",
                        help="a bid; one that starts with - goes after --, as in `batch -- -Xy3`")
    parser.add_argument("--yes", "-y", action="store_true", help="invalidate without asking")
