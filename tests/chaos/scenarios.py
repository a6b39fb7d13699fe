"""The chaos scenarios: a fault struck at real ``runworkers`` processes mid-drain, then every job counted.

One function per scenario, shared by the tests (tests/chaos/test_*.py: small
sizes, then assertions on the ``Outcome``) and ``bench/chaos.py`` (larger
sizes, the published table): both measure the same thing. A scenario waits
for observable events only (ledger counts, log lines, registered children),
and returns an ``Outcome`` even when the drain did not finish in time, so
the bench can report the loss instead of crashing on it.

Worker processes run with tests/settings_worker.py's fast clocks (a beat a
second, ORPHAN_THRESHOLD 3 s, REAPER_INTERVAL 1 s), so the recovery times
are those of that configuration: with the defaults (60 s / 30 s) a crashed
process's jobs come back about a minute later.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis as redis_py
from django.conf import settings
from django.test import override_settings

from djwork.testing.redis_server import RedisServer
from tests.chaos import jobs
from tests.chaos.ledger import Fault, Ledger, Outcome, leftovers, outcome
from tests.helpers_worker import Worker, Workers, wait_until

QUEUE = "default"
HEARTBEAT_FAILED = "djwork heartbeat tick failed"  # logged per failed beat until an outage is declared
OUTAGE_DECLARED = "is unreachable ("  # djwork/redis/outage.py: the outage's one line; beats fail at DEBUG after it
REACHABLE_AGAIN = "Redis reachable again"  # the heartbeat's first success after failures that made no outage
BACK_AFTER = "Redis is back after"  # the end of a declared outage


def saw_redis_fail(log: str) -> int:
    return log.count(HEARTBEAT_FAILED) + log.count(OUTAGE_DECLARED)


def saw_redis_back(log: str) -> bool:
    return REACHABLE_AGAIN in log or BACK_AFTER in log
# Faults that hit every process at once (a Redis restart, connection kills) must
# not also make a live process look dead: its jobs would run twice because the
# test's ORPHAN_THRESHOLD (3 s) is short, not because of the fault. 10 s keeps
# the defaults' ratio to the beat (60 s to 10 s) closer.
PATIENT = {"ORPHAN_THRESHOLD": 10}


@dataclass
class Chaos:
    """What a scenario works with: a pool of worker processes, the ledger the jobs count into, a directory."""

    pool: Workers
    ledger_url: str
    directory: Path

    def __post_init__(self) -> None:
        self.ledger = redis_py.Redis.from_url(self.ledger_url)

    @property
    def redis_url(self) -> str:
        """The pool's own server, which is also the ledger's."""
        return self.pool.redis_url

    def start(self, *args: str, label: str, redis_url: str | None = None,
              overrides: dict[str, Any] | None = None) -> Worker:
        """``runworkers *args``; its jobs count into this scenario's ledger."""
        previous = os.environ.get(jobs.LEDGER_ENV)
        os.environ[jobs.LEDGER_ENV] = self.ledger_url  # read once, by Workers, when it builds the child's env
        try:
            return self.pool.start(*args, label=label, redis_url=redis_url,
                                   overrides={"LOG_JOBS": False, **(overrides or {})})
        finally:
            if previous is None:
                os.environ.pop(jobs.LEDGER_ENV, None)
            else:
                os.environ[jobs.LEDGER_ENV] = previous

    def finished(self) -> int:
        return int(self.ledger.hlen(jobs.FINISHED))

    def running(self) -> dict[int, int]:
        """pid -> jobs running in it now (by the ledger)."""
        return {int(pid): int(count) for pid, count in self.ledger.hgetall(jobs.RUNNING).items()}


@contextlib.contextmanager
def djwork_on(url: str) -> Iterator[None]:
    """Enqueue to ``url`` (a scenario's own server) instead of the settings' one."""
    with override_settings(DJWORK={**settings.DJWORK, "REDIS_URL": url}):
        yield


def enqueue(url: str, job: Any, calls: list[tuple[Any, ...]]) -> list[str]:
    with djwork_on(url):
        return [ref.jid for start in range(0, len(calls), 5_000)
                for ref in job.delay_many(calls[start:start + 5_000])]


