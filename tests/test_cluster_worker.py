"""Workers on a real Redis Cluster (3 primaries + 3 replicas, tests/support/redis_cluster.py): docs/cluster.md.

Real ``runworkers`` processes fetch from queues spread over every primary. Each job counts its runs in
the cluster (tests/cluster_jobs.py), so a test tells exactly-once, at-least-once and lost apart by the
counts; every wait is for something the cluster shows.
"""

from __future__ import annotations

import json
import signal
import time

from djwork import client
from djwork.payload import new_jid
from djwork.redis import keys
from tests import worker_jobs
from tests.cluster_jobs import COUNTS, FAILURES, STARTS
from tests.helpers_worker import wait_until
from tests.support.queues import in_progress_left

QUEUES = [f"q{index}" for index in range(12)]
QUEUE_ARGS = [argument for queue in QUEUES for argument in ("-q", queue)]


def _push(job: str, args_of: list[list], queues: list[str], at: float | None = None) -> list[str]:
    payloads = [{"class": f"tests.cluster_jobs.{job}", "args": args, "queue": queues[index % len(queues)],
                 "jid": new_jid(), "retry": 3} for index, args in enumerate(args_of)]
    return client.push_bulk(payloads, at=at)


def _counts(cluster, key: str = COUNTS) -> dict[str, int]:
    return {name.decode(): int(value) for name, value in cluster.cluster_client().hgetall(key).items()}


def _in_progress_left(cluster) -> list[str]:
    return in_progress_left(cluster.cluster_client())


def _queued(cluster) -> int:
    conn = cluster.cluster_client()
    return sum(conn.llen(keys.queue(queue)) for queue in QUEUES)


def test_jobs_on_queues_of_every_primary_each_run_exactly_once(on_cluster, workers):
    conn = on_cluster.cluster_client()
    assert len({conn.get_node_from_key(keys.queue(queue)).name for queue in QUEUES}) == 3
    names = [f"k{index}" for index in range(600)]
    _push("record", [[name] for name in names], QUEUES)
    worker = workers.start("-c", "8", *QUEUE_ARGS, redis_url=on_cluster.url())
    wait_until(lambda: len(_counts(on_cluster)) == len(names), 60, "every job to run")
    # Every queue drained and nothing left in progress: then no job can run a second time later.
    wait_until(lambda: _queued(on_cluster) == 0 and not _in_progress_left(on_cluster), 30, "the queues to drain")
    assert _counts(on_cluster) == dict.fromkeys(names, 1)
    assert "CROSSSLOT" not in worker.log()


def test_a_retry_and_a_scheduled_job_are_promoted_onto_their_queues(on_cluster, workers):
    _push("fail_once", [["retried"]], ["q3"])
    _push("record", [["scheduled"]], ["q7"], at=time.time() + 1)
    worker = workers.start(*QUEUE_ARGS, redis_url=on_cluster.url())
    wait_until(lambda: _counts(on_cluster).keys() >= {"retried", "scheduled"}, 60, "both jobs to run")
    assert _counts(on_cluster, FAILURES) == {"retried": 2}  # the failing run, then its retry
    conn = on_cluster.cluster_client()
    wait_until(lambda: conn.zcard(keys.RETRY) == 0 and conn.zcard(keys.SCHEDULE) == 0, 10, "the sets to empty")
    assert _counts(on_cluster) == {"retried": 1, "scheduled": 1}
    assert "CROSSSLOT" not in worker.log()


def test_a_worker_killed_mid_drain_loses_no_job(on_cluster, workers):
    names = [f"s{index}" for index in range(120)]
    # Jobs of 0.3 s: at 0.05 s a loaded run caught the worker between jobs, and the kill proved nothing.
    _push("slow", [[name, 0.3] for name in names], QUEUES)
    first = workers.start("-c", "6", *QUEUE_ARGS, redis_url=on_cluster.url(), label="killed")
    wait_until(lambda: len(_counts(on_cluster)) >= 20 and set(_counts(on_cluster, STARTS)) - set(_counts(on_cluster)),
               60, "the first worker to be mid-drain, with jobs running")
    first.kill()  # SIGKILL: its in-progress jobs are left where orphan recovery finds them
    started_when_killed = _counts(on_cluster, STARTS)
    unfinished = [name for name in started_when_killed if name not in _counts(on_cluster)]
    workers.start("-c", "6", *QUEUE_ARGS, redis_url=on_cluster.url(), label="rescuer")
    wait_until(lambda: len(_counts(on_cluster)) == len(names), 90, "every job to have completed once")
    wait_until(lambda: _queued(on_cluster) == 0 and not _in_progress_left(on_cluster), 30, "nothing left queued")
    counts = _counts(on_cluster)
    assert sorted(counts) == sorted(names)  # none lost
    # Only a job the kill interrupted may have run twice (at least once, as on one server).
    assert {name for name, count in counts.items() if count > 1} <= set(started_when_killed)
    assert unfinished, "the kill interrupted no job: the test proved nothing"


