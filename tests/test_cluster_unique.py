"""Unique jobs on a real Redis Cluster (docs/cluster.md, Unique jobs): the lock first, then the push.

The lock ``unique:<digest>`` and the queue are in different slots: the push takes the lock (``SET NX``,
owned by the jid), then pushes; the worker releases it owner-checked, one call per lock, after the step
that ends the job. Real ``runworkers`` on the 3+3 cluster.
"""

from __future__ import annotations

from redis.crc import key_slot

from djwork.client.cluster_unique import take_then_push
from djwork.client.push_hooks import Pushed, Write
from djwork.redis import keys
from tests import cluster_jobs
from tests.cluster_jobs import COUNTS, STARTS
from tests.helpers_worker import wait_until


def _lock_key(cluster) -> str:
    (lock,) = [key if isinstance(key, str) else key.decode() for port in cluster.primary_ports()
               for key in cluster.client(port).keys(f"{keys.UNIQUE_PREFIX}*")]
    return lock


def test_a_second_push_of_the_same_job_is_a_duplicate_and_nothing_more_is_written(on_cluster):
    first = cluster_jobs.unique_record.delay("u1")
    second = cluster_jobs.unique_record.delay("u1")
    assert first.enqueued and not second.enqueued
    assert second.duplicate_of == first.jid
    conn = on_cluster.cluster_client()
    assert conn.llen(keys.queue("default")) == 1
    lock = _lock_key(on_cluster)
    assert key_slot(lock.encode()) != key_slot(keys.queue("default").encode())  # two slots: two steps
    assert conn.get(lock).decode() == first.jid
    assert 0 < conn.pttl(lock) <= 300_000


def test_a_scheduled_unique_push_lands_in_schedule_and_its_lock_covers_the_wait(on_cluster):
    ref = cluster_jobs.unique_record.apply_async(("later",), countdown=600)
    assert cluster_jobs.unique_record.delay("later").duplicate_of == ref.jid
    conn = on_cluster.cluster_client()
    assert conn.zcard(keys.SCHEDULE) == 1 and conn.llen(keys.queue("default")) == 0
    assert conn.pttl(_lock_key(on_cluster)) > 600_000


def test_a_lock_held_by_the_same_jid_counts_as_taken(on_cluster):
    # What makes the first step safe to replay: its own lock, met again, lets the push go on.
    conn = on_cluster.cluster_client()
    conn.set("unique:replayed", "j-self", px=60_000)
    payload = {"class": "tests.cluster_jobs.unique_record", "args": ["r"], "queue": "default", "jid": "j-self"}
    assert isinstance(take_then_push("unique:replayed", 60_000, payload, "default", None), Write)
    other = dict(payload, jid="j-other")
    assert take_then_push("unique:replayed", 60_000, other, "default", None) == Pushed("j-self", "j-self")


def test_a_worker_releases_the_lock_after_the_ack_and_the_job_can_be_pushed_again(on_cluster, workers):
    first = cluster_jobs.unique_record.delay("again")
    conn = on_cluster.cluster_client()
    lock = _lock_key(on_cluster)
    worker = workers.start(redis_url=on_cluster.url())
    wait_until(lambda: conn.hget(COUNTS, "again") == b"1", 30, "the first run")
    wait_until(lambda: not conn.exists(lock), 30, "the lock released after the ack")
    second = cluster_jobs.unique_record.delay("again")
    assert second.enqueued and second.jid != first.jid
    wait_until(lambda: conn.hget(COUNTS, "again") == b"2", 30, "the second run")
    wait_until(lambda: not conn.exists(lock), 30, "the second lock released")
    assert "CROSSSLOT" not in worker.log()


def test_a_unique_job_filed_in_dead_gives_its_lock_up(on_cluster, workers):
    ref = cluster_jobs.unique_refuse.delay("dies")
    conn = on_cluster.cluster_client()
    lock = _lock_key(on_cluster)
    worker = workers.start(redis_url=on_cluster.url())
    wait_until(lambda: conn.zcard(keys.DEAD) == 1, 30, "the job in dead")
    wait_until(lambda: not conn.exists(lock), 30, "the lock released after the filing")
    assert cluster_jobs.unique_refuse.delay("dies").jid != ref.jid  # a new copy is let in
    assert "CROSSSLOT" not in worker.log()


def test_unique_until_start_lets_a_copy_in_while_the_first_runs(on_cluster, workers):
    first = cluster_jobs.unique_at_start.delay("start", 3)
    conn = on_cluster.cluster_client()
    lock = _lock_key(on_cluster)
    worker = workers.start("-c", "2", redis_url=on_cluster.url())
    wait_until(lambda: conn.hget(STARTS, "start") == b"1", 30, "the first run to start")
    wait_until(lambda: not conn.exists(lock), 30, "the lock given up at the start")
    second = cluster_jobs.unique_at_start.delay("start", 0)
    assert second.enqueued and second.jid != first.jid
    wait_until(lambda: conn.hget(COUNTS, "start") == b"2", 60, "both runs")
    assert "CROSSSLOT" not in worker.log()
