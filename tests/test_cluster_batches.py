"""Batches on a real Redis Cluster (docs/cluster.md, the batch's steps): accounting, callbacks once, nesting.

A batch's keys share its slot (``{b-<bid>}``); a job's end counts it there, keeps a fired callback pending in
the batch's hash, pushes it once (push_once, named by the batch and the field) and clears it, then tells the
parent batch (djwork/batches/cluster_accounting.py). Real ``runworkers`` on the 3+3 cluster count every callback
run; a crash between the steps is simulated by running the first step alone.
"""

from __future__ import annotations

import json

from redis.crc import key_slot

import djwork
from djwork import api
from djwork.batches import cluster_accounting
from djwork.redis import key_layout, keys
from djwork.worker.cluster.calls import evaluate_each
from tests import cluster_jobs
from tests.helpers_worker import wait_until

QUEUES = [f"q{index}" for index in range(6)]
QUEUE_ARGS = [argument for queue in QUEUES for argument in ("-q", queue)]


def _callbacks(conn, bid: str) -> dict[str, int]:
    counts = {name.decode(): int(value) for name, value in conn.hgetall(cluster_jobs.BATCH_CALLBACKS).items()}
    return {name.split(":", 1)[1]: value for name, value in counts.items() if name.startswith(f"{bid}:")}


def _pending_fields(conn, bid: str) -> list[str]:
    return [name.decode() for name in conn.hkeys(keys.batch(bid))
            if name.decode().startswith((cluster_accounting.CALLBACK_FIELD, cluster_accounting.TELL_FIELD))]


def test_a_batch_s_keys_share_its_slot():
    named = key_layout.CLUSTER.batch("Ab3_x-9")
    assert len({key_slot(key.encode()) for key in (named.hash, named.jids, named.failed, named.died, named.order,
                                                   named.results)}) == 1
    assert named.hash == "b-Ab3_x-9"  # Sidekiq's name kept


def test_a_batch_of_jobs_on_every_primary_runs_its_success_and_complete_callbacks_once(on_cluster, workers):
    conn = on_cluster.cluster_client()
    assert len({conn.get_node_from_key(keys.queue(queue)).name for queue in QUEUES}) == 3
    batch = djwork.Batch(description="spread", on_success=cluster_jobs.on_batch_event,
                         on_complete=cluster_jobs.on_batch_event, callback_queue="q1")
    with batch.jobs():
        for index in range(30):
            cluster_jobs.record.set(queue=QUEUES[index % len(QUEUES)]).delay(f"m{index}")
    assert len(batch.jids) == 30
    worker = workers.start("-c", "4", *QUEUE_ARGS, redis_url=on_cluster.url())
    wait_until(lambda: _callbacks(conn, batch.bid) == {"complete": 1, "success": 1}, 60, "both callbacks")
    assert {int(value) for value in conn.hvals(cluster_jobs.COUNTS)} == {1}
    assert conn.hlen(cluster_jobs.COUNTS) == 30
    status = djwork.Batch.status(batch.bid)
    assert (status.total, status.pending, status.failures, status.dead) == (30, 0, 0, 0)
    assert set(status.fired_at) >= {"complete", "success"}
    # Every queue drained and nothing left pending: no second push can come later.
    wait_until(lambda: not any(conn.llen(keys.queue(queue)) for queue in QUEUES), 30, "the queues drained")
    assert _pending_fields(conn, batch.bid) == []
    assert _callbacks(conn, batch.bid) == {"complete": 1, "success": 1}
    assert "CROSSSLOT" not in worker.log()


