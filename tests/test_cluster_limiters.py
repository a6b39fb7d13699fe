"""Limiters on a real Redis Cluster (3 primaries + 3 replicas): docs/cluster.md, Limiters.

A limiter's keys share its hash tag, so each decision is one single-slot script; the registry is listed
in a step of its own and a refused job goes back to `schedule` in two (filed, then taken off its list).
Real ``runworkers`` processes run the limited jobs; each job records what it saw in the cluster (how many
ran at once, when each was admitted on Redis's clock), and the tests read those records.
"""

from __future__ import annotations

from djwork import api
from djwork.redis import keys
from djwork.redis.key_layout import CLUSTER
from tests import cluster_jobs
from tests.cluster_jobs import ADMITTED, COUNTS, HIGHEST, RUNNING
from tests.helpers_worker import wait_until
from tests.support.queues import in_progress_left


def _counts(cluster) -> dict[str, int]:
    return {name.decode(): int(value) for name, value in cluster.cluster_client().hgetall(COUNTS).items()}


def test_a_limiters_keys_share_its_slot(on_cluster):
    conn = on_cluster.cluster_client()
    limiter_keys = CLUSTER.limiter("cluster-two")
    slots = {conn.keyslot(key) for key in (limiter_keys.registry, limiter_keys.meta, limiter_keys.stats,
                                           limiter_keys.state, limiter_keys.holders, limiter_keys.owners,
                                           limiter_keys.waiters, limiter_keys.waiting, limiter_keys.lost,
                                           limiter_keys.holdings)}
    assert slots == {conn.keyslot(keys.limiter("cluster-two"))}


def test_a_concurrent_limiter_holds_across_threads_and_its_refused_jobs_come_back(on_cluster, workers):
    names = [f"c{index}" for index in range(12)]
    for name in names:
        assert cluster_jobs.two_at_a_time.delay(name, 0.3).enqueued
    worker = workers.start("-c", "6", "-q", "default", redis_url=on_cluster.url())
    wait_until(lambda: len(_counts(on_cluster)) == len(names), 90, "every limited job to run")
    conn = on_cluster.cluster_client()
    wait_until(lambda: conn.zcard(keys.SCHEDULE) == 0 and int(conn.get(RUNNING) or 0) == 0, 30,
               "nothing left scheduled or running")
    assert _counts(on_cluster) == dict.fromkeys(names, 1)
    # Six threads and twelve jobs: the limit was reached, and never passed.
    assert int(conn.get(HIGHEST)) == 2
    limiter_keys = CLUSTER.limiter("cluster-two")
    # Six threads for two slots: jobs were refused and sent back through `schedule` (the two-step reschedule).
    assert int(conn.hget(limiter_keys.stats, "rescheduled") or 0) > 0
    # Waited for, not read once: the body's RUNNING count drops before the run's release step, so the last
    # job's hold can still be there when the wait above ends. A hold never released times this wait out.
    wait_until(lambda: conn.zcard(limiter_keys.holders) == 0 and conn.zcard(limiter_keys.holdings) == 0, 30,
               "every hold released")
    assert conn.zscore(keys.LIMITERS, "cluster-two") is not None
    # Waited for too: a job's ack (its LREM from the in-progress list) comes after its hold's release, and beside
    # two CPU burners the last job's ack was still on its way when the holds were gone. A refused job left on its
    # in-progress list (a two-step reschedule that never took it off) times this wait out.
    wait_until(lambda: not in_progress_left(conn), 30,
               "every in-progress list emptied")
    assert "CROSSSLOT" not in worker.log() and "ClusterUnsupported" not in worker.log()
    summary = {limiter.name: limiter for limiter in api.Limiters().all()}["cluster-two"]
    assert summary.kind == "concurrent"


def test_a_window_limiter_admits_at_most_its_size_in_any_second(on_cluster, workers):
    names = [f"w{index}" for index in range(15)]
    for name in names:
        assert cluster_jobs.five_a_second_job.delay(name).enqueued
    worker = workers.start("-c", "6", "-q", "default", redis_url=on_cluster.url())
    wait_until(lambda: len(_counts(on_cluster)) == len(names), 90, "every limited job to run")
    assert _counts(on_cluster) == dict.fromkeys(names, 1)
    admitted = sorted(float(value) for value in on_cluster.cluster_client().lrange(ADMITTED, 0, -1))
    assert len(admitted) == len(names)
    # Redis's clock, as the limiter decided: any sixth admission is a full second after the first of its five.
    assert all(later - earlier >= 1.0 - 1e-6 for earlier, later in zip(admitted, admitted[5:], strict=False))
    assert "CROSSSLOT" not in worker.log()


def test_a_limiter_is_reset_and_deleted_through_the_api(on_cluster):
    held = cluster_jobs.two_at_once.acquire(jid="held-one")
    conn = on_cluster.cluster_client()
    limiter_keys = CLUSTER.limiter("cluster-two")
    assert conn.zcard(limiter_keys.holders) == 1 and conn.zscore(keys.LIMITERS, "cluster-two") is not None
    assert api.Limiter("cluster-two").reset() == 1
    assert conn.zcard(limiter_keys.holders) == 0 and conn.zcard(limiter_keys.holdings) == 0
    held.release()  # freed under it by the reset: counted as an overage, once
    assert int(conn.hget(limiter_keys.stats, "overages")) == 1
    api.Limiter("cluster-two").delete()
    assert conn.zscore(keys.LIMITERS, "cluster-two") is None and not conn.exists(limiter_keys.meta, limiter_keys.stats)
