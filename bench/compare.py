"""djwork next to Sidekiq, RQ, Celery and Dramatiq: same Redis, same job body, one run, one table.

    ./dev bench compare [--jobs 20000] [--systems djwork,sidekiq,rq,celery,dramatiq] [--skip-latency] [--quick]
    .venv/bin/python bench/compare.py --quick          # 5,000 jobs, 400 probes: a smoke run

Starts one private redis-server (djwork.testing.redis_server, never the
machine's Redis) and measures each installed system in turn, never two at
once, with a FLUSHDB before every measurement. Every job body is one INCR on
bench:counter (bench/jobs.py for djwork, bench/others/counter.py for the Python
systems, bench/ruby/jobs.rb for Sidekiq). Per system:

  enqueue 1x1   jobs/s pushing --jobs jobs one at a time from one thread
                (djwork delay(), Sidekiq::Client.push in Ruby, RQ Queue.enqueue,
                Celery task.delay, Dramatiq actor.send);
  enqueue bulk  jobs/s in batches of --batch (djwork delay_many, Sidekiq push_bulk,
                RQ enqueue_many); "-" where the system has no bulk enqueue;
  drain 1p/2p   jobs/s a worker drains a pre-loaded queue of --jobs jobs, timed
                from its first INCR to its last, with 1 process of -c threads and
                with 2 such processes;
  p50/p99       pickup latency with one idle 1-process worker while the client
                pushes --probes probe jobs at --rate per second: time.time() at the
                start of the job minus time.time() at the push, in ms;
  RSS           resident memory of the 1-process worker (its whole process tree)
                right after the 1-process drain.

Each "x djwork" column divides the system's number by djwork's (higher is better
for jobs/s, lower for latency and RSS). Clients run as their own processes
(bench/others/client.py, bench/ruby/client.rb) and time only the pushes. A
system whose packages are missing is skipped with a note; every measurement
has a deadline (--deadline), and every process started is killed at the end.
Prints the table and writes it as markdown to bench/results/compare-latest.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from common import ROOT, descendants, start_redis, tree_rss_kb

PY = sys.executable
BIN = Path(PY).parent
COUNTER = "bench:counter"
LATENCY = "bench:latency"
SYSTEMS = ["djwork", "sidekiq", "rq", "celery", "dramatiq"]


class Failure(Exception):
    """One measurement failed or ran past its deadline: noted in the table, the run goes on."""


# --------------------------------------------------------------------------- processes


class Processes:
    """Every child this run starts, each in its own session (process group), so each can be ended whole."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.live: list[subprocess.Popen] = []
        self.count = 0

    def start(self, command: list[str], env: dict[str, str], name: str, capture: bool = False) -> subprocess.Popen:
        self.count += 1
        log = self.log_dir / f"{self.count:02d}-{name}.log"
        with open(log, "wb") as handle:
            process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if capture else handle, stderr=handle, start_new_session=True,
            )
        process.log = log  # type: ignore[attr-defined]
        self.live.append(process)
        return process

    def stop(self, processes: list[subprocess.Popen], grace: float = 15.0) -> None:
        """TERM each group, wait up to `grace` seconds, then KILL the groups and any descendant that left them."""
        groups = [p for p in processes if p.poll() is None]
        stragglers = {pid for p in groups for pid in descendants(p.pid)}
        for process in groups:
            signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in groups:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for process in processes:
            signal_group(process.pid, signal.SIGKILL)  # forked children still in the group
            if process.poll() is None:
                process.kill()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                pass
            if process.stdout is not None:
                process.stdout.close()
        for pid in stragglers:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.live = [p for p in self.live if p not in processes]

    def stop_all(self) -> None:
        self.stop(list(self.live), grace=5.0)


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass


def tail(path: Path, lines: int = 6) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


# --------------------------------------------------------------------------- systems