def wait_drained(chaos: Chaos, work: redis_py.Redis, jids: list[str], timeout: float,
                 expected_dead: frozenset[str] = frozenset(), tend: Callable[[], None] | None = None) -> bool:
    """Every job finished (or in dead, if expected there) and nothing left to run anywhere: no copy of a
    job waits in a queue, an isolated or in-progress list, retry or schedule to run a second time later.
    Gives up early when dead holds more than expected (an end state: that job won't come back).
    ``tend`` runs at every poll (to restart a worker that died, for one)."""
    wanted = len(jids) - len(expected_dead)

    def state() -> str | None:
        if tend is not None:
            tend()
        try:
            if work.zcard("dead") > len(expected_dead):
                return "unexpected jobs in dead"
            if chaos.finished() < wanted or leftovers(work) or work.zcard("dead") < len(expected_dead):
                return None
        except redis_py.ConnectionError:
            return None
        return "drained"

    try:
        return wait_until(state, timeout, "the drain", interval=0.1) == "drained"
    except AssertionError:
        return False


def registered(worker: Worker, work: redis_py.Redis) -> None:
    worker.identity(work, timeout=30)


class DurableRedis(RedisServer):
    """A private server with every write on disk before its reply (appendonly, appendfsync always):
    what a kill -9 of it and a restart on the same port keep is everything it acknowledged."""

    def start(self, timeout: float = 20.0) -> DurableRedis:
        if self.process is not None and self.process.poll() is None:
            return self
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(self.binary), *self._listen_arguments(), "--save", "", "--appendonly", "yes",
                 "--appendfsync", "always", "--dir", str(self.directory), "--protected-mode", "no"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def answers() -> bool:
            if self.process is None or self.process.poll() is not None:
                raise AssertionError(f"redis-server exited at start; see {self.log_path}")
            try:
                return self._answers_ping()  # -LOADING while the AOF is read back: not yet
            except OSError:
                return False

        wait_until(answers, timeout, f"redis-server at {self.url}", interval=0.02)
        return self


# --- the scenarios ---------------------------------------------------------------------------------
def kill_worker(chaos: Chaos, *, jobs_count: int = 300, concurrency: int = 5, seconds: float = 0.05,
                timeout: float = 60) -> Outcome:
    """kill -9 of one of two workers under load; the survivor's reaper brings its jobs back."""
    work = redis_py.Redis.from_url(chaos.redis_url)
    victim = chaos.start("-c", str(concurrency), label="victim")
    survivor = chaos.start("-c", str(concurrency), label="survivor")
    for worker in (victim, survivor):
        registered(worker, work)
    jids = enqueue(chaos.redis_url, jobs.work, [(seconds,)] * jobs_count)
    wait_until(lambda: chaos.finished() >= jobs_count // 3 and chaos.running().get(victim.pid, 0) > 0, 60,
               "a third of the jobs done, with the victim running some")
    at = time.time()
    victim.send(signal.SIGKILL)
    victim.wait_exit(10)
    drained = wait_drained(chaos, work, jids, timeout)
    return outcome("kill -9 of a worker", chaos.ledger, work, jids, [Fault(at, at, frozenset({victim.pid}))],
                   drained_in_time=drained, facts={"survivor recovered": "recovered" in survivor.log()})


def kill_swarm_children(chaos: Chaos, *, kills: int = 5, concurrency: int = 5, seconds: float = 0.2,
                        batch: int = 100, timeout: float = 90) -> Outcome:
    """``--processes 2``: kill -9 a child ``kills`` times in a row, each time once both children run jobs.

    The oldest live child is the one killed, so the slots take turns (a slot that crashes young is
    respawned after a growing backoff). The queue is topped up while the kills go on, so every kill
    lands under load."""
    work = redis_py.Redis.from_url(chaos.redis_url)
    swarm = chaos.start("--processes", "2", "-c", str(concurrency), overrides={"TIMEOUT": 3}, label="swarm")
    jids: list[str] = []
    seen: list[int] = []  # child pids, oldest first
    killed: set[int] = set()

    def target() -> int | None:
        if not swarm.alive():
            raise AssertionError(f"the swarm exited:\n{swarm.log()[-3000:]}")
        if work.llen(f"queue:{QUEUE}") < batch // 2:
            jids.extend(enqueue(chaos.redis_url, jobs.work, [(seconds,)] * batch))
        live = set(swarm.children())
        seen.extend(pid for pid in sorted(live) if pid not in seen)
        candidates = [pid for pid in seen if pid in live and pid not in killed]
        running = chaos.running()
        # Both slots have a child that has started jobs; the oldest is running one now.
        if len(candidates) < 2 or not all(pid in running for pid in candidates):
            return None
        return candidates[0] if running[candidates[0]] > 0 else None

    faults = []
    for kill in range(kills):
        pid = wait_until(target, 60, f"a busy child to kill ({kill + 1} of {kills})")
        at = time.time()
        os.kill(pid, signal.SIGKILL)
        killed.add(pid)
        faults.append(Fault(at, at, frozenset({pid})))
    drained = wait_drained(chaos, work, jids, timeout)
    respawns = swarm.log().count("died (signal 9)")
    return outcome(f"{kills} kills of a swarm child", chaos.ledger, work, jids, faults, drained_in_time=drained,
                   facts={"child deaths by signal 9 in the swarm log": respawns})