def test_a_primary_failed_over_mid_drain_loses_no_job(on_cluster, workers):
    names = [f"f{index}" for index in range(900)]
    _push("slow", [[name, 0.05] for name in names], QUEUES)
    worker = workers.start("-c", "6", *QUEUE_ARGS, redis_url=on_cluster.url())
    wait_until(lambda: len(_counts(on_cluster)) >= 40, 60, "the worker to be mid-drain")
    owner = on_cluster.cluster_client().get_node_from_key(keys.queue("q0")).port
    promoted = on_cluster.failover(owner)
    assert promoted != owner
    assert len(_counts(on_cluster)) < len(names), "the drain ended before the failover: the test proved nothing"
    wait_until(lambda: len(_counts(on_cluster)) == len(names), 120, "every job to have completed")
    wait_until(lambda: _queued(on_cluster) == 0 and not _in_progress_left(on_cluster), 30, "nothing left queued")
    assert sorted(_counts(on_cluster)) == sorted(names)  # none lost
    assert worker.alive()


def test_basic_fetch_on_a_cluster_runs_each_job_once_and_keeps_no_in_progress_list(on_cluster, workers):
    names = [f"b{index}" for index in range(120)]
    _push("record", [[name] for name in names], QUEUES)
    workers.start(*QUEUE_ARGS, overrides={"FETCH": "basic"}, redis_url=on_cluster.url())
    wait_until(lambda: len(_counts(on_cluster)) == len(names), 60, "every job to run")
    wait_until(lambda: _queued(on_cluster) == 0, 30, "the queues to drain")
    assert _counts(on_cluster) == dict.fromkeys(names, 1)
    assert on_cluster.cluster_client().scard(keys.IN_PROGRESS_REGISTRY) == 0


def test_a_poison_pill_is_isolated_then_buried_in_dead_and_the_survivor_keeps_working(on_cluster, workers):
    max_orphanings = 2
    overrides = {"MAX_ORPHANINGS": max_orphanings, "ORPHAN_THRESHOLD": 2, "HEARTBEAT_INTERVAL": 0.5}
    conn = on_cluster.cluster_client()
    pill = worker_jobs.kill_self.delay("pill")
    for attempt in range(1, max_orphanings + 2):
        worker = workers.start("-c", "2", overrides=overrides, label=f"pill-{attempt}", redis_url=on_cluster.url())
        wait_until(lambda attempt=attempt: len(worker_jobs.notes(conn, job="kill_self")) >= attempt, 30,
                   f"run {attempt} of the poison pill")
        assert worker.wait_exit(10) == -signal.SIGKILL
        assert conn.zcard(keys.DEAD) == 0
    survivor = workers.start("-c", "2", overrides=overrides, label="survivor", redis_url=on_cluster.url())
    dead = wait_until(lambda: conn.zrange(keys.DEAD, 0, -1), 30, "the pill in dead")
    (buried,) = [json.loads(member) for member in dead]
    assert (buried["jid"], buried["error_class"]) == (pill.jid, "djwork.PoisonPill")
    assert len(worker_jobs.notes(conn, job="kill_self")) == max_orphanings + 1  # never run again once buried
    # The burial is two steps on a cluster: filed in dead (dead's slot), then taken off its list with its count
    # (the queue's slot). A loaded run read the count between the two.
    wait_until(lambda: conn.hget(keys.cluster_orphan_counts("default"), pill.jid) is None
               and not _in_progress_left(on_cluster), 30, "the burial's last step: the pill off its list, count gone")
    assert conn.llen(keys.queue("default")) == 0 and conn.llen(keys.cluster_isolated("default")) == 0
    _push("record", [["after"]], ["default"])
    wait_until(lambda: _counts(on_cluster).get("after") == 1, 20, "a job after the pill")
    assert survivor.alive()
