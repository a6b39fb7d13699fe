"""bench/compare.py's plumbing: the processes it starts (each in its own process group) and the systems it knows."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import ROOT, descendants

PY = sys.executable
BIN = Path(PY).parent
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
    env: dict[str, str] = field(default_factory=dict)  # more environment for its clients and workers

    @property
    def program(self) -> str:
        """The system that runs: "djwork" for "djwork+results" too, a variant in its settings only."""
        return self.key.partition("+")[0]

    def client(self, action: str, count: int, opts: argparse.Namespace, job: str = "incr") -> list[str]:
        if self.program == "sidekiq":
            return ["ruby", str(ROOT / "bench/ruby/client.rb"), action, str(count), str(opts.batch), str(opts.rate),
                    job]
        return [PY, "-m", "bench.others.client", self.program, action, str(count), "--job", job,
                "--batch", str(opts.batch), "--rate", str(opts.rate)]

    def workers(self, processes: int, concurrency: int, url: str) -> list[list[str]]:
        """One command per OS process to start (a command may fork more itself)."""
        c = str(concurrency)
        if self.program == "djwork":
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
                      f"`manage.py runworkers -c {c} -q bench` (the defaults: reliable fetch and history on, RESULTS "
                      f"off; LOG_JOBS off); 2 processes: `--processes 2` (one supervisor forking 2 workers)")
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
    if key == "djwork+results":
        return System(key, "djwork, results on", version_of("djwork"), True,
                      "as djwork, with RESULTS=True: a result record per job (HSET + PEXPIREAT in the ack), kept "
                      "RESULT_TTL", env={"BENCH_RESULTS": "1"})
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