def redis_restart(chaos: Chaos, *, jobs_count: int = 300, concurrency: int = 5, seconds: float = 0.05,
                  timeout: float = 90) -> Outcome:
    """kill -9 of the workers' Redis mid-drain, then a restart on the same port from its append-only file.

    The workers' server is a dedicated one with persistence on (the suite's
    own can't be restarted); the jobs count into the ledger on another server."""
    server = DurableRedis(directory=str(chaos.directory / "durable-redis")).start()
    try:
        work = redis_py.Redis.from_url(server.url)
        workers = [chaos.start("-c", str(concurrency), label=f"restart-{n}", redis_url=server.url,
                               overrides=PATIENT) for n in (1, 2)]
        for worker in workers:
            registered(worker, work)
        jids = enqueue(server.url, jobs.work, [(seconds,)] * jobs_count)
        wait_until(lambda: chaos.finished() >= jobs_count // 3, 60, "a third of the jobs done")
        failed_before = [saw_redis_fail(worker.log()) for worker in workers]
        at = time.time()
        server.kill()
        # Down until every worker has seen it: each logs a failed beat.
        wait_until(lambda: all(saw_redis_fail(worker.log()) > before
                               for worker, before in zip(workers, failed_before, strict=True)), 30,
                   "every worker to log a failed heartbeat or the outage")
        server.start()
        ended = time.time()
        drained = wait_drained(chaos, work, jids, timeout)
        # Each worker's heartbeat logs its return (it may still be backing off when the drain ends).
        with contextlib.suppress(AssertionError):
            wait_until(lambda: all(saw_redis_back(worker.log()) for worker in workers), 30,
                       "every worker to log that Redis is back")
        back = sum(saw_redis_back(worker.log()) for worker in workers)
        return outcome("Redis restart (kill -9, AOF fsync always)", chaos.ledger, work, jids,
                       [Fault(at, ended)], drained_in_time=drained,
                       facts={"outage seconds": round(ended - at, 2), "workers that logged 'reachable again'": back,
                              "workers": len(workers)})
    finally:
        server.stop()


def connection_kills(chaos: Chaos, *, jobs_count: int = 500, concurrency: int = 5, seconds: float = 0.1,
                     period: float = 0.2, duration: float = 3.0, timeout: float = 60) -> Outcome:
    """``CLIENT KILL TYPE normal`` every ``period`` seconds for ``duration`` seconds mid-drain: every
    connection of every worker (pooled, fetch, blocked takers) is cut, over and over."""
    server = RedisServer(directory=str(chaos.directory / "killed-connections")).start()
    try:
        work = redis_py.Redis.from_url(server.url)
        workers = [chaos.start("-c", str(concurrency), label=f"cut-{n}", redis_url=server.url,
                               overrides=PATIENT) for n in (1, 2)]
        for worker in workers:
            registered(worker, work)
        jids = enqueue(server.url, jobs.work, [(seconds,)] * jobs_count)
        wait_until(lambda: chaos.finished() >= jobs_count // 5, 60, "a fifth of the jobs done")
        killer = redis_py.Redis.from_url(server.url)  # SKIPME: its own connection survives its kills
        faults, cut = [], 0
        next_round = time.monotonic()
        end = next_round + duration
        while next_round < end:
            at = time.time()
            cut += int(killer.client_kill_filter(_type="normal", skipme=True))
            faults.append(Fault(at, at))
            next_round += period
            time.sleep(max(0.0, next_round - time.monotonic()))  # the fault's pace, not a wait for a result
        still_queued = work.llen(f"queue:{QUEUE}")
        drained = wait_drained(chaos, work, jids, timeout)
        return outcome(f"connections killed every {period * 1000:.0f} ms for {duration:.0f} s", chaos.ledger,
                       work, jids, faults, drained_in_time=drained,
                       facts={"rounds": len(faults), "connections cut": cut,
                              "jobs still queued when the kills stopped": still_queued})
    finally:
        server.stop()


def poison_pill(chaos: Chaos, *, bystanders: int = 30, seconds: float = 1.0, concurrency: int = 5,
                processes: int = 2, timeout: float = 120) -> Outcome:
    """One job that kills its process (os._exit) queued among bystanders: only it may end in dead
    (``djwork.PoisonPill``); every bystander must run.

    ``processes=2``: on a swarm of two children, respawned by their parent.
    ``processes=1``: one standalone worker at a time, the next started when
    one dies; every job recovered together then runs in the same process
    again, so a bystander that keeps being caught with the pill shows for sure.
    The pill waits (up to ``seconds``) until the other slots of its process are busy."""
    work = redis_py.Redis.from_url(chaos.redis_url)
    # All queued before the workers start, the pill halfway: it runs while bystanders run beside it and
    # more are queued behind it, so its first crash catches bystanders.
    jids = enqueue(chaos.redis_url, jobs.work, [(seconds,)] * (bystanders // 2))
    pill = enqueue(chaos.redis_url, jobs.poison, [(min(concurrency - 1, bystanders), seconds)])
    jids += pill + enqueue(chaos.redis_url, jobs.work, [(seconds,)] * (bystanders - bystanders // 2))
    overrides = {"ORPHAN_THRESHOLD": 2, "HEARTBEAT_INTERVAL": 0.5, "TIMEOUT": 3}
    started = [chaos.start(*(["--processes", str(processes)] if processes > 1 else []), "-c", str(concurrency),
                           label="swarm" if processes > 1 else "single-1", overrides=overrides)]

    def replace_the_dead_worker() -> None:
        if processes == 1 and not started[-1].alive():
            started.append(chaos.start("-c", str(concurrency), label=f"single-{len(started) + 1}",
                                       overrides=overrides))

    expected_dead = frozenset(pill)
    drained = wait_drained(chaos, work, jids, timeout, expected_dead, tend=replace_the_dead_worker)
    # The faults are the pill's runs: each killed the process it ran in.
    crashes = [Fault(run.started, run.started, frozenset({run.pid})) for run in Ledger.read(chaos.ledger).runs
               if run.jid == pill[0]]
    if processes > 1:
        deaths = started[0].log().count("died (code 1)")
    else:
        deaths = sum(worker.process.poll() == 1 for worker in started)
    return outcome(f"poison pill among bystanders, {processes} process(es)", chaos.ledger, work, jids, crashes,
                   drained_in_time=drained, expected_dead=expected_dead,
                   facts={"poison pill runs": len(crashes), "processes that exited with code 1": deaths})


def term_with_long_jobs(chaos: Chaos, *, stuck: int = 2, late: int = 2, short: int = 40, deadline: float = 1.0,
                        seconds: float = 0.05, timeout: float = 60) -> Outcome:
    """TERM while ``stuck`` jobs outlast the shutdown deadline (TIMEOUT) and ``late`` ones finish just
    after it (the moment the requeue has pushed them back); the next worker runs what was pushed back."""
    work = redis_py.Redis.from_url(chaos.redis_url)
    concurrency = stuck + late
    stopping = chaos.start("-c", str(concurrency), overrides={"TIMEOUT": deadline}, label="stopping")
    registered(stopping, work)
    jids = enqueue(chaos.redis_url, jobs.work, [(seconds,)] * (short // 2))
    long_ones = enqueue(chaos.redis_url, jobs.long_first_run, [(60.0, seconds)] * stuck)
    late_ones = enqueue(chaos.redis_url, jobs.finish_when_pushed_back, [(QUEUE, 30.0)] * late)
    jids += long_ones + late_ones + enqueue(chaos.redis_url, jobs.work, [(seconds,)] * (short - short // 2))
    wait_until(lambda: all(chaos.ledger.hget(jobs.STARTED, jid) for jid in long_ones + late_ones), 60,
               "every long job running")
    at = time.time()
    stopping.send(signal.SIGTERM)
    code = stopping.wait_exit(deadline + 30)
    following = chaos.start("-c", str(concurrency), label="next")
    drained = wait_drained(chaos, work, jids, timeout)
    ledger = Ledger.read(chaos.ledger)
    runs = [run for jid in late_ones for run in ledger.runs_of(jid) if run.pid == stopping.pid]
    pushed = [line for line in stopping.log().splitlines() if "pushed" in line or "late" in line]
    return outcome("TERM with jobs longer than TIMEOUT", chaos.ledger, work, jids,
                   [Fault(at, at, frozenset({stopping.pid}))], drained_in_time=drained,
                   notes=pushed[-6:],
                   facts={"stopping worker exit code": code, "long jobs": set(long_ones), "late jobs": set(late_ones),
                          "late jobs finished in the stopping worker": sum(r.finished is not None for r in runs),
                          "next worker alive": following.alive()})

