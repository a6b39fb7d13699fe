"""Job priorities (lanes) on a real Redis Cluster: docs/priority.md, docs/cluster.md.

A cluster names a queue's lanes with the queue's hash tag (``djwork:lane:{queue:<name>}|<n>``), so the
per-queue single-slot fetch, recovery and requeue reach them as one server's one-script steps do.
"""

from __future__ import annotations

from djwork import api, client
from djwork.payload import new_jid
from djwork.redis import key_layout, keys
from tests import cluster_jobs
from tests.cluster_jobs import COUNTS, ORDER, STARTS
from tests.helpers_worker import wait_until

OVERRIDES = {"ORPHAN_THRESHOLD": 2, "HEARTBEAT_INTERVAL": 0.5}


def _lane(queue: str, lane: int) -> str:
    return key_layout.CLUSTER.lane(queue, lane)


def test_the_lanes_carry_the_queues_hash_tag():
    assert _lane("default", -3) == "djwork:lane:{queue:default}|-3"
    assert key_layout.CLUSTER.lanes("default") == "djwork:lanes:{queue:default}"
    assert key_layout.SINGLE_SERVER.lane("default", -3) == "djwork:lane:default|-3"


def test_jobs_pushed_with_priorities_run_most_urgent_first(on_cluster, workers):
    conn = on_cluster.cluster_client()
    last = cluster_jobs.in_order.apply_async(("celery 9",), priority=9)
    cluster_jobs.in_order.apply_async(("celery 3",), priority=3)
    cluster_jobs.in_order.delay("no priority")
    cluster_jobs.in_order.apply_async(("celery 5",), priority=5)
    # Lane 4, above the queue's own list, as a Django priority of 34..44 chooses.
    client.push({"class": "tests.cluster_jobs.in_order", "args": ["lane 4"], "queue": "default",
                 "jid": new_jid(), "lane": 4})
    cluster_jobs.in_order.apply_async(("celery 3 again",), priority=3)
    cluster_jobs.in_order.apply_async(("celery 0",), priority=0)
    # Each in its lane, in the queue's slot, and registered there.
    assert conn.llen(_lane("default", -3)) == 2 and conn.llen(_lane("default", 4)) == 1
    assert conn.llen(keys.queue("default")) == 2
    assert {int(member) for member in conn.smembers(key_layout.CLUSTER.lanes("default"))} == {4, -3, -5, -9}
    assert len({conn.keyslot(key) for key in (keys.queue("default"), _lane("default", 4), _lane("default", -9),
                                              key_layout.CLUSTER.lanes("default"))}) == 1
    # The API reads the cluster's lanes: the lists in the order a worker takes them, the size counts them all.
    queue = api.Queue("default")
    assert queue.lists() == [(4, _lane("default", 4)), (0, keys.queue("default")), (-3, _lane("default", -3)),
                             (-5, _lane("default", -5)), (-9, _lane("default", -9))]
    assert queue.size() == 7
    assert [record.lane for record in queue.jobs(oldest_first=True).items] == [4, 0, 0, -3, -3, -5, -9]
    (summary,) = [each for each in api.Queue.all() if each.name == "default"]
    assert (summary.size, summary.prioritised) == (7, 5)
    found = api.find_job(last.jid)  # read at its lane's ends, as the Locks page reads them
    assert (found.where, found.job.lane) == ("queued", -9)

    worker = workers.start("-c", "1", redis_url=on_cluster.url())
    wait_until(lambda: conn.llen(ORDER) == 7, 30, "every job to run")
    assert [key.decode() for key in conn.lrange(ORDER, 0, -1)] == [
        "lane 4", "no priority", "celery 0", "celery 3", "celery 3 again", "celery 5", "celery 9"]
    # The fetch that found each lane empty unregistered it.
    wait_until(lambda: conn.scard(key_layout.CLUSTER.lanes("default")) == 0, 10, "the lanes to be unregistered")
    assert "CROSSSLOT" not in worker.log()


def test_a_prioritised_job_of_a_killed_worker_is_recovered_into_its_lane(on_cluster, workers):
    conn = on_cluster.cluster_client()
    job = cluster_jobs.slow_first_run.apply_async(("held",), priority=5)
    first = workers.start("-c", "1", overrides=OVERRIDES, redis_url=on_cluster.url(), label="killed")
    wait_until(lambda: conn.hget(STARTS, "held") == b"1", 30, "the job to start")
    first.kill()  # SIGKILL: the job stays on the dead process's in-progress list
    # Paused, the survivor's reaper recovers the job but no fetch takes it: where it went can be seen.
    api.Queue("default").pause()
    survivor = workers.start("-c", "1", overrides=OVERRIDES, redis_url=on_cluster.url(), label="survivor")
    lane = _lane("default", -5)
    wait_until(lambda: conn.llen(lane) == 1, 30, "the job recovered into its lane")
    assert job.jid.encode() in conn.lindex(lane, 0)
    assert conn.smembers(key_layout.CLUSTER.lanes("default")) == {b"-5"}
    assert conn.llen(keys.queue("default")) == 0
    api.Queue("default").resume()
    wait_until(lambda: conn.hget(COUNTS, "held") == b"1", 30, "the survivor to run it")
    assert conn.hget(STARTS, "held") == b"2"
    assert "CROSSSLOT" not in survivor.log()


def test_clearing_a_queue_empties_its_lanes_each_set_aside_in_its_slot(on_cluster):
    conn = on_cluster.cluster_client()
    cluster_jobs.in_order.apply_async(("celery 3",), priority=3)
    cluster_jobs.in_order.apply_async(("celery 7",), priority=7)
    cluster_jobs.in_order.delay("no priority")
    assert api.Queue("default").clear() == 3
    assert conn.llen(_lane("default", -3)) == conn.llen(_lane("default", -7)) == conn.llen(keys.queue("default")) == 0
    # The set-aside copy of a lane hashes by the lane's own tag: `{djwork:lane:{queue:...}` would cross slots.
    copy = key_layout.CLUSTER.clearing_copy(_lane("default", -3), "s")
    assert conn.keyslot(copy) == conn.keyslot(keys.queue("default"))


def test_a_unique_job_with_a_priority_is_pushed_to_its_lane(on_cluster):
    conn = on_cluster.cluster_client()
    assert cluster_jobs.record.set(unique_for=60).apply_async(("unique",), priority=2).enqueued
    assert conn.llen(_lane("default", -2)) == 1 and conn.llen(keys.queue("default")) == 0
    assert conn.smembers(key_layout.CLUSTER.lanes("default")) == {b"-2"}


def test_a_scheduled_job_with_a_priority_is_promoted_into_its_lane(on_cluster, workers):
    conn = on_cluster.cluster_client()
    job = cluster_jobs.in_order.apply_async(("later",), priority=4, countdown=1)
    # Paused: the poller promotes the job but no fetch takes it, so where it went can be seen.
    api.Queue("default").pause()
    workers.start("-c", "1", redis_url=on_cluster.url())
    wait_until(lambda: conn.llen(_lane("default", -4)) == 1, 30, "the job promoted into its lane")
    assert job.jid.encode() in conn.lindex(_lane("default", -4), 0)
    assert conn.smembers(key_layout.CLUSTER.lanes("default")) == {b"-4"}
    wait_until(lambda: conn.zcard(keys.SCHEDULE) == 0, 10, "the entry removed from schedule")
    api.Queue("default").resume()
    wait_until(lambda: conn.lrange(ORDER, 0, -1) == [b"later"], 30, "the job to run")
