"""The cluster's fetch in the test process (djwork/worker/cluster/fetch.py), against the real 3+3 cluster.

One call per queue, each in its queue's slot, the calls of a round sent together: the limit must hold across
queues on different primaries, jobs must come out in the queues' order and oldest first, acks must reach
every node, and a queue whose primary failed over must be fetched from its new one.
"""

from __future__ import annotations

import json

import pytest

from djwork.redis import keys
from djwork.settings.conf import Capsule
from djwork.worker.cluster.fetch import ClusterFetcher
from djwork.worker.fetch import Ack, UnitOfWork

IDENTITY = "host:1:cluster"
QUEUES = ("q0", "q1", "q2", "q3")


def _job(queue: str, number: int) -> bytes:
    return json.dumps({"class": "tests.cluster_jobs.noop", "args": [], "jid": f"{queue}-{number}",
                       "queue": queue, "retry": True}).encode()


def _jids(units: list[UnitOfWork]) -> list[str]:
    return [json.loads(unit.raw)["jid"] for unit in units]


@pytest.fixture
def fetcher(on_cluster):
    made = ClusterFetcher(IDENTITY, Capsule("default", 10, tuple((queue, 0) for queue in QUEUES)), True)
    yield made
    made.close()


def _enqueue(cluster, queue: str, count: int) -> None:
    conn = cluster.cluster_client()
    for number in range(count):  # LPUSH, as a client enqueues: number 0 is the oldest
        conn.lpush(keys.queue(queue), _job(queue, number))


def test_the_limit_holds_across_queues_of_different_primaries_and_the_order_is_kept(on_cluster, fetcher):
    conn = on_cluster.cluster_client()
    assert len({conn.get_node_from_key(keys.queue(queue)).name for queue in QUEUES}) > 1
    for queue in ("q1", "q2", "q3"):
        _enqueue(on_cluster, queue, 4)
    first = fetcher.fetch(6, [])  # q0 is empty: the rest of the order fills the limit, and no more
    assert _jids(first) == ["q1-0", "q1-1", "q1-2", "q1-3", "q2-0", "q2-1"]
    second = fetcher.fetch(10, [])
    assert _jids(second) == ["q2-2", "q2-3", "q3-0", "q3-1", "q3-2", "q3-3"]
    for queue in ("q1", "q2", "q3"):
        assert conn.llen(keys.queue(queue)) == 0
        assert conn.llen(keys.cluster_in_progress(IDENTITY, queue)) == 4
    assert fetcher.fetch(10, []) == []


def test_acks_ride_on_the_next_fetch_to_every_node(on_cluster, fetcher):
    for queue in QUEUES:
        _enqueue(on_cluster, queue, 2)
    units = fetcher.fetch(8, [])
    assert len(units) == 8
    acks = [Ack(unit.queue_index, unit.raw, json.loads(unit.raw)["jid"]) for unit in units]
    assert fetcher.fetch(8, acks) == []
    conn = on_cluster.cluster_client()
    assert [conn.llen(keys.cluster_in_progress(IDENTITY, queue)) for queue in QUEUES] == [0, 0, 0, 0]


def test_a_queue_whose_primary_failed_over_is_fetched_from_the_new_one(on_cluster, fetcher):
    _enqueue(on_cluster, "q0", 3)
    assert _jids(fetcher.fetch(1, [])) == ["q0-0"]
    owner = on_cluster.cluster_client().get_node_from_key(keys.queue("q0")).port
    on_cluster.failover(owner)
    # The fetch's client still maps the slot to the demoted node: MOVED (nothing ran), sent again to the new one.
    assert _jids(fetcher.fetch(5, [])) == ["q0-1", "q0-2"]
