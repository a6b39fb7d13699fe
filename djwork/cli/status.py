"""``status``: the Overview and the health strip in text, once or refreshed in place (``--watch``).

Exit 1 when the dashboard's health strip would warn (no process, a queue with
jobs nobody listens to, a latency over ``DASHBOARD_LATENCY_WARNING``, a late
beat, a Redis setting that loses jobs), so ``manage.py djwork status --json``
is a monitoring check as it stands.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from djwork import api
from djwork.api.health import Health
from djwork.cli.output import ATTENTION, OK, Context, plural, seconds_text, table, when
from djwork.cli.parsing import interval, looking
from djwork.redis.url import public_location
from djwork.settings.conf import get_config

CLEAR = "\x1b[H\x1b[J"  # cursor home, erase below: the frame is redrawn where it was, as `watch` does


@dataclass(frozen=True)
class Snapshot:
    at: dt.datetime
    stats: api.Stats
    processes: list[api.Process]
    queues: list[api.QueueSummary]
    health: Health
    redis: dict[str, str]

    @property
    def concurrency(self) -> int:
        return sum(process.concurrency for process in self.processes)

    def as_json(self) -> dict[str, Any]:
        return {
            "healthy": not self.health.warnings, "at": self.at, "redis_location": public_location(),
            "processes": self.health.processes, "running": self.health.running, "quiet": self.health.quiet,
            "busy": self.stats.busy, "concurrency": self.concurrency,
            "processed": self.stats.processed, "failed": self.stats.failed, "enqueued": self.stats.enqueued,
            "scheduled": self.stats.scheduled, "retries": self.stats.retries, "dead": self.stats.dead,
            "expired": self.stats.expired,
            "queues": [{"name": q.name, "size": q.size, "latency": round(q.latency, 3), "paused": q.paused,
                        "isolated": q.isolated} for q in self.queues],
            "redis": self.redis,
            "warnings": [{"kind": w.kind, "text": w.text, "queue": w.queue, "identity": w.identity}
                         for w in self.health.warnings],
        }


def snapshot() -> Snapshot:
    """Everything the Overview's top and the health strip show, read now."""
    config = get_config()
    processes = api.ProcessSet(cleanup=False).all()
    queues = api.Queue.all()
    health = Health.assess(processes, queues, config.dashboard_latency_warning, config.heartbeat_interval,
                           time.time(), api.redis_settings_risks())
    return Snapshot(dt.datetime.now(dt.UTC), api.Stats.fetch(), processes, queues, health, api.redis_info())


def render(shot: Snapshot) -> str:
    s, h = shot.stats, shot.health
    redis = shot.redis
    memory = redis.get("used_memory_human", "?")
    if redis.get("maxmemory_human") not in (None, "0B"):
        memory += f" of {redis['maxmemory_human']}"
    lines = [
        f"djwork at {public_location()}, {when(shot.at)} UTC",
        f"Processes  {h.processes} ({h.running} running, {h.quiet} quiet)   Busy {s.busy:,} / {shot.concurrency:,}",
        f"Jobs       processed {s.processed:,}   failed {s.failed:,}   enqueued {s.enqueued:,}   "
        f"scheduled {s.scheduled:,}   retries {s.retries:,}   dead {s.dead:,}",
        f"Redis      {redis.get('redis_version', '?')}, memory {memory}",
        "",
    ]
    if shot.queues:
        lines.append(table(("QUEUE", "SIZE", "LATENCY", "STATE"), [
            (q.name, f"{q.size:,}", seconds_text(q.latency) if q.size else "-",
             ("paused" if q.paused else "") + (f" {plural(q.isolated)} isolated" if q.isolated else ""))
            for q in shot.queues]))
    else:
        lines.append("No queue has been used yet.")
    lines.append("")
    if h.warnings:
        lines.append(f"{plural(len(h.warnings), 'warning')}:")
        lines += [f"  ! {warning.text}" for warning in h.warnings]
    else:
        lines.append("OK: nothing needs attention.")
    return "\n".join(lines)


def run(ctx: Context) -> int:
    if ctx.options["watch"]:
        return watch(ctx, ctx.options["interval"])
    shot = snapshot()
    if ctx.json:
        ctx.emit(shot.as_json())
    else:
        ctx.say(render(shot))
    return ATTENTION if shot.health.warnings else OK


def watch(ctx: Context, interval: float) -> int:
    """Redraw every ``interval`` seconds until Ctrl-C, which ends it with exit 0; with ``--json``, one object
    per refresh. An outage is shown in the frame and the watch goes on: a monitor that died with Redis
    would not show it coming back."""
    isatty = getattr(ctx.stdout, "isatty", None)
    clear = CLEAR if isatty and isatty() and not ctx.json else ""
    try:
        while True:
            try:
                shot = snapshot()
                frame = None
            except api.RedisUnavailable as error:
                shot, frame = None, f"djwork at {public_location()}: Redis is unreachable ({error}); retrying"
            if ctx.json:
                ctx.emit(shot.as_json() if shot else {"healthy": False, "error": frame})
            else:
                body = frame or render(shot)
                ctx.stdout.write(f"{clear}{body}\n\nrefreshing every {interval:g}s; Ctrl-C quits\n")
            ctx.flush()
            time.sleep(interval)
    except KeyboardInterrupt:
        ctx.stdout.write("\n")
        return OK


def register(verbs: Any) -> None:
    parser = looking(verbs, "status", run, "processes, busy, queues, sets, Redis, warnings (exit 1 if any)")
    parser.add_argument("--watch", "-w", action="store_true", help="refresh in place until Ctrl-C")
    parser.add_argument("--interval", "-n", type=interval, default=2.0, metavar="SECONDS",
                        help="seconds between refreshes with --watch (default 2)")
