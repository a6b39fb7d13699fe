"""Choosing jobs by class or text, and acting on exactly the ones chosen (``manage.py djwork retry dead --class X``).

A bulk action on part of a set is two steps: select, so the person (or the
script) can be told how many jobs it is about to touch, then act on those
entries, each removed by its exact stored member. A job that moved in between
is counted as skipped, never acted on twice; a job that arrived in between is
left alone, because it was not in the count that was confirmed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from djwork.api.errors import NotRetryable, StaleEntry
from djwork.api.queues import Queue
from djwork.api.records import JobRecord
from djwork.api.sorted_sets import JobSet, SearchResult, SortedEntry

SCAN_MAX = 100_000  # entries a selection reads before it stops (and says so): a bound on one command's work
BATCH = 500  # a queue's jobs per round trip
ACTIONS = ("retry", "add_to_queue", "delete", "kill")


def matches(job: JobRecord, klass: str = "", term: str = "") -> bool:
    """``klass`` equals the job's class or displayed class; ``term`` is in what ``JobRecord.contains`` reads."""
    if klass and klass not in (job.klass, job.display_class):
        return False
    return not term or job.contains(term.strip().lower())


def select_entries(job_set: JobSet, klass: str = "", term: str = "", limit: int | None = None,
                   scan_max: int = SCAN_MAX) -> SearchResult[SortedEntry]:
    """The set's entries matching ``klass`` and ``term``, in the set's display order."""
    # Without a limit, one more than can be scanned: "limit reached" must never cut an exhaustive walk short.
    return job_set.select(lambda entry: matches(entry.job, klass, term), limit=scan_max + 1 if limit is None
                          else limit, scan_max=scan_max)


def select_queue_jobs(queue: Queue, klass: str = "", term: str = "", limit: int | None = None,
                      scan_max: int = SCAN_MAX) -> SearchResult[JobRecord]:
    """The queue's jobs matching ``klass`` and ``term``, in the Queue page's order (``Queue.jobs``: its priority
    lanes in the order a worker takes them, newest first within each)."""
    total = queue.size()
    found: list[JobRecord] = []
    scanned, number = 0, 1
    while scanned < min(total, scan_max) and (limit is None or len(found) < limit):
        batch = queue.jobs(number, BATCH).items[:scan_max - scanned]
        if not batch:
            break
        scanned += len(batch)
        number += 1
        found.extend(job for job in batch if matches(job, klass, term))
    limited = limit is not None and len(found) >= limit
    return SearchResult(found[:limit] if limit is not None else found, scanned, total, limited)


@dataclass
class BulkOutcome:
    done: int = 0
    problems: list[str] = field(default_factory=list)  # one line per entry skipped (gone, unreadable, locked)


def act_on(job_set: JobSet, entries: list[SortedEntry], action: str) -> BulkOutcome:
    """Run ``action`` (one of ``ACTIONS``, a ``JobSet`` method) on each entry; an entry it refuses is skipped."""
    if action not in ACTIONS:
        raise ValueError(f"{action!r} is not one of {', '.join(ACTIONS)}")
    method = getattr(job_set, action)
    outcome = BulkOutcome()
    for entry in entries:
        try:
            method(entry)
            outcome.done += 1
        except (NotRetryable, StaleEntry) as error:
            outcome.problems.append(str(error))
    return outcome


__all__ = ["ACTIONS", "BulkOutcome", "SearchResult", "act_on", "matches", "select_entries", "select_queue_jobs"]