def test_a_batch_with_a_dying_job_runs_complete_and_death_not_success(on_cluster, workers):
    conn = on_cluster.cluster_client()
    batch = djwork.Batch(description="one dies", on_success=cluster_jobs.on_batch_event,
                         on_complete=cluster_jobs.on_batch_event, on_death=cluster_jobs.on_batch_event,
                         on_settled=cluster_jobs.on_batch_event, callback_queue="q2")
    with batch.jobs():
        for index in range(6):
            cluster_jobs.record.set(queue=QUEUES[index]).delay(f"ok{index}")
        cluster_jobs.dies.set(queue="q4").delay("doomed")
    worker = workers.start("-c", "3", *QUEUE_ARGS, redis_url=on_cluster.url())
    wait_until(lambda: _callbacks(conn, batch.bid).get("settled") == 1, 60, "the settled callback")
    wait_until(lambda: _callbacks(conn, batch.bid) == {"complete": 1, "death": 1, "settled": 1}, 30,
               "complete and death")
    status = djwork.Batch.status(batch.bid, jids_up_to=10)
    assert (status.pending, status.dead) == (0, 1)
    assert status.dead_jids == [batch.jids[-1]]
    assert "success" not in status.fired_at
    assert conn.zcard(keys.DEAD) == 1
    assert "CROSSSLOT" not in worker.log()


def test_a_callback_left_pending_by_a_crash_after_the_first_step_is_pushed_once_by_the_sweep(on_cluster):
    conn = on_cluster.cluster_client()
    batch = djwork.Batch(description="cut short", on_success=cluster_jobs.on_batch_event, callback_queue="q5")
    with batch.jobs():
        cluster_jobs.record.set(queue="q0").delay("only")
    jid = batch.jids[0]
    assert conn.llen(keys.queue("q0")) == 1
    # The job's end, step 1 alone (the process dies before pushing): the claim taken, the callback pending.
    conn.zadd(key_layout.CLUSTER_BATCH_SWEEP, {batch.bid: 1.0})
    evaluate_each(conn, "batch_account", [((keys.batch(batch.bid),), ("end", jid, "ok", "=", ""))])
    assert conn.hexists(keys.batch(batch.bid), "success_at")
    assert _pending_fields(conn, batch.bid) == ["pcb-success-1"]
    assert conn.llen(keys.queue("q5")) == 0
    # The leader's sweep pushes it, once; a second sweep and a repeated end push nothing more.
    assert cluster_accounting.sweep(conn, older_than=0) == 1
    assert conn.llen(keys.queue("q5")) == 1
    assert _pending_fields(conn, batch.bid) == []
    assert cluster_accounting.sweep(conn, older_than=0) == 0
    assert conn.zcard(key_layout.CLUSTER_BATCH_SWEEP) == 0  # nothing pending: the mark forgotten
    cluster_accounting.end_members([(batch.bid, jid, "ok", "=", "")])
    assert conn.llen(keys.queue("q5")) == 1
    callback = json.loads(conn.lindex(keys.queue("q5"), 0))
    assert callback["args"][0]["event"] == "success" and callback["args"][0]["bid"] == batch.bid


def test_a_callback_pushed_but_not_cleared_is_not_pushed_again_by_the_next_check(on_cluster):
    conn = on_cluster.cluster_client()
    batch = djwork.Batch(description="cut after the push", on_complete=cluster_jobs.on_batch_event,
                         callback_queue="q5")
    with batch.jobs():
        cluster_jobs.record.set(queue="q0").delay("a")
        cluster_jobs.record.set(queue="q0").delay("b")
    first, second = batch.jids
    pending = evaluate_each(conn, "batch_account", [((keys.batch(batch.bid),), ("end", first, "retrying", "=", "")),
                                                    ((keys.batch(batch.bid),), ("end", second, "ok", "=", ""))])[1]
    assert pending[0] == b"pcb-complete-1"
    # Steps 2 only (pushed), then a crash before the clear: the next member's end returns it again.
    cluster_accounting._push(conn, batch.bid, [(pending[0].decode(), pending[1].decode())])
    assert conn.llen(keys.queue("q5")) == 1
    cluster_accounting.end_members([(batch.bid, first, "ok", "=", "")])  # the retried job succeeds
    assert conn.llen(keys.queue("q5")) == 1
    assert _pending_fields(conn, batch.bid) == []


