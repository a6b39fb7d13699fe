"""Jobs the chaos scenarios run (tests/chaos/scenarios.py): each records every start and finish of itself.

Workers import this module by its dotted path (``tests.chaos.jobs.work``), as
they do tests/worker_jobs.py: they run from the repository root, so the
``tests`` package is importable. Counts go to the *ledger*, a Redis named by
``DJWORK_CHAOS_LEDGER_URL`` (falling back to the worker's own server,
``DJWORK_TEST_REDIS_URL``): a scenario that restarts the workers' Redis or
kills its connections keeps the ledger on another server, so the fault can't
touch the counting (a count whose reply was cut would otherwise be retried,
or lost, and report a duplicate or a loss that never happened).

One MULTI per event: the per-jid count (``STARTED`` / ``FINISHED``, HINCRBY),
the number of jobs running per pid (``RUNNING``, what a scenario waits on
before a kill) and a line in ``EVENTS`` (``start|finish <jid> <pid> <time>``)
from which the recovery times are computed.
"""

from __future__ import annotations

import os
import threading
import time

import redis as redis_py

import djwork

LEDGER_ENV = "DJWORK_CHAOS_LEDGER_URL"
STARTED = "chaos:started"  # HASH jid -> runs started
FINISHED = "chaos:finished"  # HASH jid -> runs finished
RUNNING = "chaos:running"  # HASH pid -> jobs running in that process now
EVENTS = "chaos:events"  # LIST "start|finish <jid> <pid> <epoch seconds>", oldest first
KEYS = (STARTED, FINISHED, RUNNING, EVENTS)

_client: redis_py.Redis | None = None
_client_pid = 0
_client_lock = threading.Lock()


def ledger() -> redis_py.Redis:
    """This process's ledger client, made once per pid (a swarm child must not share its parent's socket)."""
    global _client, _client_pid
    with _client_lock:
        if _client is None or _client_pid != os.getpid():
            url = os.environ.get(LEDGER_ENV) or os.environ["DJWORK_TEST_REDIS_URL"]
            _client, _client_pid = redis_py.Redis.from_url(url), os.getpid()
        return _client


def _record(kind: str, jid: str) -> int:
    """Record one event; returns how many times this job has now started (or finished)."""
    pid = os.getpid()
    pipe = ledger().pipeline(transaction=True)
    pipe.hincrby(STARTED if kind == "start" else FINISHED, jid, 1)
    pipe.hincrby(RUNNING, str(pid), 1 if kind == "start" else -1)
    pipe.rpush(EVENTS, f"{kind} {jid} {pid} {time.time():.6f}")
    return int(pipe.execute()[0])


# retry=0: a job that fails goes to dead at once, where a scenario's report finds
# it, instead of waiting out a retry backoff longer than the scenario.
@djwork.job(bind=True, retry=0)
def work(self, seconds: float) -> None:
    _record("start", self.request.jid)
    time.sleep(seconds)
    _record("finish", self.request.jid)


@djwork.job(bind=True, retry=0)
def long_first_run(self, seconds: float, rerun_seconds: float) -> None:
    """Outlasts any shutdown deadline the first time; a rerun is short, so the drain after it ends soon."""
    runs = _record("start", self.request.jid)
    time.sleep(seconds if runs == 1 else rerun_seconds)
    _record("finish", self.request.jid)


@djwork.job(bind=True, retry=0)
def finish_when_pushed_back(self, queue: str, limit: float) -> None:
    """Runs until the shutdown requeue has pushed its own copy back to ``queue`` (on the worker's Redis,
    which is the ledger in the scenario using it), then finishes at once: a job finishing just after
    the shutdown deadline. A rerun finishes at once."""
    jid = self.request.jid
    if _record("start", jid) == 1:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and not any(jid.encode() in raw for raw in
                                                      ledger().lrange(f"queue:{queue}", 0, -1)):
            time.sleep(0.005)
    _record("finish", jid)


@djwork.job(bind=True, retry=0)
def poison(self, company: int, limit: float) -> None:
    """Kills whatever process runs it, every time (its start is recorded; it never finishes).

    It first waits (up to ``limit`` seconds) until ``company`` other jobs run
    in its process, so each crash catches bystanders, as a real one running
    among busy threads would. Past ``limit`` it still waits, up to ``limit`` more, for at least one: bystanders
    as long as ``limit`` that started with it finish at its deadline, and a crash then, before their
    replacements started, caught none (seen under load). Isolated, it runs alone and ends at the second limit."""
    _record("start", self.request.jid)
    pid = str(os.getpid())
    started = time.monotonic()

    def running_here() -> int:
        return int(ledger().hget(RUNNING, pid) or 0)  # this job included

    while time.monotonic() < started + limit and running_here() <= company:
        time.sleep(0.01)
    while time.monotonic() < started + 2 * limit and running_here() <= 1:
        time.sleep(0.01)
    os._exit(1)
