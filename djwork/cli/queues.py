"""``queues``, ``pause``, ``resume``: the Queues page and its Pause / Resume buttons."""

from __future__ import annotations

from typing import Any

from djwork import api
from djwork.cli.confirm import confirm
from djwork.cli.output import OK, Context, Failure, plural, seconds_text, table
from djwork.cli.parsing import acting, looking
from djwork.settings.kinds import QUEUE_NAME


def queue_name(value: str) -> str:
    """A queue name as settings, ``runworkers -q`` and the dashboard's URLs accept it."""
    if not QUEUE_NAME.match(value or ""):
        raise Failure(f"{value[:80]!r} is not a queue name (letters, digits and _ : . - only)")
    return value


def run_queues(ctx: Context) -> int:
    queues = api.Queue.all()
    if ctx.json:
        ctx.emit_lines({"name": q.name, "size": q.size, "latency": round(q.latency, 3), "paused": q.paused,
                        "isolated": q.isolated} for q in queues)
        return OK
    if not queues:
        ctx.say("No queue has been used yet.")
        return OK
    ctx.say(table(("QUEUE", "SIZE", "LATENCY", "PAUSED", "ISOLATED"), [
        (q.name, f"{q.size:,}", seconds_text(q.latency) if q.size else "-", "paused" if q.paused else "",
         f"{q.isolated:,}" if q.isolated else "") for q in queues]))
    return OK


def run_pause(ctx: Context) -> int:
    pausing = ctx.options["verb"] == "pause"
    queue = api.Queue(queue_name(ctx.options["queue"]))
    if queue.paused() == pausing:
        ctx.say(f"Queue {queue.name} is {'already' if pausing else 'not'} paused: nothing to do.")
        return OK
    waiting = plural(queue.size())
    if pausing:
        confirm(ctx, f"Pause queue {queue.name} ({waiting} waiting): workers stop fetching from it within a few "
                     "seconds, until it is resumed.")
        queue.pause()
    else:
        confirm(ctx, f"Resume queue {queue.name} ({waiting} waiting): workers fetch from it again.")
        queue.resume()
    if ctx.json:
        ctx.emit({"action": ctx.options["verb"], "queue": queue.name, "done": 1})
    else:
        ctx.say(f"{'Paused' if pausing else 'Resumed'} queue {queue.name}.")
    return OK


def register(verbs: Any) -> None:
    looking(verbs, "queues", run_queues, "every queue: size, latency, paused")
    for verb, text in (("pause", "stop workers fetching from a queue"), ("resume", "let workers fetch again")):
        acting(verbs, verb, run_pause, f"{verb} a queue: {text}").add_argument("queue", help="the queue's name")
