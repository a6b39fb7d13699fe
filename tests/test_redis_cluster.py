"""djwork against a real Redis Cluster (3 primaries + 3 replicas, tests/support/redis_cluster.py).

Phase 1 of docs/cluster.md: the connections, the replay policy across a failover, and the reads of
djwork.api that walk the key space. Every wait is for something the cluster shows (roles flipped,
``cluster_state:ok``); nothing is timed.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil

import pytest
import redis as redis_py
from django.urls import reverse

from djwork import api
from djwork import redis as redis_layer
from djwork.api import access
from djwork.redis import keys
from tests.support.redis_cluster import ClusterDidNotForm, LoopbackCluster


def _keys_per_primary(cluster) -> dict[int, int]:
    counts = {}
    for port in cluster.primary_ports():
        with cluster.client(port) as node:
            counts[port] = node.dbsize()
    return counts


def test_the_layer_reaches_every_primary_from_one_node_of_the_url(on_cluster):
    assert isinstance(redis_layer.client(), redis_py.RedisCluster)
    for index in range(60):
        redis_layer.run(lambda conn, index=index: conn.set(f"k{index}", index))
    assert redis_layer.run(lambda conn: conn.get("k42"), idempotent=True) == b"42"
    # Routed by slot: each primary holds some of them, though the URL named one node.
    counts = _keys_per_primary(on_cluster)
    assert sum(counts.values()) == 60 and all(counts.values()), counts


def test_a_write_after_a_failover_reaches_the_new_primary_and_runs_once(on_cluster, events):
    assert redis_layer.run(lambda conn: conn.incr("counter")) == 1
    owner = redis_layer.client().get_node_from_key("counter")
    promoted = on_cluster.failover(owner.port)
    # The client still maps the slot to the demoted node: the node answers MOVED (it ran nothing),
    # redis-py follows it, and the increment lands once on the new primary.
    assert redis_layer.run(lambda conn: conn.incr("counter")) == 2
    assert redis_layer.client().get_node_from_key("counter").port == promoted
    with on_cluster.client(promoted) as node:
        assert node.get("counter") == "2"
    assert [event for event in events if event.kind == "gave_up"] == []


def test_the_unique_locks_listing_pages_through_every_primary(on_cluster):
    digests = [f"d{index:03}" for index in range(45)]
    for digest in digests:
        redis_layer.run(lambda conn, digest=digest: conn.set(keys.unique(digest), f"jid-{digest}", ex=600))
    assert all(_keys_per_primary(on_cluster).values())
    seen, cursor, cursors = [], "0", []
    while True:
        page = api.UniqueLocks().page(cursor, per_page=10)
        seen += [lock.digest for lock in page.locks]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
        cursors.append(cursor)
    assert sorted(seen) == digests
    assert any(":" in cursor for cursor in cursors)  # "<primary>:<its cursor>": a walk node by node


def test_stats_history_reads_days_whose_keys_hash_to_different_slots(on_cluster):
    today = dt.date(2026, 3, 10)
    for offset, count in enumerate((5, 0, 7)):
        day = (today - dt.timedelta(days=offset)).isoformat()
        if count:
            redis_layer.run(lambda conn, day=day, count=count: conn.set(keys.stat_processed_day(day), count))
    redis_layer.run(lambda conn: conn.set(keys.stat_failed_day(today.isoformat()), 2))
    history = api.Stats.history(3, start=today)
    assert [(stat.processed, stat.failed) for stat in history] == [(5, 2), (0, 0), (7, 0)]


def test_the_overview_shows_every_primary_and_the_cluster_url_without_password(on_cluster, admin_client):
    for name in ("default", "critical", "low"):
        redis_layer.run(lambda conn, name=name: conn.sadd(keys.QUEUES, name))
        payload = json.dumps({"jid": f"j-{name}", "class": "X"})
        redis_layer.run(lambda conn, name=name, payload=payload: conn.lpush(keys.queue(name), payload))
    info = api.redis_info()
    assert info["role"] == "master" and info["redis_version"]
    assert api.Stats.fetch().queues == {"default": 1, "critical": 1, "low": 1}
    page = admin_client.get(reverse("djwork_dashboard:overview"))
    assert page.status_code == 200
    assert f"redis+cluster://127.0.0.1:{on_cluster.nodes[0].port}/0" in page.content.decode()


def test_reads_that_take_the_servers_clock_ask_one_primary_for_it(on_cluster):
    # A cluster refuses TIME in a pipeline (it belongs to no slot); these reads put it first in theirs.
    redis_layer.run(lambda conn: conn.zadd(keys.LIMITERS, {"expired-api": 1.0}))
    assert api.Limiters().page().total == 0  # its expiry is long past by the cluster's clock
    assert api.Limiter("missing").detail() is None


def test_a_cluster_that_fails_to_form_leaves_no_server_running(tmp_path):
    cluster = LoopbackCluster(str(tmp_path / "cluster"), primaries=3)
    cluster.cli = shutil.which("false")  # `redis-cli --cluster create` fails after every node started
    started = []
    original = cluster._start_nodes

    def record() -> None:
        original()
        started.extend(node.process for node in cluster.nodes)

    cluster._start_nodes = record
    with pytest.raises(ClusterDidNotForm, match="create failed"):
        cluster.start()
    assert len(started) == 6 and all(process.poll() is not None for process in started)
    assert cluster.nodes == []


def test_a_step_the_cluster_refuses_is_an_api_error_not_an_outage(on_cluster):
    # Keys in two slots: redis-py's cluster client refuses the command before sending it.
    with pytest.raises(api.ApiError, match="not available on a Redis Cluster yet") as refused:
        access.write(lambda conn: conn.mset({"k-one": 1, "k-two": 2}), replay=True)
    assert not isinstance(refused.value, api.RedisUnavailable)
    assert redis_layer.run(lambda conn: conn.exists("k-one"), idempotent=True) == 0


def test_the_queue_reads_count_a_clusters_isolated_jobs_under_its_tagged_name(on_cluster):
    conn = on_cluster.cluster_client()
    conn.sadd(keys.QUEUES, "mail")
    conn.rpush(keys.queue("mail"), '{"jid":"a"}')
    conn.rpush(keys.cluster_isolated("mail"), '{"jid":"b"}', '{"jid":"c"}')
    (summary,) = api.Queue.all()
    assert (summary.name, summary.size, summary.isolated) == ("mail", 1, 2)
    assert api.Queue("mail").isolated_size() == 2