def test_a_nested_batch_s_parent_runs_its_callback_after_the_child_s(on_cluster, workers):
    conn = on_cluster.cluster_client()
    parent = djwork.Batch(description="parent", on_success=cluster_jobs.on_batch_event, callback_queue="q2")
    with parent.jobs():
        cluster_jobs.opens_child.set(queue="q1").delay("outer", 8)
    worker = workers.start("-c", "4", *QUEUE_ARGS, redis_url=on_cluster.url())
    wait_until(lambda: _callbacks(conn, parent.bid).get("success") == 1, 60, "the parent's success")
    child = conn.hget(cluster_jobs.CHILDREN, "outer").decode()
    assert _callbacks(conn, child) == {"success": 1}
    assert djwork.Batch.status(child).parent == parent.bid
    assert conn.hlen(cluster_jobs.COUNTS) == 9  # the parent's member and the child's eight
    # The parent's success is claimed after the child's (told in the step after the child's claim).
    assert float(conn.hget(keys.batch(parent.bid), "success_at")) >= float(conn.hget(keys.batch(child),
                                                                                     "success_at"))
    assert conn.llen(cluster_jobs.BATCH_EVENTS) == 2
    assert _pending_fields(conn, parent.bid) == [] and _pending_fields(conn, child) == []
    assert "CROSSSLOT" not in worker.log()


def test_kept_results_ride_on_the_acks_and_reach_the_success_callback_in_order(on_cluster, workers):
    conn = on_cluster.cluster_client()
    batch = djwork.Batch(description="sums", on_success=cluster_jobs.on_batch_event, callback_queue="q0",
                         keep_results=True)
    with batch.jobs():
        for index in range(12):
            cluster_jobs.add.set(queue=QUEUES[index % len(QUEUES)]).delay(index, 100)
    workers.start("-c", "4", *QUEUE_ARGS, redis_url=on_cluster.url())
    wait_until(lambda: _callbacks(conn, batch.bid) == {"success": 1}, 60, "the success callback")
    status = json.loads(conn.hget(cluster_jobs.BATCH_STATUSES, f"{batch.bid}:success"))
    assert status["results"] == [index + 100 for index in range(12)]
    assert conn.llen(key_layout.CLUSTER.batch(batch.bid).order) == 12  # the order list in the batch's slot


def test_the_leader_s_tick_sweeps_a_callback_a_crash_left_pending(on_cluster, workers):
    conn = on_cluster.cluster_client()
    batch = djwork.Batch(description="swept by the leader", on_success=cluster_jobs.on_batch_event,
                         callback_queue="q5")
    with batch.jobs():
        cluster_jobs.record.set(queue="q0").delay("only")
    conn.delete(keys.queue("q0"))  # the member ran elsewhere; its end's first step is all that happened:
    conn.zadd(key_layout.CLUSTER_BATCH_SWEEP, {batch.bid: 1.0})  # marked long ago
    evaluate_each(conn, "batch_account", [((keys.batch(batch.bid),), ("end", batch.jids[0], "ok", "=", ""))])
    assert _pending_fields(conn, batch.bid) == ["pcb-success-1"]
    workers.start("-q", "q5", redis_url=on_cluster.url())  # no member's end will come: only the sweep pushes it
    wait_until(lambda: _callbacks(conn, batch.bid) == {"success": 1}, 60, "the swept callback to run")
    wait_until(lambda: conn.zcard(key_layout.CLUSTER_BATCH_SWEEP) == 0, 30, "the mark forgotten")
    assert _pending_fields(conn, batch.bid) == []
    assert _callbacks(conn, batch.bid) == {"success": 1}


def test_a_scheduled_member_deleted_counts_dead_and_its_batch_completes(on_cluster):
    conn = on_cluster.cluster_client()
    batch = djwork.Batch(description="deleted member", on_complete=cluster_jobs.on_batch_event, callback_queue="q3")
    with batch.jobs():
        ref = cluster_jobs.record.set(queue="q0").apply_async(("later",), countdown=3600)
    scheduled = api.ScheduledSet()
    entry = scheduled.find_job(ref.id)
    assert entry is not None
    scheduled.delete(entry)
    # Deleted, it will never run: its batch counts it dead at once and fires `complete` (queued, no worker here).
    status = djwork.Batch.status(batch.bid)
    assert (status.pending, status.dead) == (0, 1)
    assert "complete" in status.fired_at
    assert conn.zcard(keys.SCHEDULE) == 0 and conn.llen(keys.queue("q3")) == 1
    assert _pending_fields(conn, batch.bid) == []
