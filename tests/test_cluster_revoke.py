"""``djwork.revoke()`` on a real Redis Cluster (3 primaries + 3 replicas): docs/cluster.md, Revoke.

The revoke is single-slot steps (flag, a removal per place, the record), and a worker drops a revoked copy
it took in steps of its own. Real ``runworkers`` processes; each job counts its runs in the cluster
(tests/cluster_jobs.py), and a later job of the same queue running proves the revoked one had its turn.
"""

from __future__ import annotations

import time

import pytest

import djwork
from djwork.redis import keys
from tests import cluster_jobs, result_jobs
from tests.cluster_jobs import COUNTS
from tests.helpers_worker import wait_until
from tests.support.queues import in_progress_left

QUEUES = ["q1", "q2", "q3"]


def _counts(cluster) -> dict[str, int]:
    return {name.decode(): int(value) for name, value in cluster.cluster_client().hgetall(COUNTS).items()}


def _state(cluster, jid: str) -> str | None:
    state = cluster.cluster_client().hget(keys.result(jid), "state")
    return state.decode() if state is not None else None


def test_a_queued_and_a_scheduled_job_revoked_never_run_and_read_revoked(on_cluster, workers):
    conn = on_cluster.cluster_client()
    assert len({conn.get_node_from_key(keys.queue(queue)).name for queue in QUEUES}) == 3
    recording = cluster_jobs.record.set(ignore_result=False)
    queued = recording.set(queue="q1").delay("queued")
    soon = time.time() + 2
    scheduled = recording.set(queue="q2").apply_async(("scheduled",), eta=soon)
    # Flagged but not found (its queue is not searched): the worker that takes it drops it.
    missed = recording.set(queue="q3").delay("missed")
    assert djwork.revoke(queued.id) is True
    assert djwork.revoke(scheduled.id) is True
    assert djwork.revoke(missed.id, queue="q1") is False
    assert conn.llen(keys.queue("q1")) == 0 and conn.zcard(keys.SCHEDULE) == 0
    assert conn.llen(keys.queue("q3")) == 1
    # Jobs queued behind each, and one scheduled after the revoked one came due: once they ran, the revoked
    # ones had their turn.
    after = [recording.set(queue=queue).delay(f"after-{queue}") for queue in QUEUES]
    later = recording.set(queue="q2").apply_async(("later",), eta=soon + 1)
    worker = workers.start("-c", "4", *(argument for queue in QUEUES for argument in ("-q", queue)),
                           redis_url=on_cluster.url())
    wait_until(lambda: len(_counts(on_cluster)) == 4, 60, "the jobs queued behind the revoked ones to run")
    assert _counts(on_cluster) == {"after-q1": 1, "after-q2": 1, "after-q3": 1, "later": 1}
    assert all(_state(on_cluster, ref.id) == "SUCCESS" for ref in [*after, later])
    assert [_state(on_cluster, ref.id) for ref in (queued, scheduled, missed)] == ["REVOKED"] * 3
    assert queued.state == "REVOKED"
    # Waited for: a job's record is written before its ack takes it off the in-progress list, so the last ack
    # can still be on its way here (it was, in the same check of tests/test_cluster_limiters.py, under load).
    wait_until(lambda: not in_progress_left(conn), 30,
               "every in-progress list emptied")
    assert f"dropped revoked job {missed.id}" in worker.log()
    assert "CROSSSLOT" not in worker.log()


def test_a_job_revoked_while_it_runs_keeps_its_revoked_record(on_cluster, workers):
    # One server's test_revoke_worker.py, on the cluster: the revoke writes REVOKED in the record's slot, and the
    # job's own outcome, stored in that slot after it, keeps it (lua/store_result.lua).
    conn = on_cluster.cluster_client()
    ref = result_jobs.waits_for_revoke.set(ignore_result=False).delay("w1")
    workers.start("-c", "2", redis_url=on_cluster.url())
    wait_until(lambda: conn.hget("t:starts", "w1") == b"1", 30, "the job to start")
    assert ref.revoke() is False  # running: not waiting anywhere, only flagged
    assert ref.state == "REVOKED"
    wait_until(lambda: conn.hget("t:saw-revoke", "w1") == b"1", 30, "the job to see its revoke")
    wait_until(lambda: not in_progress_left(conn), 30,
               "its ack")
    assert ref.state == "REVOKED"  # its return did not overwrite the revoke
    assert _state(on_cluster, ref.id) == "REVOKED"
    with pytest.raises(djwork.JobRevoked):
        ref.get(timeout=1)


def test_a_revoke_takes_a_job_from_its_lane_and_tells_its_batch(on_cluster):
    conn = on_cluster.cluster_client()
    batch = djwork.Batch(description="revoked member", on_complete=cluster_jobs.on_batch_event, callback_queue="q3")
    with batch.jobs():
        least = cluster_jobs.record.set(queue="q2", priority=9).delay("least urgent")
    plain = cluster_jobs.record.set(queue="q2").delay("plain")
    # The batch's push put its member in a lane of its own (Celery's priority 9: lane -9), in the queue's slot.
    lane_lists = [key for key in conn.scan_iter("djwork:lane:*") if conn.llen(key)]
    assert len(lane_lists) == 1 and conn.keyslot(lane_lists[0]) == conn.keyslot(keys.queue("q2"))
    assert conn.llen(keys.queue("q2")) == 1
    assert djwork.revoke(least.id) is True
    assert not any(conn.llen(key) for key in lane_lists)
    assert conn.llen(keys.queue("q2")) == 1  # the other job, untouched
    # Removed where it waited, it ends as a dead job does: its batch counts it and completes.
    status = djwork.Batch.status(batch.bid)
    assert (status.pending, status.dead) == (0, 1) and "complete" in status.fired_at
    assert djwork.revoke(plain.id) is True and conn.llen(keys.queue("q2")) == 0
