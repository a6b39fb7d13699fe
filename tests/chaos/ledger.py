"""Counting what a chaos scenario did to its jobs, from the ledger the jobs write (tests/chaos/jobs.py).

Nothing here is assumed from the fault's design: a job counts as started or
finished only if it recorded so, and as lost if it never finished and is not
where the scenario expects it (the poison pill in ``dead``). Recovery times
come from the jobs' own event times and the moments the scenario struck:

* **caught**: the jobs a fault interrupted. A killed process's: started in it,
  not finished in it. A fault that hits every process (Redis restart,
  connection kills): running at the moment it struck.
* **resumed**: from the end of a fault to the first finish of a job that
  *started* after it (work flows again);
* **recovered**: from the end of a fault to the last finish of the jobs it
  caught (every interrupted job is done, re-run or not);
* **drained**: from the first fault to the last finish of any job.

For several faults, resumed and recovered report the worst one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tests.chaos import jobs

# Where a job can wait in Redis (lists), and the sets a job can end up in.
LIST_PATTERNS = ("queue:*", "djwork:isolated:*", "djwork:inprogress:*")
SETS = ("schedule", "retry", "dead")


@dataclass(frozen=True)
class Fault:
    at: float  # epoch seconds it struck
    ended: float  # when it was over (the restarted server answered); ``at`` for a kill
    pids: frozenset[int] | None = None  # the processes it killed; None: it hit every process


@dataclass(frozen=True)
class Run:
    jid: str
    pid: int
    started: float
    finished: float | None  # None: never finished in that process (killed, or still running)


@dataclass
class Ledger:
    started: dict[str, int]
    finished: dict[str, int]
    runs: list[Run]

    @classmethod
    def read(cls, client: Any) -> Ledger:
        pipe = client.pipeline(transaction=True)
        pipe.hgetall(jobs.STARTED)
        pipe.hgetall(jobs.FINISHED)
        pipe.lrange(jobs.EVENTS, 0, -1)
        started, finished, events = pipe.execute()
        return cls(_counts(started), _counts(finished), _runs(events))

    def runs_of(self, jid: str) -> list[Run]:
        return [run for run in self.runs if run.jid == jid]

    def last_finishes(self) -> dict[str, float]:
        """jid -> when it last finished (jobs that never finished are absent)."""
        last: dict[str, float] = {}
        for run in self.runs:
            if run.finished is not None:
                last[run.jid] = max(run.finished, last.get(run.jid, run.finished))
        return last


def _counts(raw: dict[bytes, bytes]) -> dict[str, int]:
    return {key.decode(): int(value) for key, value in raw.items()}


def _runs(events: list[bytes]) -> list[Run]:
    """Pair each finish with the start before it in the same process (the ledger's list is in arrival order)."""
    open_runs: dict[tuple[str, int], list[float]] = defaultdict(list)
    runs: list[Run] = []
    for event in events:
        kind, jid, pid_text, at_text = event.decode().split()
        pid, at = int(pid_text), float(at_text)
        if kind == "start":
            open_runs[(jid, pid)].append(at)
        elif open_runs[(jid, pid)]:
            runs.append(Run(jid, pid, open_runs[(jid, pid)].pop(0), at))
    runs += [Run(jid, pid, at, None) for (jid, pid), starts in open_runs.items() for at in starts]
    return sorted(runs, key=lambda run: run.started)


def caught_by(ledger: Ledger, fault: Fault) -> set[str]:
    if fault.pids is not None:
        return {run.jid for run in ledger.runs if run.pid in fault.pids and run.finished is None}
    return {run.jid for run in ledger.runs
            if run.started <= fault.at and (run.finished is None or run.finished > fault.at)}


def job_of(raw: bytes) -> dict[str, Any]:
    try:
        job = json.loads(raw)
    except ValueError:
        return {}
    return job if isinstance(job, dict) else {}


def whereabouts(client: Any, jids: set[str]) -> dict[str, str]:
    """jid -> where Redis holds it now ("queue:default", "dead (djwork.PoisonPill)", ...), or "nowhere"."""
    found: dict[str, str] = {}
    for pattern in LIST_PATTERNS:
        for key in client.scan_iter(pattern, _type="list"):
            for raw in client.lrange(key, 0, -1):
                jid = job_of(raw).get("jid")
                if jid in jids:
                    found[jid] = key.decode()
    for name in SETS:
        for raw in client.zrange(name, 0, -1):
            job = job_of(raw)
            if job.get("jid") in jids:
                found[job["jid"]] = f"{name} ({job.get('error_class', '')}: {job.get('error_message', '')})"
    return {jid: found.get(jid, "nowhere") for jid in jids}


def leftovers(client: Any) -> int:
    """Jobs still waiting anywhere (a queue, an isolated list, an in-progress list, schedule, retry)."""
    total = client.zcard("schedule") + client.zcard("retry")
    for pattern in LIST_PATTERNS:
        total += sum(client.llen(key) for key in client.scan_iter(pattern, _type="list"))
    return total


@dataclass
class Outcome:
    """What came of every job of one scenario run."""

    scenario: str
    jobs: int
    lost: dict[str, str]  # jid -> where it is (never finished, not where the scenario expects it)
    finished_twice: list[str]
    started_twice: list[str]
    dead: dict[str, str]  # jid -> where the jobs expected in dead are ("dead (<error class>...)")
    unexpected_dead: dict[str, str]  # jid -> its dead entry, for every other job in dead (finished or not)
    resumed: float | None
    recovered: float | None
    drained: float | None
    drained_in_time: bool
    faults: list[Fault]
    caught: set[str]
    ledger: Ledger
    notes: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # what a scenario observed besides counts (exit codes...)

    def report(self) -> str:
        """Every count, the lost jobs' whereabouts and the scenario's notes: the message of a failed assertion."""
        lines = [f"{self.scenario}: {self.jobs} jobs, lost {len(self.lost)}, finished twice "
                 f"{len(self.finished_twice)}, started twice {len(self.started_twice)}, caught by the "
                 f"{len(self.faults)} fault(s) {len(self.caught)}, drained in time: {self.drained_in_time}",
                 f"resumed {_seconds(self.resumed)}, recovered {_seconds(self.recovered)}, "
                 f"drained {_seconds(self.drained)}"]
        lines += [f"lost {jid}: {place}; runs {self.ledger.runs_of(jid)}" for jid, place in
                  sorted(self.lost.items())[:10]]
        lines += [f"finished twice {jid}: {self.ledger.runs_of(jid)}" for jid in self.finished_twice[:10]]
        lines += [f"expected in dead {jid}: {place}" for jid, place in self.dead.items()]
        lines += [f"unexpected in dead {jid}: {place}; runs {self.ledger.runs_of(jid)}"
                  for jid, place in self.unexpected_dead.items()]
        lines += [f"{name}: {value}" for name, value in self.facts.items()]
        return "\n".join(lines + self.notes)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def outcome(scenario: str, ledger_client: Any, work: Any, jids: list[str], faults: list[Fault], *,
            drained_in_time: bool, expected_dead: frozenset[str] = frozenset(),
            notes: list[str] | None = None, facts: dict[str, Any] | None = None) -> Outcome:
    """Count it all: ``work`` is the workers' Redis (where unfinished jobs are looked for)."""
    ledger = Ledger.read(ledger_client)
    unfinished = {jid for jid in jids if not ledger.finished.get(jid)}
    places = whereabouts(work, unfinished | set(expected_dead))
    dead = {jid: places[jid] for jid in expected_dead}
    buried = {job_of(raw).get("jid"): raw.decode(errors="replace") for raw in work.zrange("dead", 0, -1)}
    unexpected_dead = {str(jid): raw for jid, raw in buried.items() if jid not in expected_dead}
    lost = {jid: places[jid] for jid in unfinished
            if not (jid in expected_dead and places[jid].startswith("dead "))}
    caught_per_fault = [caught_by(ledger, fault) - expected_dead for fault in faults]
    last_finishes = ledger.last_finishes()
    recovered = resumed = None
    for fault, caught in zip(faults, caught_per_fault, strict=True):
        if caught and caught <= last_finishes.keys():
            latest = max(last_finishes[jid] for jid in caught)
            recovered = max(recovered or 0.0, max(0.0, latest - fault.ended))
        after = [run.finished for run in ledger.runs if run.started >= fault.ended and run.finished is not None]
        if after:
            resumed = max(resumed or 0.0, min(after) - fault.ended)
    all_finishes = [run.finished for run in ledger.runs if run.finished is not None]
    drained = max(all_finishes) - faults[0].at if faults and all_finishes else None
    return Outcome(
        scenario=scenario, jobs=len(jids), lost=lost,
        finished_twice=sorted(jid for jid, count in ledger.finished.items() if count > 1),
        started_twice=sorted(jid for jid, count in ledger.started.items() if count > 1),
        dead=dead, unexpected_dead=unexpected_dead, resumed=resumed, recovered=recovered, drained=drained,
        drained_in_time=drained_in_time,
        faults=faults, caught=set().union(*caught_per_fault) if faults else set(), ledger=ledger,
        notes=list(notes or []), facts=dict(facts or {}))
