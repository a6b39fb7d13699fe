"""What keeps each of djwork's Redis keys from growing without end: its TTL or its cap (docs/keys.md, Bounds).

A key written once per job (or holding one member per job) with neither a TTL
nor a cap grows with every job ever run, until Redis is full and, with the
default ``noeviction``, refuses pushes. Each key of djwork.redis.keys is declared
here with what adds to it and what bounds it; tests/test_key_bounds.py walks
djwork.redis.keys and fails on a key declared nowhere, on a per-job key with no
bound, on docs/keys.md saying otherwise, and on a key a real drain leaves in
Redis without the TTL declared for it.

Kept beside djwork.redis.keys (as djwork.redis.key_types is): the names stay in one file a
Cluster mode would change, the bounds in one table the docs mirror.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

# What adds a key or a member: only JOB grows with traffic; the others with the size of the deployment.
JOB = "job"
PROCESS = "process"
QUEUE = "queue"
CLASS = "job class"
LIMITER = "limiter"
ENTRY = "periodic entry"
TIME = "minute or day"
INCIDENT = "incident"
FIXED = "nothing (one value)"

# docs/keys.md's placeholders and what each stands for in a real key name.
_PLACEHOLDERS = {
    "<identity>": r"[^:|]+:\d+:[0-9a-f]+",  # hostname:pid:random hex (djwork/worker/process.py)
    "YYYY-MM-DD": r"\d{4}-\d\d-\d\d",
    "YYYYMMDD": r"\d{8}",
    "YYMMDD": r"\d{6}",
    "DD": r"\d\d",
    "HH": r"\d\d",
    "H:MM": r"\d{1,2}:\d\d",
    "H:M": r"\d{1,2}:\d",
}
_TOKEN = re.compile("|".join(re.escape(token) for token in _PLACEHOLDERS) + r"|<[^>]+>")


@dataclass(frozen=True)
class KeyBound:
    """One key (or family of keys) as docs/keys.md names it, what makes it grow and what bounds it."""

    name: str
    grows_with: str
    ttl: str = ""  # what expires it, in words; "" for none
    cap: str = ""  # what removes its members or caps their number; "" for none

    @property
    def per_job(self) -> bool:
        return self.grows_with == JOB

    @property
    def bounded(self) -> bool:
        return bool(self.ttl or self.cap)

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        parts, last = [], 0
        for match in _TOKEN.finditer(self.name):
            parts.append(re.escape(self.name[last:match.start()]))
            parts.append(_PLACEHOLDERS.get(match.group(0), ".+?"))
            last = match.end()
        parts.append(re.escape(self.name[last:]))
        return re.compile("".join(parts))

    def matches(self, key: str) -> bool:
        return self.pattern.fullmatch(key) is not None


def bound_of(key: str) -> KeyBound | None:
    """The declaration a real key name falls under; None for a key djwork does not declare."""
    return next((bound for bound in BOUNDS if bound.matches(key)), None)


_BATCH_TTL = "30 days from the last add; 24 h once success fired"
_LIMITER_TTL = "the limiter's ttl (90 days) from its last use"

BOUNDS: tuple[KeyBound, ...] = (
    # Sidekiq's keys.
    KeyBound("queues", QUEUE),
    KeyBound("queue:<name>", JOB, cap="each job leaves it when fetched"),
    KeyBound("schedule", JOB, cap="each job leaves it when due"),
    KeyBound("retry", JOB, cap="each job leaves it at its next try; retries end in dead"),
    KeyBound("dead", JOB, cap="DEAD_MAX_JOBS (10,000), DEAD_MAX_BYTES (64 MiB) and DEAD_TIMEOUT (180 days)"),
    KeyBound("djwork:dead-bytes", FIXED),
    KeyBound("processes", PROCESS, cap="removed on a clean stop; pruned once its hash expired"),
    KeyBound("<identity>", PROCESS, ttl="60 s, renewed by each beat"),
    KeyBound("<identity>:work", PROCESS, ttl="60 s, renewed by each beat"),
    KeyBound("<identity>:workers", PROCESS, ttl="60 s, renewed by each beat"),
    KeyBound("<identity>-signals", PROCESS, ttl="60 s"),
    KeyBound("stat:processed", FIXED),
    KeyBound("stat:failed", FIXED),
    KeyBound("stat:processed:YYYY-MM-DD", TIME, ttl="5 years"),
    KeyBound("stat:failed:YYYY-MM-DD", TIME, ttl="5 years"),
    KeyBound("paused", QUEUE),
    KeyBound("process_cleanup", FIXED, ttl="60 s"),
    KeyBound("dear-leader", FIXED, ttl="30 s, renewed by the leader"),
    # djwork's own keys.
    KeyBound("djwork:stat:expired", FIXED),
    KeyBound("djwork:inprogress", PROCESS, cap="a list leaves it when emptied or recovered"),
    KeyBound("djwork:inprogress:<identity>|<queue>", JOB, cap="each job leaves it at its ack; a dead process's "
             "jobs by orphan recovery"),
    KeyBound("djwork:beats", PROCESS, cap="removed on a clean stop or by orphan recovery"),
    KeyBound("djwork:orphan-counts", JOB, cap="a job's field is deleted at its ack or death"),
    KeyBound("djwork:isolated:<queue>", JOB, cap="each job leaves it when taken"),
    KeyBound("djwork:lane:<queue>|<lane>", JOB, cap="each job leaves it when taken"),
    KeyBound("djwork:lanes:<queue>", QUEUE, cap="19 lane numbers at most; a lane leaves it when a fetch empties it"),
    KeyBound("djwork:finished-late", JOB, ttl="7 days from the last write", cap="a field is deleted when a fetch "
             "drops the copy"),
    # A cluster's per-queue companions (docs/cluster.md, Keys): the same bounds as their single-server names.
    KeyBound("djwork:orphan-counts:{queue:<name>}", JOB, cap="a job's field is deleted at its ack or death"),
    KeyBound("djwork:finished-late:{queue:<name>}", JOB, ttl="7 days from the last write", cap="a field is "
             "deleted when a fetch drops the copy"),
    KeyBound("djwork:pushed:{queue:<name>}", JOB, cap="entries older than an hour dropped at each push_once"),
    KeyBound("djwork:dead-bytes:{dead}", FIXED),
    KeyBound("djwork:pill-burials:{dead}", INCIDENT, cap="entries older than an hour dropped at each burial"),
    KeyBound("djwork:clearing:{<key>}:<random>", INCIDENT, ttl="1 day"),
    KeyBound("djwork:result-notify:{djwork:result:<id>}", JOB, ttl="60 s"),
    KeyBound("djwork:periodic:history:{djwork:periodic:state:<id>}", JOB, cap="the entry's last 100 runs and skips"),
    KeyBound("djwork:result-waiter:{djwork:result:<id>}", JOB, ttl="60 s, renewed by each waiter",
             cap="its field is deleted when the result is written"),
    KeyBound("djwork:history", JOB, cap="HISTORY_MAX_LENGTH runs (10,000)"),
    KeyBound("djwork:result:<id>", JOB, ttl="RESULT_TTL (24 h)"),
    KeyBound("djwork:iteration:<jid>", JOB, ttl="ITERABLE_STATE_TTL (30 days), deleted when the iteration "
             "completes"),
    KeyBound("djwork:result-notify:<id>", JOB, ttl="60 s"),
    KeyBound("djwork:result-waiters", JOB, ttl="60 s, renewed by each waiter", cap="a field is deleted when its "
             "result is written"),
    KeyBound("djwork:revoked", JOB, ttl="RESULT_TTL from the last revoke", cap="entries past their hold are "
             "dropped at each revoke"),
    KeyBound("djwork:quarantine:<key>:<ms>:<random>", INCIDENT, ttl="30 days", cap="5 copies per key"),
    KeyBound("djwork:quarantine", INCIDENT, cap="1,000 entries; past 30 days dropped"),
    KeyBound("djwork:key-guard:reported", INCIDENT, cap="1,000 entries; each leaves at its check"),
    KeyBound("djwork:clearing:<random>", INCIDENT, ttl="1 day"),
    # Batches (a batch's keys hold one member per job).
    KeyBound("batches", JOB, cap="entries older than 31 days dropped at each new batch and when read"),
    KeyBound("b-<bid>", JOB, ttl=_BATCH_TTL),
    KeyBound("b-<bid>-jids", JOB, ttl=_BATCH_TTL),
    KeyBound("b-<bid>-failed", JOB, ttl=_BATCH_TTL),
    KeyBound("b-<bid>-died", JOB, ttl=_BATCH_TTL),
    KeyBound("b-<bid>-order", JOB, ttl=_BATCH_TTL),
    KeyBound("b-<bid>-results", JOB, ttl=_BATCH_TTL),
    # A cluster's batch companions (docs/cluster.md, Batches): the same bounds as their single-server names.
    KeyBound("{b-<bid>}-jids", JOB, ttl=_BATCH_TTL),
    KeyBound("{b-<bid>}-failed", JOB, ttl=_BATCH_TTL),
    KeyBound("{b-<bid>}-died", JOB, ttl=_BATCH_TTL),
    KeyBound("{b-<bid>}-order", JOB, ttl=_BATCH_TTL),
    KeyBound("{b-<bid>}-results", JOB, ttl=_BATCH_TTL),
    KeyBound("djwork:batch-sweep", JOB, cap="a batch's entry leaves at the leader's sweep once nothing is pending; "
             "entries older than 31 days dropped at each mark"),
    KeyBound("djwork:saved-group:<id>", JOB, ttl="RESULT_TTL (24 h) from the save"),
    # Rate limiters.
    KeyBound("djwork:limiters", LIMITER, cap="expired names swept at each acquisition"),
    KeyBound("djwork:limiter-holdings", JOB, cap="a slot leaves it at its release; a dead process's by the reaper"),
    KeyBound("djwork:limiter-holdings:{djwork:limiter:<name>}", JOB,
             cap="a slot leaves it at its release; a dead process's by the reaper"),
    KeyBound("djwork:limiter:<name>", LIMITER, ttl=_LIMITER_TTL),
    KeyBound("djwork:limiter-stats:<name>", LIMITER, ttl=_LIMITER_TTL),
    KeyBound("djwork:limiter-state:<name>", JOB, ttl=_LIMITER_TTL, cap="the limit (a window's log is trimmed "
             "to its interval)"),
    KeyBound("djwork:limiter-holders:<name>", JOB, ttl=_LIMITER_TTL, cap="the limit (held slots)"),
    KeyBound("djwork:limiter-owners:<name>", JOB, ttl=_LIMITER_TTL, cap="the limit (held slots)"),
    KeyBound("djwork:limiter-waiters:<name>", JOB, ttl=_LIMITER_TTL, cap="a waiter leaves at its grant or "
             "deadline"),
    KeyBound("djwork:limiter-waiting:<name>", JOB, ttl=_LIMITER_TTL, cap="a waiter leaves at its grant or "
             "deadline"),
    KeyBound("djwork:limiter-wake:<name>|<token>", JOB, ttl="10 s"),
    KeyBound("djwork:limiter-lost:<name>", JOB, ttl="the limiter's ttl, at least a day", cap="marks older than "
             "a day dropped at each mark"),
    # Periodic jobs.
    KeyBound("djwork:periodic:entries", ENTRY),
    KeyBound("djwork:periodic:state:<id>", ENTRY),
    KeyBound("djwork:periodic:history:<id>", JOB, cap="the entry's last 100 runs and skips"),
    KeyBound("djwork:periodic-running:<id>", JOB, ttl="lock_ttl (24 h)", cap="deleted at the run's ack or death"),
    # Unique jobs.
    KeyBound("unique:<digest>", JOB, ttl="unique_for", cap="deleted when the job ends"),
    # Execution metrics (one field or key per class and minute, not per job).
    KeyBound("j|YYMMDD|H:MM", TIME, ttl="8 h"),
    KeyBound("j|YYMMDD|H:M", TIME, ttl="72 h"),
    KeyBound("h|<Class>-<D>-<H>:<M>", TIME, ttl="8 h"),
    KeyBound("j|YYYYMMDD|<H>:<M>", TIME, ttl="8 h"),  # Sidekiq 7's names for the same minute
    KeyBound("<Class>-DD-HH:<M>", TIME, ttl="8 h"),
    KeyBound("YYYYMMDD-marks", TIME, ttl="90 days"),
    KeyBound("deploylock-<label>", INCIDENT, ttl="60 s"),
    KeyBound("djwork:metrics:totals", CLASS),
    KeyBound("djwork:metrics:histograms", CLASS),
    KeyBound("djwork:qm|YYMMDD|H:MM", TIME, ttl="8 h"),
    KeyBound("djwork:qm|YYMMDD|H:M", TIME, ttl="72 h"),
)
