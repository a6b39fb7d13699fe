"""Stored results on a real Redis Cluster (docs/cluster.md, Stored results): record, notify and waiter in one slot.

The write that stores a result wakes a get() registered for it, in the record's slot; real ``runworkers``
on the 3+3 cluster store the results of jobs on every primary, successes through the ack and failures
through the filing, each before the step that ends the job.
"""

from __future__ import annotations

import threading

import pytest
from redis.crc import key_slot

import djwork
from djwork.redis import keys
from djwork.results import _register_and_read, record
from djwork.settings.conf import get_config
from djwork.worker.cluster import results
from tests import cluster_jobs, result_jobs
from tests.helpers_worker import wait_until
from tests.support.queues import in_progress_left

QUEUES = [f"q{index}" for index in range(12)]
QUEUE_ARGS = [argument for queue in QUEUES for argument in ("-q", queue)]


def test_a_record_its_waiter_and_its_notify_list_share_one_slot():
    jid = "0123456789abcdef01234567"
    slots = {key_slot(key.encode()) for key in (keys.result(jid), keys.cluster_result_notify(jid),
                                                keys.cluster_result_waiters(jid))}
    assert len(slots) == 1


def test_storing_a_result_writes_the_record_and_wakes_the_registered_waiter(on_cluster):
    jid = "0123456789abcdef01234567"
    notify = keys.cluster_result_notify(jid)
    waiters = keys.cluster_result_waiters(jid)
    assert _register_and_read(jid, keys.result(jid), notify, waiters) == {}
    conn = on_cluster.cluster_client()
    assert conn.hget(waiters, jid).decode() == notify
    results.store_results([(jid, record.spec(record.SUCCESS, "42", get_config().result_ttl))])
    assert conn.hget(keys.result(jid), "state") == b"SUCCESS"
    assert conn.hget(keys.result(jid), "result") == b"42"
    assert conn.lrange(notify, 0, -1) == [b"SUCCESS"]  # woken once
    assert conn.hget(waiters, jid) is None
    assert 0 < conn.ttl(keys.result(jid)) <= get_config().result_ttl


def test_a_worker_stores_results_of_jobs_on_every_primary_and_get_reads_them(on_cluster, workers):
    conn = on_cluster.cluster_client()
    assert len({conn.get_node_from_key(keys.queue(queue)).name for queue in QUEUES}) == 3
    refs = [cluster_jobs.add.set(queue=QUEUES[index % len(QUEUES)]).delay(index, 1000) for index in range(36)]
    worker = workers.start("-c", "4", *QUEUE_ARGS, overrides={"RESULTS": True}, redis_url=on_cluster.url())
    assert [ref.get(timeout=60) for ref in refs] == [index + 1000 for index in range(36)]
    assert len({conn.get_node_from_key(keys.result(ref.id)).name for ref in refs}) == 3
    # Every job acked after its result: nothing left in progress once the queues drain.
    wait_until(lambda: not in_progress_left(conn),
               30, "the acks")
    assert "CROSSSLOT" not in worker.log()


def test_a_failed_job_s_result_is_stored_before_it_is_filed_in_dead(on_cluster, workers):
    ref = cluster_jobs.refuse.set(queue="q5").delay("no")
    worker = workers.start("-q", "q5", redis_url=on_cluster.url())
    with pytest.raises(ValueError, match="no"):
        ref.get(timeout=60)
    conn = on_cluster.cluster_client()
    wait_until(lambda: conn.zcard(keys.DEAD) == 1, 30, "the job in dead")
    assert djwork.AsyncResult(ref.id).state == "FAILURE"
    assert "CROSSSLOT" not in worker.log()


def test_get_is_woken_by_the_ack_s_write_not_by_its_polling_interval(on_cluster, workers, settings):
    # Its blocking wait is capped by FETCH_TIMEOUT (the reply timeout it runs under): raised past the timeout here.
    settings.DJWORK = {**settings.DJWORK, "FETCH_TIMEOUT": 60}
    conn = on_cluster.cluster_client()
    conn.set("t:hold:woken", 1)
    ref = result_jobs.held_value.set(ignore_result=False).delay("woken", 5)
    workers.start("-c", "2", redis_url=on_cluster.url())
    wait_until(lambda: conn.hget("t:starts", "woken") == b"1", 30, "the job to start")

    def release_once_waiting() -> None:
        wait_until(lambda: conn.hexists(keys.cluster_result_waiters(ref.id), ref.id), 20, "get() registered")
        conn.delete("t:hold:woken")

    releaser = threading.Thread(target=release_once_waiting)
    releaser.start()
    # An interval longer than the timeout: only the notify the ack's result write pushes ends this wait in time.
    assert ref.get(timeout=30, interval=120) == 5
    releaser.join(30)
    assert not conn.hexists(keys.cluster_result_waiters(ref.id), ref.id)  # the writer took the registration
