"""djwork next to Sidekiq, RQ, Celery and Dramatiq: same Redis, same job body, one run, one table per body.

    ./dev bench compare [--job noop|incr|both] [--jobs 20000] [--systems djwork,sidekiq,rq,celery,dramatiq]
                        [--rounds 1] [--skip-latency] [--io] [--embedded] [--quick] [--results on]
    .venv/bin/python bench/compare.py --systems djwork,sidekiq --job both --io --embedded   # issue #20's run

Starts one private redis-server (djwork.testing.redis_server, never the
machine's Redis) and measures each installed system in turn, never two at
once, with a FLUSHDB before every measurement. --job picks the body every
system runs: `incr` (one INCR on bench:counter), `noop` (no Redis call but
one INCRBY 100 per 100 runs of the worker process: the framework's own
cost) or `both` (a table for each from one run). Bodies: bench/jobs.py for
djwork, bench/others/counter.py for the Python systems, bench/ruby/jobs.rb
for Sidekiq. Per system and body:

  enqueue 1x1   jobs/s pushing --jobs jobs one at a time from one thread
                (djwork delay(), Sidekiq::Client.push in Ruby, RQ Queue.enqueue,
                Celery task.delay, Dramatiq actor.send);
  enqueue bulk  jobs/s in batches of --batch (djwork delay_many, Sidekiq push_bulk,
                RQ enqueue_many); "-" where the system has no bulk enqueue;
  drain 1p/2p   jobs/s a worker drains a pre-loaded queue of --jobs jobs with 1
                process of -c threads and with 2 such processes, timed from the
                first completion the counter shows to the target (incr: every
                job; noop: the last full hundred sure to be reached, as each
                process holds back up to 99 uncounted runs: --jobs - 99 x
                processes rounded up to a hundred);
  worker CPU    user + sys CPU of the workers' process trees (/proc) over the
                drain window / jobs in it, in us, "1p / 2p";
  Redis CPU     redis-server's used_cpu_user + used_cpu_sys (INFO cpu) over the
                same window / jobs, in us, "1p / 2p";
  Redis cmds    calls summed over INFO commandstats over the window / jobs,
                "1p / 2p", the bench's own GETs of the counter and INFOs taken
                out. Redis counts EVAL/EVALSHA once each AND every command a
                script runs inside (redis.call), so a script call of 4 inner
                commands counts 5; commandstats cannot tell top-level from
                inner calls. The top 6 commands per job are in the notes;
  p50/p99       pickup latency with one idle 1-process worker while the client
                pushes --probes probe jobs at --rate per second (measured once per
                round, shown in the incr table when there is one);
  Redis bytes   Redis used_memory (less the Lua scripts' cache) once a drain is
                over and its workers are gone, less the empty database's before
                the enqueue, per job: what the finished jobs leave behind (result
                records, stats, djwork's history stream, capped at
                HISTORY_MAX_LENGTH entries), "1p / 2p";
  RSS           resident memory of the 1-process worker tree after its drain.

Every system runs on its defaults, djwork too (RESULTS off, as Sidekiq and
Celery without a result backend). --results on adds a row, "djwork, results
on" (RESULTS=True, through BENCH_RESULTS=1 in bench/settings.py), measured in
the same rounds, and prints what results cost: its drain rate, Redis CPU and
Redis bytes per job against djwork's defaults.

Each "x djwork" column divides the system's number by djwork's. --rounds N
repeats every measurement N times, interleaved (the system order flips each
round), and shows medians. Below the tables, issue #20's targets 1-4 and 7
are checked (djwork against Sidekiq, same run); target 7 also times a bare
LPUSH+SADD pipeline loop (one round trip per job from one thread, the wire
format delay() must write) against delay(). --io adds target 5's table
(bench/async_jobs.py: 10,000 coroutine jobs awaiting sleep(0.1) in one
djwork process, next to Sidekiq -c 50 running the same sleep), --embedded
target 6's (bench/embedded.py: a view's p99 idle vs. while the embedded
worker drains). Every table says the machine, the versions, the load
average at its start and end, and the command. Clients run as their own
processes (bench/others/client.py, bench/ruby/client.rb) and time only the
pushes. A system whose packages are missing is skipped with a note; every
measurement has a deadline (--deadline), and every process started is
killed at the end. Prints the tables and writes them as markdown to
bench/results/compare-latest.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from common import ROOT, start_redis
from compare_extra import embedded, io_table
from compare_measure import Bench, Result
from compare_procs import SYSTEMS, Processes, System, detect
from compare_report import (
    build_rows,
    command_line,
    command_notes,
    machine,
    markdown_table,
    results_cost,
    targets,
    text_table,
    versions,
)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", choices=["noop", "incr", "both"], default="incr",
                        help="job body: incr (one INCR), noop (one INCRBY 100 per 100 runs) or both tables")
    parser.add_argument("--jobs", type=int, help="jobs per enqueue and drain run (default 20000; --quick 5000)")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"comma-separated subset of {','.join(SYSTEMS)} (default: all that are installed)")
    parser.add_argument("--results", choices=["on", "off"], default="off",
                        help="on: also measure djwork with RESULTS=True (a result record per job), in the same run, "
                             "next to djwork on its defaults (RESULTS off, as Sidekiq and Celery store no outcome)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat each measurement, interleaved; medians shown")
    parser.add_argument("--skip-latency", action="store_true", help="skip the pickup-latency measurement")
    parser.add_argument("--quick", action="store_true", help="smoke run: 5,000 jobs, 400 probes")
    parser.add_argument("--concurrency", type=int, default=10, help="threads per worker process (default 10)")
    parser.add_argument("--batch", type=int, default=1000, help="bulk enqueue batch size (default 1000)")
    parser.add_argument("--rate", type=float, default=200, help="latency probes per second (default 200)")
    parser.add_argument("--probes", type=int, help="latency probes (default 1000; --quick 400)")
    parser.add_argument("--io", action="store_true", help="add the I/O-bound table (issue #20 target 5)")
    parser.add_argument("--io-jobs", type=int, default=10_000)
    parser.add_argument("--io-sleep", type=float, default=0.1)
    parser.add_argument("--io-places", type=int, default=500, help="djwork's ASYNC_CONCURRENCY for --io")
    parser.add_argument("--embedded", action="store_true", help="add the embedded-in-gunicorn table (target 6)")
    parser.add_argument("--embedded-jobs", type=int, default=20_000)
    parser.add_argument("--embedded-requests", type=int, help="requests per phase (default 6000; --quick 400)")
    parser.add_argument("--embedded-args", default="--yield 1 --worker-class djwork.gunicorn.EmbeddedWorker",
                        help="more options for bench/embedded.py (default: the setup docs/deployment.md advises)")
    parser.add_argument("--deadline", type=float, default=300,
                        help="seconds any one measurement may take before it is abandoned (default 300)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the workers' and clients' logs")
    parser.add_argument("--output", type=Path, default=ROOT / "bench/results/compare-latest.md",
                        help="markdown copy of the tables (default bench/results/compare-latest.md)")
    opts = parser.parse_args()
    opts.jobs = opts.jobs or (5_000 if opts.quick else 20_000)
    opts.probes = opts.probes or (400 if opts.quick else 1000)
    opts.embedded_requests = opts.embedded_requests or (400 if opts.quick else 6000)
    if opts.jobs < 1000:
        parser.error("--jobs must be at least 1,000 (a no-op drain counts by the hundred per process)")
    opts.wanted = [name.strip().lower() for name in opts.systems.split(",") if name.strip()]
    unknown = sorted(set(opts.wanted) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}")
    return opts


def heading(title: str, context: dict[str, str], load: tuple[float, float]) -> list[str]:
    return [f"## {title}", "", f"`{context['command']}` ({context['started']})", "",
            f"Machine: {context['machine']}; load average (1 min) {load[0]:.2f} at the start, "
            f"{load[1]:.2f} at the end.",
            f"Versions: {context['versions']}.", ""]


def main() -> int:
    opts = parse()

    def terminate(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)

    systems: list[System] = []
    skipped: list[str] = []
    for key in [name for name in SYSTEMS if name in opts.wanted]:
        found = detect(key, opts.concurrency)
        if isinstance(found, System):
            systems.append(found)
            if key == "djwork" and opts.results == "on":  # measured with the others, interleaved, each round
                variant = detect("djwork+results", opts.concurrency)
                assert isinstance(variant, System)
                systems.append(variant)
        else:
            skipped.append(f"{key} skipped: {found}")
            print(f"{key}: skipped ({found})", flush=True)

    kinds = ["noop", "incr"] if opts.job == "both" else [opts.job]
    latency_kind = "incr" if "incr" in kinds else kinds[0]
    by_kind = {kind: {system.key: Result(system, kind) for system in systems} for kind in kinds}
    loads: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
    log_dir = Path(tempfile.mkdtemp(prefix="djwork-compare-"))
    procs = Processes(log_dir)
    started = dt.datetime.now(dt.UTC)
    server = start_redis()
    sections: list[str] = []
    lines: list[str] = []
    failed = False
    try:
        bench = Bench(opts, server.url, procs)
        redis_version = bench.redis.info("server")["redis_version"]
        context = {"command": command_line(), "started": f"{started:%Y-%m-%d %H:%M} UTC",
                   "machine": machine(), "versions": versions(redis_version, systems)}
        print(f"redis-server {redis_version} at {server.url}; {opts.jobs:,} jobs; -c {opts.concurrency}; "
              f"{context['machine']}; load average {os.getloadavg()[0]:.2f}; logs in {log_dir}\n", flush=True)
        for number in range(opts.rounds):
            order = systems if number % 2 == 0 else systems[::-1]
            for kind in kinds:
                before = os.getloadavg()[0]
                with_latency = kind == latency_kind and not opts.skip_latency
                for system in order:
                    bench.measure(by_kind[kind][system.key], with_latency=with_latency,
                                  with_pipeline=system.key == "djwork")
                loads[kind].append((before, os.getloadavg()[0]))
        for kind in kinds:
            results = list(by_kind[kind].values())
            header, rows = build_rows(results)
            load = (loads[kind][0][0], loads[kind][-1][1])
            notes = [*skipped, *(f"{r.system.label}: {n}" for r in results for n in r.notes), *command_notes(results)]
            failed = failed or any(r.notes for r in results)
            body = "one INCR on bench:counter" if kind == "incr" else "no-op (one INCRBY 100 per 100 runs)"
            title = (f"--job {kind}: {body}, {opts.jobs:,} jobs, -c {opts.concurrency}, "
                     f"median of {opts.rounds} round(s)")
            print(f"\n{title}\n{text_table(header, rows)}")
            for note in notes:
                print(f"note: {note}")
            sections += [*heading(title, context, load), markdown_table(header, rows), "",
                         *(f"- {note}" for note in notes), ""]
        lines = targets(by_kind, latency_kind) if "sidekiq" in by_kind[kinds[0]] else []
        costs = results_cost(by_kind)
        if costs:
            print("\nwhat results cost djwork (RESULTS=True against the default, this run's medians):")
            for line in costs:
                print(f"  {line}")
            sections += ["## What results cost djwork in this run", "", *(f"- {line}" for line in costs), ""]
        if opts.io:
            before = os.getloadavg()[0]
            header, rows, checks = io_table(opts, "sidekiq" in by_kind[kinds[0]])
            title = f"--io: {opts.io_jobs:,} jobs each awaiting sleep({opts.io_sleep}), one worker process"
            print(f"\n{title}\n{text_table(header, rows)}")
            sections += [*heading(title, context, (before, os.getloadavg()[0])), markdown_table(header, rows), ""]
            lines += checks
        if opts.embedded:
            before = os.getloadavg()[0]
            text, checks = embedded(opts, procs, bench.env)
            title = f"--embedded: bench/embedded.py {opts.embedded_args}, a view at 100 req/s, worker idle vs. draining"
            print(f"\n{title}\n{text}")
            sections += [*heading(title, context, (before, os.getloadavg()[0])), "```", text, "```", ""]
            lines += checks
    finally:
        procs.stop_all()
        server.stop()

    if lines:
        print("\nissue #20 targets (djwork vs Sidekiq, this run):")
        for line in lines:
            print(f"  {line}")
        sections += ["## Issue #20's targets in this run", "", *(f"- {line}" for line in lines), ""]
    markdown = "\n".join([f"# djwork vs. other job systems ({started:%Y-%m-%d %H:%M} UTC)", "",
                          "x djwork = the system's number / djwork's. \"-\": the system has no bulk enqueue; "
                          "\"fail\": see the notes.", "",
                          *(f"- {s.label} {s.version}: {s.setup}" for s in systems), "", *sections])
    opts.output.parent.mkdir(parents=True, exist_ok=True)
    opts.output.write_text(markdown)
    print(f"\nwrote {opts.output}")
    if not opts.keep_logs and not failed:
        shutil.rmtree(log_dir, ignore_errors=True)
    else:
        print(f"worker and client logs kept in {log_dir}")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as interrupt:
        print(f"interrupted ({interrupt or 'Ctrl-C'}); every process this run started has been stopped",
              file=sys.stderr)
        sys.exit(130)
