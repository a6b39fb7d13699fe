"""bench/compare.py's two extra tables: --io (issue #20 target 5) and --embedded (target 6).

Both reuse the stand-alone benchmarks rather than repeat them: --io calls bench/async_jobs.py's drains
(one djwork process running coroutine jobs on its event loop, Sidekiq -c 50 running the same sleep on
threads); --embedded runs bench/embedded.py (bench/embedded_gunicorn.py) as a child and reads its table.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess

from common import ROOT, setup_django
from compare_procs import PY, Processes, tail


def io_table(opts: argparse.Namespace, with_sidekiq: bool) -> tuple[list[str], list[list[str]], list[str]]:
    """(header, rows, target lines): --io-jobs jobs awaiting sleep(--io-sleep) each, one process per system."""
    setup_django()  # async_jobs pushes djwork's sleep_async jobs from this process
    from async_jobs import djwork_drain, sidekiq_drain

    jobs, sleep, places = opts.io_jobs, opts.io_sleep, opts.io_places
    header = ["system", "setup", "jobs/s", "bound jobs/s", "peak RSS MB"]
    rows, checks = [], []
    saved = os.environ.get("BENCH_ASYNC_CONCURRENCY")
    try:
        rate, rss_kb = djwork_drain(jobs, sleep, places, opts.concurrency)
        rows.append(["djwork", f"1 process, -c {opts.concurrency}, ASYNC_CONCURRENCY {places}, async def job",
                     f"{rate:,.0f}", f"{places / sleep:,.0f}", f"{rss_kb / 1024:.1f}"])
        met = rate >= 2000 and rss_kb / 1024 <= 100
        checks.append(f"target 5, I/O-bound jobs [>= 2,000 jobs/s, RSS <= 100 MB in one process]: "
                      f"{rate:,.0f} jobs/s, {rss_kb / 1024:.1f} MB: {'met' if met else 'NOT met'}")
    except SystemExit as error:  # async_jobs reports a drain that never ends this way
        rows.append(["djwork", "1 process", "fail", "", ""])
        checks.append(f"target 5: the djwork drain failed: {error}")
    finally:
        if saved is None:
            os.environ.pop("BENCH_ASYNC_CONCURRENCY", None)
        else:
            os.environ["BENCH_ASYNC_CONCURRENCY"] = saved
    if with_sidekiq:
        try:
            found = sidekiq_drain(jobs, sleep, 50)
        except SystemExit as error:
            found = str(error)
        if isinstance(found, str):
            rows.append(["Sidekiq", "1 process, -c 50, SleepJob", "fail", "", ""])
            checks.append(f"Sidekiq I/O row: {found}")
        else:
            rows.append(["Sidekiq", "1 process, -c 50, SleepJob (threads)", f"{found[0]:,.0f}", f"{50 / sleep:,.0f}",
                         f"{found[1] / 1024:.1f}"])
    return header, rows, checks


def embedded(opts: argparse.Namespace, procs: Processes, env: dict[str, str]) -> tuple[str, list[str]]:
    """(bench/embedded.py's printed table, the target line): its own private Redis, its own deadline."""
    command = [PY, str(ROOT / "bench/embedded.py"), "--jobs", str(opts.embedded_jobs),
               "--requests", str(opts.embedded_requests), *shlex.split(opts.embedded_args)]
    process = procs.start(command, env, "embedded", capture=True)
    try:
        out, _ = process.communicate(timeout=opts.deadline * 3)
    except subprocess.TimeoutExpired:
        procs.stop([process], grace=5)
        return "", [f"target 6: bench/embedded.py passed its {opts.deadline * 3:.0f} s deadline"]
    procs.stop([process], grace=1)
    text = out.decode(errors="replace").strip()
    if process.returncode != 0:
        return text, [f"target 6: bench/embedded.py exited {process.returncode}: {tail(process.log)}"]
    found = re.search(r"draining p99 / idle p99\s+([0-9.]+)x", text)
    if not found:
        return text, ["target 6: no 'draining p99 / idle p99' row in bench/embedded.py's output"]
    ratio = float(found.group(1))
    drain = re.search(r"no-op jobs\s+([0-9,]+) jobs/s", text)
    rate = f", drain {drain.group(1)} jobs/s" if drain else ""
    return text, [f"target 6, embedded in gunicorn [view p99 draining <= 2x idle]: {ratio:.2f}x{rate}: "
                  f"{'met' if ratio <= 2.0 else 'NOT met'}"]
