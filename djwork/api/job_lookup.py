"""One job by jid, wherever it is now: running, queued, scheduled, retry or dead, with its recent runs.

Running and queued are looked up with the Locks page's bounded search
(``unique_locks.locate``: the in-progress lists and work hashes in full, each
queue's oldest and newest jobs); the three sorted sets with a ZSCAN for the
jid, which reads each set whole on the server. A job found nowhere is "gone"
when every place was read in full, else "unknown": it may sit in the middle
of a queue longer than the search reads.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from djwork.api.history import History, Run
from djwork.api.records import JobRecord
from djwork.api.sorted_sets import DeadSet, RetrySet, ScheduledSet
from djwork.api.unique_locks import locate
from djwork.redis import lanes

RUNS_SHOWN = 20
SETS = (("scheduled", ScheduledSet), ("retry", RetrySet), ("dead", DeadSet))


@dataclass(frozen=True)
class JobWhereabouts:
    jid: str
    where: str  # running | queued | scheduled | retry | dead | gone | unknown
    job: JobRecord | None  # the payload where it was found
    at: dt.datetime | None = None  # in a set: when it runs (scheduled), is retried (retry) or died (dead)
    address: str = ""  # in a set: its "<score>-<jid>" address, for the set's actions
    runs: list[Run] = field(default_factory=list)  # newest first, from the execution history


def find_job(jid: str, runs: int = RUNS_SHOWN) -> JobWhereabouts:
    """Where ``jid`` is now, its payload there, and its newest ``runs`` runs."""
    history = History.recent(runs, jid=jid).runs if runs else []
    places = locate({jid})
    where = places.found.get(jid)
    if where in ("running", "queued"):
        # A queued job waits in the lane its payload names (docs/priority.md): pushes put it nowhere else.
        record = JobRecord.parse(places.payloads[jid])
        if where == "queued":
            record.lane = lanes.lane_of(record.item)
        return JobWhereabouts(jid, where, record, runs=history)
    for place, job_set in SETS:
        entry = job_set().find_job(jid)
        if entry is not None:
            return JobWhereabouts(jid, place, entry.job, entry.at, entry.address, history)
    return JobWhereabouts(jid, "gone" if places.complete else "unknown", None, runs=history)