@dataclass
class System:
    key: str
    label: str
    version: str
    has_bulk: bool
    setup: str  # how the workers are configured, for the notes

    def client(self, action: str, count: int, opts: argparse.Namespace) -> list[str]:
        if self.key == "sidekiq":
            return ["ruby", str(ROOT / "bench/ruby/client.rb"), action, str(count), str(opts.batch), str(opts.rate)]
        return [PY, "-m", "bench.others.client", self.key, action, str(count),
                "--batch", str(opts.batch), "--rate", str(opts.rate)]

    def workers(self, processes: int, concurrency: int, url: str) -> list[list[str]]:
        """One command per OS process to start (a command may fork more itself)."""
        c = str(concurrency)
        if self.key == "djwork":
            command = [PY, str(ROOT / "manage.py"), "runworkers", "-c", c, "-q", "bench"]
            return [command + (["--processes", str(processes)] if processes > 1 else [])]
        if self.key == "sidekiq":
            return [["sidekiq", "-r", str(ROOT / "bench/ruby/jobs.rb"), "-c", c, "-q", "bench"]] * processes
        if self.key == "rq":
            return [[str(BIN / "rq"), "worker", "--url", url, "--worker-class", "rq.worker.SimpleWorker",
                     "--logging_level", "WARNING", "--path", str(ROOT), "bench"]] * processes
        if self.key == "celery":
            return [[PY, "-m", "celery", "-A", "bench.others.celery_app", "worker", "--pool", "threads", "-c", c,
                     "-Q", "bench", "-l", "warning", "--without-gossip", "--without-mingle", "--without-heartbeat",
                     "-n", f"bench{index}@%h"] for index in range(processes)]
        if self.key == "dramatiq":
            return [[PY, "-m", "dramatiq", "bench.others.dramatiq_actors", "--processes", str(processes),
                     "--threads", c, "-Q", "bench"]]
        raise ValueError(self.key)


