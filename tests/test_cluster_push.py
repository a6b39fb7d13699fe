"""Pushing on a Redis Cluster (docs/cluster.md, Pipelines): grouped per node, and the move's push_once.

Against the real 3+3 cluster of tests/support/redis_cluster.py, reached through one node of it.
"""

from __future__ import annotations

import time

from djwork import client
from djwork import redis as redis_layer
from djwork.payload import loads, new_jid
from djwork.redis import keys, scripts

QUEUES = [f"q{index}" for index in range(12)]


def _queue_jids(cluster_client, queue: str) -> list[str]:
    return [loads(raw)["jid"] for raw in reversed(cluster_client.lrange(keys.queue(queue), 0, -1))]


def test_a_bulk_push_over_queues_of_every_primary_lands_whole_and_in_order(on_cluster):
    payloads = [{"class": "tests.jobs.noop", "args": [index], "queue": QUEUES[index % len(QUEUES)], "jid": new_jid()}
                for index in range(120)]
    jids = client.push_bulk(payloads)
    conn = on_cluster.cluster_client()
    nodes = {conn.get_node_from_key(keys.queue(queue)).name for queue in QUEUES}
    assert len(nodes) == 3  # the queues spread over every primary: the push had to reach each
    for position, queue in enumerate(QUEUES):
        assert _queue_jids(conn, queue) == jids[position::len(QUEUES)]  # FIFO per queue
    assert {member.decode() for member in conn.smembers(keys.QUEUES)} == set(QUEUES)


def test_a_single_push_and_a_scheduled_one(on_cluster):
    jid = client.push({"class": "tests.jobs.noop", "args": [], "queue": "mail", "jid": new_jid()})
    later = client.push({"class": "tests.jobs.noop", "args": [], "queue": "mail", "jid": new_jid()},
                        at=time.time() + 600)
    conn = on_cluster.cluster_client()
    assert _queue_jids(conn, "mail") == [jid]
    assert [loads(raw)["jid"] for raw in conn.zrange(keys.SCHEDULE, 0, -1)] == [later]


def test_push_once_pushes_a_move_once_and_a_new_move_of_the_same_job_again(on_cluster):
    def push_once(move: str, payload: str) -> int:
        return redis_layer.run(lambda conn: scripts.evaluate(
            conn, "push_once", [keys.pushed("mail"), keys.queue("mail")], [move, payload, time.time(),
                                                                           keys.PUSHED_HORIZON]))

    assert push_once("retry:aaa", '{"jid":"j1","retry_count":1}') == 1
    assert push_once("retry:aaa", '{"jid":"j1","retry_count":1}') == 0  # the repeat of a half-done move
    assert push_once("retry:bbb", '{"jid":"j1","retry_count":2}') == 1  # the same job retried again
    conn = on_cluster.cluster_client()
    assert conn.llen(keys.queue("mail")) == 2
