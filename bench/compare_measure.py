"""bench/compare.py's measurements: enqueue rates, drains with CPU and Redis commands per job, pickup latency."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from dataclasses import dataclass, field

import redis
from common import ROOT, descendants, noop_target, tree_rss_kb
from compare_procs import Failure, Processes, System, tail
from cpu_per_job import cpu_seconds

COUNTER = "bench:counter"
LATENCY = "bench:latency"
# Each system's Redis LIST for queue "bench" (djwork shares Sidekiq's layout).
QUEUE_KEYS = {"djwork": "queue:bench", "sidekiq": "queue:bench", "rq": "rq:queue:bench", "celery": "bench",
              "dramatiq": "dramatiq:bench"}
POLL = 0.005  # seconds between two reads of the counter during a drain
SETTLE = 0.5  # seconds the CPU and command window stays open after the queue is empty: deferred flushes land


@dataclass
class Result:
    """One system's numbers for one job body; every measurement repeated per round, the table shows medians."""

    system: System
    job: str
    samples: dict[str, list[float]] = field(default_factory=dict)
    not_applicable: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    # "1p"/"2p" -> command -> (calls per job, us of Redis time per job), the last round's
    commands: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)

    def add(self, key: str, value: float) -> None:
        self.samples.setdefault(key, []).append(value)

    def values(self) -> dict[str, float | None]:
        """Median per key; None where the system has no such thing; a missing key is a failed measurement."""
        found: dict[str, float | None] = {key: statistics.median(v) for key, v in self.samples.items() if v}
        found.update(dict.fromkeys(self.not_applicable - set(found)))
        return found


@dataclass
class Drain:
    rate: float  # jobs/s over the measured window
    jobs: int  # completions the counter saw in the rate's window
    rss_kb: int
    worker_us: float  # the workers' process trees, user + sys CPU per job (/proc)
    redis_us: float  # redis-server user + sys CPU per job (INFO cpu)
    commands: float  # Redis commands per job (INFO commandstats calls), the bench's own polls left out
    per_command: dict[str, tuple[float, float]]  # command -> (calls per job, commandstats usec per job)
    kept_bytes: float  # Redis used_memory per drained job once drained, over the empty database
    keys_left: int  # keys in the database once drained


def process_cpu(pid: int) -> float:
    """user + sys seconds of a process and its descendants; one that just exited counts as 0, not an error."""
    total = 0.0
    for each in [pid, *descendants(pid)]:
        try:
            total += cpu_seconds(each)
        except (OSError, IndexError, ValueError):
            pass
    return total


def redis_counts(client: redis.Redis) -> tuple[float, dict[str, tuple[int, int]]]:
    """(redis-server's user + sys CPU seconds, (calls, usec) per command name): INFO cpu, INFO commandstats."""
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): (int(entry["calls"]), int(entry["usec"])) for name, entry in stats.items()}
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), calls


