"""The API's entry actions on a real Redis Cluster (3 primaries + 3 replicas): docs/cluster.md, Entry actions.

"Retry now", "enqueue now", "kill" and "delete" are single-slot steps there (djwork/api/cluster_entries.py):
each test checks where the job ended, what it left behind, and that its unique lock followed it.
"""

from __future__ import annotations

import time

import pytest

from djwork import api, unique
from djwork.payload import dumps, new_jid
from djwork.redis import keys
from tests import cluster_jobs


def _entry(job_set: api.JobSet, jid: str) -> api.SortedEntry:
    entry = job_set.find_job(jid)
    assert entry is not None
    return entry


def test_a_retry_entry_retried_now_is_queued_once_and_leaves_retry(on_cluster):
    conn = on_cluster.cluster_client()
    jid = new_jid()
    payload = {"class": "tests.cluster_jobs.record", "args": ["r"], "queue": "q2", "jid": jid, "retry": 3,
               "retry_count": 1, "created_at": time.time()}
    conn.zadd(keys.RETRY, {dumps(payload): time.time() + 3600})
    retries = api.RetrySet()
    entry = _entry(retries, jid)
    assert retries.retry(entry) == "q2"
    assert conn.zcard(keys.RETRY) == 0 and conn.sismember(keys.QUEUES, "q2")
    (queued,) = conn.lrange(keys.queue("q2"), 0, -1)
    assert api.JobRecord.parse(queued).item["retry_count"] == 0
    with pytest.raises(api.StaleEntry):
        retries.retry(entry)  # gone: nothing pushed again
    assert conn.llen(keys.queue("q2")) == 1


def _scheduled_unique(conn, queue: str, arg: str):
    """A unique job scheduled an hour out, its schedule entry and its lock (held by it)."""
    ref = cluster_jobs.record.set(unique_for=600, queue=queue).apply_async((arg,), countdown=3600)
    scheduled = api.ScheduledSet()
    entry = _entry(scheduled, ref.id)
    lock = unique.lock_of(entry.job.item)
    assert conn.get(lock).decode() == ref.id
    return ref, scheduled, entry, lock


def test_a_scheduled_unique_job_killed_goes_to_dead_and_gives_its_lock_up(on_cluster):
    conn = on_cluster.cluster_client()
    ref, scheduled, entry, lock = _scheduled_unique(conn, "q3", "k")
    scheduled.kill(entry)
    assert conn.zcard(keys.SCHEDULE) == 0
    assert api.DeadSet().find_job(ref.id) is not None
    assert conn.get(lock) is None
    # Enqueued from dead, it takes its lock back on the way (a second copy would be refused beside it).
    dead_set = api.DeadSet()
    assert dead_set.add_to_queue(_entry(dead_set, ref.id)) == "q3"
    assert conn.get(lock).decode() == ref.id and conn.llen(keys.queue("q3")) == 1 and conn.zcard(keys.DEAD) == 0


def test_a_scheduled_unique_job_deleted_gives_its_lock_up(on_cluster):
    conn = on_cluster.cluster_client()
    _ref, scheduled, entry, lock = _scheduled_unique(conn, "q1", "d")
    scheduled.delete(entry)
    assert conn.zcard(keys.SCHEDULE) == 0 and conn.get(lock) is None
    with pytest.raises(api.StaleEntry):
        scheduled.delete(entry)