def version_of(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def detect(key: str, concurrency: int) -> System | str:
    """The System, or why it is skipped."""
    c = concurrency
    if key == "djwork":
        return System(key, "djwork", version_of("djwork"), True,
                      f"`manage.py runworkers -c {c} -q bench` (reliable fetch, LOG_JOBS off); "
                      f"2 processes: `--processes 2` (one supervisor forking 2 workers)")
    if key == "sidekiq":
        if not (shutil.which("ruby") and shutil.which("sidekiq")):
            return "ruby or the sidekiq executable not found (apt-get install ruby ruby-sidekiq)"
        probe = subprocess.run(["ruby", "-e", 'require "sidekiq"; print Sidekiq::VERSION'],
                               capture_output=True, text=True, timeout=60)
        if probe.returncode != 0:
            return f"ruby cannot load sidekiq: {probe.stderr.strip()[-200:]}"
        return System(key, "Sidekiq", probe.stdout.strip(), True,
                      f"`sidekiq -r bench/ruby/jobs.rb -c {c} -q bench` (OSS basic fetch, BRPOP), logger at WARN; "
                      "2 processes: two such processes")
    python_module = {"rq": "rq", "celery": "celery", "dramatiq": "dramatiq"}[key]
    if importlib.util.find_spec(python_module) is None:
        return f"`{python_module}` is not installed in this venv (.venv/bin/pip install {python_module})"
    if key == "rq":
        if not (BIN / "rq").exists():
            return f"the rq executable is missing from {BIN}"
        return System(key, "RQ", version_of("rq"), True,
                      "`rq worker --worker-class rq.worker.SimpleWorker bench` (no fork per job; RQ has no threads), "
                      "logging at WARNING, default result_ttl; 2 processes: two such workers")
    if key == "celery":
        return System(key, "Celery", version_of("celery"), False,
                      f"`celery worker --pool threads -c {c} -Q bench -l warning --without-gossip --without-mingle "
                      "--without-heartbeat`, Redis broker, no result backend (task_ignore_result); "
                      "2 processes: two such workers")
    return System(key, "Dramatiq", version_of("dramatiq"), False,
                  f"`dramatiq bench.others.dramatiq_actors --processes 1 --threads {c} -Q bench`, RedisBroker, "
                  "default middleware; 2 processes: `--processes 2`")


# --------------------------------------------------------------------------- measurements


@dataclass
class Result:
    system: System
    values: dict[str, float | None] = field(default_factory=dict)  # None: not applicable
    notes: list[str] = field(default_factory=list)


class Bench:
    def __init__(self, opts: argparse.Namespace, url: str, procs: Processes) -> None:
        self.opts = opts
        self.url = url
        self.procs = procs
        self.redis = redis.Redis.from_url(url)
        self.env = {**os.environ, "BENCH_REDIS_URL": url, "REDIS_URL": url, "PYTHONUNBUFFERED": "1",
                    "DJANGO_SETTINGS_MODULE": "bench.settings", "PYTHONPATH": str(ROOT)}

    def counter(self) -> int:
        return int(self.redis.get(COUNTER) or 0)

    def run_client(self, system: System, action: str, count: int, deadline: float) -> dict:
        process = self.procs.start(system.client(action, count, self.opts), self.env,
                                   f"{system.key}-client-{action}", capture=True)
        try:
            out, _ = process.communicate(timeout=deadline)
        except subprocess.TimeoutExpired:
            self.procs.stop([process], grace=1)
            raise Failure(f"{action} enqueue passed the {deadline:.0f} s deadline") from None
        self.procs.stop([process], grace=1)
        if process.returncode != 0:
            raise Failure(f"client {action} exited {process.returncode}: {tail(process.log)}")
        try:
            return json.loads(out.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise Failure(f"client {action} printed no result: {tail(process.log)}") from None

    def start_workers(self, system: System, processes: int) -> list[subprocess.Popen]:
        return [self.procs.start(command, self.env, f"{system.key}-worker{processes}p-{index}")
                for index, command in enumerate(system.workers(processes, self.opts.concurrency, self.url))]

    def check_alive(self, workers: list[subprocess.Popen]) -> None:
        for worker in workers:
            if worker.poll() is not None:
                raise Failure(f"worker exited {worker.returncode}: {tail(worker.log)}")

    def enqueue(self, system: System, action: str) -> tuple[float, int]:
        """(jobs/s, jobs now in the queue) for one enqueue run on a flushed database."""
        self.redis.flushdb()
        result = self.run_client(system, action, self.opts.jobs, self.opts.deadline)
        return result["count"] / result["seconds"], result["total"]

    def drain(self, system: System, processes: int, total: int) -> tuple[float, int]:
        """(jobs/s, worker tree RSS in KB) draining `total` pre-loaded jobs; times first INCR to last."""
        workers = self.start_workers(system, processes)
        try:
            startup = time.monotonic() + min(120.0, self.opts.deadline)
            while self.counter() == 0:
                self.check_alive(workers)
                if time.monotonic() > startup:
                    raise Failure("no job ran within the start-up deadline")
                time.sleep(0.001)
            began = time.perf_counter()
            deadline = time.monotonic() + self.opts.deadline
            polls = 0
            while (done := self.counter()) < total:
                polls += 1
                if polls % 200 == 0:
                    self.check_alive(workers)
                if time.monotonic() > deadline:
                    raise Failure(f"drain passed the {self.opts.deadline:.0f} s deadline at {done:,} of {total:,}")
                time.sleep(0.005)
            elapsed = time.perf_counter() - began
            rss = sum(tree_rss_kb(worker.pid) for worker in workers)
            # The clock starts at the first INCR, so it covers total - 1 completions.
            return (total - 1) / elapsed, rss
        finally:
            self.procs.stop(workers)

    def latency(self, system: System) -> tuple[float, float]:
        """(p50, p99) pickup latency in ms with one idle 1-process worker and probes at --rate per second."""
        self.redis.flushdb()
        probes = self.opts.probes
        workers = self.start_workers(system, 1)
        try:
            sending = probes / self.opts.rate
            self.run_client(system, "probe", probes, min(120.0, self.opts.deadline) + sending * 2 + 10)
            deadline = time.monotonic() + self.opts.deadline
            while self.redis.llen(LATENCY) < probes:
                self.check_alive(workers)
                if time.monotonic() > deadline:
                    raise Failure(f"latency: {self.redis.llen(LATENCY)} of {probes} probes ran before the deadline")
                time.sleep(0.02)
            values = sorted(float(value) * 1000 for value in self.redis.lrange(LATENCY, 0, -1))
            return percentile(values, 0.50), percentile(values, 0.99)
        finally:
            self.procs.stop(workers)

    def measure(self, system: System) -> Result:
        result = Result(system)
        values = result.values

        def attempt(label: str, fn):
            try:
                return fn()
            except Failure as error:
                result.notes.append(f"{label}: {error}")
                print(f"  {label}: FAILED: {error}", flush=True)
                return None

        print(f"{system.label} {system.version}", flush=True)
        # 1. one by one; the queue it leaves is the 1-process drain's load.
        single = attempt("enqueue 1x1", lambda: self.enqueue(system, "single"))
        if single:
            values["enqueue"] = single[0]
            print(f"  enqueue 1x1   {single[0]:,.0f} jobs/s", flush=True)
            drained = attempt("drain 1p", lambda: self.drain(system, 1, single[1]))
            if drained:
                values["drain1"], values["rss"] = drained[0], drained[1] / 1024
                print(f"  drain 1p      {drained[0]:,.0f} jobs/s, RSS {drained[1] / 1024:.1f} MB", flush=True)
        # 2. bulk where the system has it (else one by one again, untimed); the queue is the 2-process drain's load.
        if system.has_bulk:
            bulk = attempt("enqueue bulk", lambda: self.enqueue(system, "bulk"))
            if bulk:
                values["bulk"] = bulk[0]
                print(f"  enqueue bulk  {bulk[0]:,.0f} jobs/s", flush=True)
        else:
            values["bulk"] = None
            bulk = attempt("preload for drain 2p", lambda: self.enqueue(system, "single"))
        if bulk:
            drained = attempt("drain 2p", lambda: self.drain(system, 2, bulk[1]))
            if drained:
                values["drain2"] = drained[0]
                print(f"  drain 2p      {drained[0]:,.0f} jobs/s", flush=True)
        # 3. pickup latency.
        if not self.opts.skip_latency:
            latency = attempt("latency", lambda: self.latency(system))
            if latency:
                values["p50"], values["p99"] = latency
                print(f"  latency       p50 {latency[0]:.2f} ms, p99 {latency[1]:.2f} ms", flush=True)
        self.redis.flushdb()
        return result


def percentile(values: list[float], fraction: float) -> float:
    return values[min(len(values) - 1, int(len(values) * fraction))]


# --------------------------------------------------------------------------- table

COLUMNS = [  # key, heading, format
    ("enqueue", "enqueue 1x1 /s", "{:,.0f}"),
    ("bulk", "enqueue bulk /s", "{:,.0f}"),
    ("drain1", "drain 1p /s", "{:,.0f}"),
    ("drain2", "drain 2p /s", "{:,.0f}"),
    ("p50", "p50 ms", "{:.2f}"),
    ("p99", "p99 ms", "{:.2f}"),
    ("rss", "RSS MB", "{:.1f}"),
]


def build_rows(results: list[Result], skip_latency: bool) -> tuple[list[str], list[list[str]]]:
    columns = [c for c in COLUMNS if not (skip_latency and c[0] in ("p50", "p99"))]
    base = next((r for r in results if r.system.key == "djwork"), None)
    header = ["system"]
    for _key, heading, _fmt in columns:
        header += [heading, "x djwork"]
    rows = []
    for result in results:
        row = [f"{result.system.label} {result.system.version}"]
        for key, _heading, fmt in columns:
            if key not in result.values:
                row += ["fail", ""]
                continue
            value = result.values[key]
            if value is None:
                row += ["-", ""]
                continue
            reference = base.values.get(key) if base else None
            ratio = f"{value / reference:.2f}x" if reference else ""
            row += [fmt.format(value), ratio]
        rows.append(row)
    return header, rows


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "  ".join(  # noqa: E731
        cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(cells))
    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(row) for row in rows)])


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, help="jobs per enqueue and drain run (default 20000; --quick 5000)")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"comma-separated subset of {','.join(SYSTEMS)} (default: all that are installed)")
    parser.add_argument("--skip-latency", action="store_true", help="skip the pickup-latency measurement")
    parser.add_argument("--quick", action="store_true", help="smoke run: 5,000 jobs, 400 probes")
    parser.add_argument("--concurrency", type=int, default=10, help="threads per worker process (default 10)")
    parser.add_argument("--batch", type=int, default=1000, help="bulk enqueue batch size (default 1000)")
    parser.add_argument("--rate", type=float, default=200, help="latency probes per second (default 200)")
    parser.add_argument("--probes", type=int, help="latency probes (default 1000; --quick 400)")
    parser.add_argument("--deadline", type=float, default=300,
                        help="seconds any one measurement may take before it is abandoned (default 300)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the workers' and clients' logs")
    parser.add_argument("--output", type=Path, default=ROOT / "bench/results/compare-latest.md",
                        help="markdown copy of the table (default bench/results/compare-latest.md)")
    opts = parser.parse_args()
    opts.jobs = opts.jobs or (5_000 if opts.quick else 20_000)
    opts.probes = opts.probes or (400 if opts.quick else 1000)
    wanted = [name.strip().lower() for name in opts.systems.split(",") if name.strip()]
    unknown = sorted(set(wanted) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}")

    def terminate(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)

    systems: list[System] = []
    skipped: list[str] = []
    for key in [name for name in SYSTEMS if name in wanted]:
        found = detect(key, opts.concurrency)
        if isinstance(found, System):
            systems.append(found)
        else:
            skipped.append(f"{key} skipped: {found}")
            print(f"{key}: skipped ({found})", flush=True)

    log_dir = Path(tempfile.mkdtemp(prefix="djwork-compare-"))
    procs = Processes(log_dir)
    load_before = os.getloadavg()
    started = dt.datetime.now(dt.UTC)
    server = start_redis()
    results: list[Result] = []
    try:
        bench = Bench(opts, server.url, procs)
        redis_version = bench.redis.info("server")["redis_version"]
        print(f"redis-server {redis_version} at {server.url}; {opts.jobs:,} jobs; -c {opts.concurrency}; "
              f"nproc {os.cpu_count()}; load average {load_before[0]:.2f}; logs in {log_dir}\n", flush=True)
        for system in systems:
            results.append(bench.measure(system))
    finally:
        procs.stop_all()
        server.stop()
    load_after = os.getloadavg()

    header, rows = build_rows(results, opts.skip_latency)
    notes = list(skipped)
    for result in results:
        notes += [f"{result.system.label}: {note}" for note in result.notes]
    print()
    print(text_table(header, rows))
    for note in notes:
        print(f"note: {note}")

    machine = (f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), redis-server {redis_version} on "
               f"loopback, Python {sys.version.split()[0]}; load average {load_before[0]:.2f} before, "
               f"{load_after[0]:.2f} after")
    setup = "\n".join(f"- {r.system.label} {r.system.version}: {r.system.setup}" for r in results)
    markdown = "\n".join([
        f"# djwork vs. other job systems ({started:%Y-%m-%d %H:%M} UTC)",
        "",
        f"`{' '.join(['bench/compare.py', *sys.argv[1:]])}` — {opts.jobs:,} jobs per enqueue/drain run, "
        f"{opts.concurrency} threads per worker process, bulk batches of {opts.batch:,}, "
        f"latency: {opts.probes:,} probes at {opts.rate:.0f}/s"
        + (" (skipped)" if opts.skip_latency else "") + ".",
        f"Machine: {machine}.",
        "",
        markdown_table(header, rows),
        "",
        "x djwork = the system's number / djwork's (jobs/s: higher is better; ms and MB: lower is better). "
        "\"-\": the system has no bulk enqueue; \"fail\": see the notes.",
        "",
        setup,
        *([""] + [f"- note: {note}" for note in notes] if notes else []),
        "",
    ])
    opts.output.parent.mkdir(parents=True, exist_ok=True)
    opts.output.write_text(markdown)
    print(f"\nwrote {opts.output}")
    if not opts.keep_logs and not any(result.notes for result in results):
        shutil.rmtree(log_dir, ignore_errors=True)
    else:
        print(f"worker and client logs kept in {log_dir}")
    return 1 if any(r.notes for r in results) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as interrupt:
        print(f"interrupted ({interrupt or 'Ctrl-C'}); every process this run started has been stopped",
              file=sys.stderr)
        sys.exit(130)