class Bench:
    def __init__(self, opts: argparse.Namespace, url: str, procs: Processes) -> None:
        self.opts = opts
        self.url = url
        self.procs = procs
        self.redis = redis.Redis.from_url(url)
        self.env = {**os.environ, "BENCH_REDIS_URL": url, "REDIS_URL": url, "PYTHONUNBUFFERED": "1",
                    "DJANGO_SETTINGS_MODULE": "bench.settings", "PYTHONPATH": str(ROOT)}
        self.empty_memory = 0  # used_memory of the flushed database before the last enqueue run

    def env_of(self, system: System) -> dict[str, str]:
        return {**self.env, **system.env}

    def counter(self) -> int:
        return int(self.redis.get(COUNTER) or 0)

    def run_client(self, system: System, action: str, count: int, deadline: float, job: str = "incr") -> dict:
        process = self.procs.start(system.client(action, count, self.opts, job), self.env_of(system),
                                   f"{system.key}-client-{action}-{job}", capture=True)
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
        return [self.procs.start(command, self.env_of(system), f"{system.key}-worker{processes}p-{index}")
                for index, command in enumerate(system.workers(processes, self.opts.concurrency, self.url))]

    def check_alive(self, workers: list[subprocess.Popen]) -> None:
        for worker in workers:
            if worker.poll() is not None:
                raise Failure(f"worker exited {worker.returncode}: {tail(worker.log)}")

    def enqueue(self, system: System, action: str, job: str) -> tuple[float, int]:
        """(jobs/s, jobs now in the queue) for one enqueue run on a flushed database."""
        self.redis.flushdb()
        self.empty_memory = data_memory(self.redis)
        result = self.run_client(system, action, self.opts.jobs, self.opts.deadline, job)
        return result["count"] / result["seconds"], result["total"]

    def pipeline(self) -> float:
        """jobs/s of the bare LPUSH + SADD pipeline loop (djwork's wire format, no framework), one thread."""
        self.redis.flushdb()
        djwork = System("djwork", "djwork", "", True, "")
        result = self.run_client(djwork, "pipeline", self.opts.jobs, self.opts.deadline)
        self.redis.flushdb()
        return result["count"] / result["seconds"]

    def drain(self, system: System, processes: int, total: int, job: str) -> Drain:
        """Drains `total` pre-loaded jobs. The rate's window runs from the first completion the counter shows
        to the target; the CPU and command counts' window opens at the same moment but closes only once the
        queue is empty and SETTLE seconds have passed, so the writes a worker defers (djwork flushes its
        history and stats every 0.25 s) are in it; they are divided by `total` minus the counter at the start."""
        target = total if job == "incr" else noop_target(total, processes)
        workers = self.start_workers(system, processes)
        try:
            startup = time.monotonic() + min(120.0, self.opts.deadline)
            while self.counter() == 0:
                self.check_alive(workers)
                if time.monotonic() > startup:
                    raise Failure("no job ran within the start-up deadline")
                time.sleep(0.001)
            redis_cpu, calls = redis_counts(self.redis)
            worker_cpu = sum(process_cpu(worker.pid) for worker in workers)
            began = time.perf_counter()
            first = done = self.counter()
            own = {"get": 1, "llen": 0}  # the bench's own reads inside the window, taken out of the command count
            deadline = time.monotonic() + self.opts.deadline
            while done < target:
                if own["get"] % 200 == 0:
                    self.check_alive(workers)
                if time.monotonic() > deadline:
                    raise Failure(f"drain passed the {self.opts.deadline:.0f} s deadline at {done:,} of {target:,}")
                time.sleep(POLL)
                done = self.counter()
                own["get"] += 1
            elapsed = time.perf_counter() - began
            while self.redis.llen(QUEUE_KEYS[system.program]):
                own["llen"] += 1
                if time.monotonic() > deadline:
                    raise Failure("the queue never emptied after the drain's target")
                time.sleep(POLL)
            own["llen"] += 1
            time.sleep(SETTLE)
            worker_cpu = sum(process_cpu(worker.pid) for worker in workers) - worker_cpu
            redis_after, calls_after = redis_counts(self.redis)
            rss = sum(tree_rss_kb(worker.pid) for worker in workers)
        finally:
            self.procs.stop(workers)
        # What the drained jobs left behind (result records, stats...), read once the workers and their
        # connections are gone, against the empty database before the enqueue.
        kept = data_memory(self.redis) - self.empty_memory
        keys_left = int(self.redis.dbsize())
        if done <= first:
            raise Failure(f"the window saw no completion ({first} -> {done})")
        jobs = total - first
        per_command = {}
        for name, (count, usec) in calls_after.items():
            count, usec = count - calls.get(name, (0, 0))[0], usec - calls.get(name, (0, 0))[1]
            mine = own.get(name, 0)
            if name == "info" or count - mine <= 0:  # INFO: the bench's own snapshots
                continue
            # The bench's own reads are taken out of the time too, in proportion (they cost what the workers' do).
            per_command[name] = ((count - mine) / jobs, usec * (count - mine) / count / jobs)
        return Drain((done - first) / elapsed, done - first, rss, worker_cpu / jobs * 1e6,
                     (redis_after - redis_cpu) / jobs * 1e6, sum(c for c, _ in per_command.values()), per_command,
                     kept / total, keys_left)

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

    def measure(self, result: Result, with_latency: bool, with_pipeline: bool) -> None:
        """One round for one system and job body: enqueue 1x1 + drain 1p, bulk + drain 2p, then the extras."""
        system, job = result.system, result.job

        def attempt(label: str, fn):
            try:
                return fn()
            except Failure as error:
                result.notes.append(f"{label}: {error}")
                print(f"  {label}: FAILED: {error}", flush=True)
                return None

        def record(drained: Drain, suffix: str) -> None:
            result.add(f"drain{suffix}", drained.rate)
            result.add(f"worker{suffix}", drained.worker_us)
            result.add(f"redis{suffix}", drained.redis_us)
            result.add(f"commands{suffix}", drained.commands)
            result.add(f"bytes{suffix}", drained.kept_bytes)
            result.commands[f"{suffix}p"] = drained.per_command
            print(f"  drain {suffix}p      {drained.rate:,.0f} jobs/s over {drained.jobs:,}; worker "
                  f"{drained.worker_us:.0f} us/job, redis-server {drained.redis_us:.1f} us/job, "
                  f"{drained.commands:.2f} commands/job ({top_commands(drained.per_command)}); "
                  f"Redis kept {drained.kept_bytes:,.0f} bytes/job in {drained.keys_left:,} keys", flush=True)

        print(f"{system.label} {system.version}, --job {job}", flush=True)
        # 0. the bare pipeline loop right before delay() (target 7): the machine's speed moves within minutes.
        if with_pipeline:
            rate = attempt("LPUSH+SADD pipeline loop", self.pipeline)
            if rate:
                result.add("pipeline", rate)
                print(f"  LPUSH+SADD pipeline loop {rate:,.0f} jobs/s", flush=True)
        # 1. one by one; the queue it leaves is the 1-process drain's load.
        single = attempt("enqueue 1x1", lambda: self.enqueue(system, "single", job))
        if single:
            result.add("enqueue", single[0])
            print(f"  enqueue 1x1   {single[0]:,.0f} jobs/s", flush=True)
            drained = attempt("drain 1p", lambda: self.drain(system, 1, single[1], job))
            if drained:
                record(drained, "1")
                result.add("rss", drained.rss_kb / 1024)
                print(f"  RSS after the 1p drain {drained.rss_kb / 1024:.1f} MB", flush=True)
        # 2. bulk where the system has it (else one by one again, untimed); the queue is the 2-process drain's load.
        if system.has_bulk:
            bulk = attempt("enqueue bulk", lambda: self.enqueue(system, "bulk", job))
            if bulk:
                result.add("bulk", bulk[0])
                print(f"  enqueue bulk  {bulk[0]:,.0f} jobs/s", flush=True)
        else:
            result.not_applicable.add("bulk")
            bulk = attempt("preload for drain 2p", lambda: self.enqueue(system, "single", job))
        if bulk:
            drained = attempt("drain 2p", lambda: self.drain(system, 2, bulk[1], job))
            if drained:
                record(drained, "2")
        # 3. pickup latency (the probe job is the same for every --job).
        if with_latency:
            latency = attempt("latency", lambda: self.latency(system))
            if latency:
                result.add("p50", latency[0])
                result.add("p99", latency[1])
                print(f"  latency       p50 {latency[0]:.2f} ms, p99 {latency[1]:.2f} ms", flush=True)
        self.redis.flushdb()


def data_memory(client: redis.Redis) -> int:
    """used_memory less the Lua scripts' cache: loaded by the first run of a fresh server and kept across FLUSHDB,
    it would count against whichever system ran first."""
    memory = client.info("memory")
    return int(memory["used_memory"]) - int(memory.get("used_memory_scripts", 0))


def top_commands(per_command: dict[str, tuple[float, float]], count: int = 6) -> str:
    """The `count` most frequent commands: calls per job and (commandstats) us per job. Script calls (eval,
    evalsha) are always shown: their inner commands are counted too, and their us include the inner ones'."""
    ranked = [item for item in sorted(per_command.items(), key=lambda item: -item[1][0]) if item[1][0] >= 0.005]
    shown = ranked[:count] + [item for item in ranked[count:] if item[0] in ("eval", "evalsha")]
    return ", ".join(f"{name} {calls:.2f} ({us:.1f} us)" for name, (calls, us) in shown)


def percentile(values: list[float], fraction: float) -> float:
    return values[min(len(values) - 1, int(len(values) * fraction))]
