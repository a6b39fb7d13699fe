"""``processes``, ``quiet``, ``stop``: the Busy page's process table and its Quiet / Stop buttons."""

from __future__ import annotations

from collections import Counter
from typing import Any

from djwork import api
from djwork.api.in_progress import taken_since_beat
from djwork.cli.confirm import confirm
from djwork.cli.output import OK, Context, Failure, ago, plural, table, when
from djwork.cli.parsing import acting, looking

SIGNALS = {"quiet": "TSTP", "stop": "TERM"}
EFFECT = {"quiet": "stops fetching new jobs and finishes the ones it runs (it takes no more until restarted)",
          "stop": "finishes or requeues its running jobs and exits"}


def state(process: api.Process) -> str:
    if process.stopping:
        return "quiet"
    return f"{process.requested} requested" if process.requested else "running"


def process_json(process: api.Process, busy: int, jobs: list[api.Work]) -> dict[str, Any]:
    return {
        "identity": process.identity, "hostname": process.hostname, "pid": process.pid, "tag": process.tag,
        "version": process.version, "queues": process.queues, "concurrency": process.concurrency, "busy": busy,
        "state": state(process), "embedded": process.embedded, "started_at": process.started_at,
        "last_beat": process.last_beat, "rss_kb": process.rss_kb,
        "jobs": [{"jid": work.job.jid, "class": work.job.display_class, "queue": work.queue,
                  "run_at": work.run_at} for work in jobs],
    }


def run_processes(ctx: Context) -> int:
    processes = api.ProcessSet(cleanup=False).all()
    works = api.WorkSet().all(processes)
    works += taken_since_beat(processes, works)
    by_identity: dict[str, list[api.Work]] = {}
    for work in works:
        by_identity.setdefault(work.identity, []).append(work)
    # As the Busy page counts: a job taken since the last beat is running already.
    rows = Counter(work.identity for work in works)
    busy = {p.identity: max(p.busy, rows[p.identity]) for p in processes}
    if ctx.json:
        ctx.emit_lines(process_json(p, busy[p.identity], by_identity.get(p.identity, [])) for p in processes)
        return OK
    if not processes:
        ctx.say("No process is running.")
        return OK
    ctx.say(table(("IDENTITY", "STATE", "BUSY", "QUEUES", "RSS", "STARTED", "LAST BEAT"), [
        (p.identity, state(p), f"{busy[p.identity]} / {p.concurrency}", ",".join(p.queues),
         f"{p.rss_mb:.0f} MB", when(p.started_at), ago(p.last_beat)) for p in processes]))
    if works:
        ctx.say("")
        ctx.say(table(("PROCESS", "JID", "CLASS", "QUEUE", "RUNNING FOR"), [
            (w.identity, w.job.jid, w.job.display_class, w.queue, ago(w.run_at).removesuffix(" ago"))
            for w in works]))
    return OK


def run_signal(ctx: Context) -> int:
    action = ctx.options["verb"]
    identity, everyone = ctx.options["identity"], ctx.options["all"]
    if bool(identity) == everyone:
        raise Failure(f"{action}: name one process identity or pass --all (`manage.py djwork processes` lists them)")
    if everyone:
        targets = [p for p in api.ProcessSet(cleanup=False).all() if p.takes_remote_signals]
        if not targets:
            ctx.say("No process that takes remote signals is running: nothing to do.")
            return OK
        confirm(ctx, f"{action.capitalize()} all {plural(len(targets), 'process', 'processes')}: each "
                     f"{EFFECT[action]}.")
        done = api.ProcessSet(cleanup=False).signal_all(SIGNALS[action])
    else:
        process = api.ProcessSet.get(identity)
        if process is None:
            raise Failure(f"no running process {identity} (it may have stopped; `manage.py djwork processes` lists "
                          "them)")
        confirm(ctx, f"{action.capitalize()} process {identity}: it {EFFECT[action]}.")
        done = [api.ProcessSet.signal(identity, SIGNALS[action])]
    names = [process.identity for process in done]
    if ctx.json:
        ctx.emit({"action": action, "done": len(done), "identities": names})
    else:
        ctx.say(f"{action.capitalize()} requested for {plural(len(done), 'process', 'processes')}: "
                f"{', '.join(names)}. Each takes the signal at its next beat.")
    return OK


def register(verbs: Any) -> None:
    looking(verbs, "processes", run_processes, "every process: state, busy, queues, memory, running jobs")
    for action in SIGNALS:
        parser = acting(verbs, action, run_signal, f"{action} one process, or every process with --all",
                        f"{action.capitalize()} a process: it {EFFECT[action]}.")
        parser.add_argument("identity", nargs="?", default="", help="the process identity (see `processes`)")
        parser.add_argument("--all", action="store_true", help="every process that takes remote signals")
