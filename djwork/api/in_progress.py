"""Jobs a djwork process has taken but its last beat did not list yet (docs/dashboard.md, Busy).

A process writes its ``<identity>:work`` hash once a beat (``HEARTBEAT_INTERVAL``,
10 s by default), so a job it started since then was missing from the Busy page
for up to that long. Its reliable fetch moved the job into
``djwork:inprogress:<identity>|<queue>`` at once: reading those lists shows it
as soon as Redis does. Ruby Sidekiq and basic-fetch processes keep no such list
and show their work hash alone.
"""

from __future__ import annotations

from typing import Any

from djwork.api import access
from djwork.api.processes import Process, Work
from djwork.api.records import JobRecord
from djwork.redis import key_layout

SHOWN_PER_LIST = 100  # jobs read from one in-progress list: a process holds at most its concurrency and backlog


def taken_since_beat(processes: list[Process], works: list[Work]) -> list[Work]:
    """The jobs in the processes' in-progress lists that no work hash lists, as Works without thread or start."""
    pairs = [(process.identity, queue) for process in processes for queue in process.queues]
    if not pairs:
        return []

    def read(conn: Any) -> list[Any]:
        pipe = conn.pipeline(transaction=False)
        layout = key_layout.layout_of(conn)  # a cluster's lists carry their queue's tag
        for identity, queue in pairs:
            pipe.lrange(layout.in_progress(identity, queue), 0, SHOWN_PER_LIST - 1)
        return pipe.execute(raise_on_error=False)

    listed = {(work.identity, work.job.jid) for work in works}
    found = []
    for (identity, queue), members in zip(pairs, access.read(read), strict=True):
        for raw in members if isinstance(members, list) else []:
            job = JobRecord.parse(raw, queue)
            if (identity, job.jid) not in listed:
                listed.add((identity, job.jid))
                found.append(Work(identity, "", queue, None, job, list(job.problems)))
    return found
