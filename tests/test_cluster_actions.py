"""The API's clears, the Locks page's release and a periodic run-now on a real Redis Cluster (3 primaries + 3
replicas): docs/cluster.md, Dashboard actions. Each is single-slot steps there (djwork/api/cluster_actions.py);
each test checks what the action left and that a step cut short is finished by the action or the leader.
"""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import override_settings
from redis.crc import key_slot

from djwork import api
from djwork.jobs import resolve
from djwork.periodic import claim as claims
from djwork.redis import key_layout, keys, scripts
from djwork.settings.conf import get_config
from djwork.worker.cluster.periodic import ClusterPeriodicTicker
from djwork.worker.leader import Leader

ENTRY = {"cron": "0 0 1 1 *", "job": "tests.periodic_jobs.tick", "name": "yearly", "queue": "periodic-out"}
STATE = keys.periodic_state("yearly")


def _job(jid: str, lock: str, queue: str = "q1") -> str:
    return json.dumps({"class": "x", "args": [], "jid": jid, "queue": queue, "djwork_locks": [lock]})


def _copies(conn) -> list[bytes]:
    return list(conn.scan_iter(match=f"{keys.CLEARING_PREFIX}*"))


def test_a_clear_sets_the_key_aside_in_its_own_slot():
    for key in (keys.queue("q1"), keys.SCHEDULE, keys.DEAD):
        copy = key_layout.CLUSTER.clearing_copy(key, "abc")
        assert copy.startswith(keys.CLEARING_PREFIX) and key_slot(copy.encode()) == key_slot(key.encode())
    assert key_layout.SINGLE_SERVER.clearing_copy(keys.queue("q1"), "abc") == f"{keys.CLEARING_PREFIX}abc"


def test_clearing_a_queue_or_a_set_releases_its_jobs_locks_on_a_cluster(on_cluster):
    conn = on_cluster.cluster_client()
    conn.sadd(keys.QUEUES, "q1")
    conn.lpush(keys.queue("q1"), _job("q1", "unique:q1"), _job("q2", "unique:q2"), json.dumps({"class": "y"}))
    conn.zadd(keys.RETRY, {_job("r1", "unique:r1"): 1.0})
    for lock, owner in {"unique:q1": "q1", "unique:q2": "someone-else", "unique:r1": "r1"}.items():
        conn.set(lock, owner)
    # The locks and the queue are on different primaries: a one-server script would be refused.
    assert len({key_slot(key.encode()) for key in ("unique:q1", "unique:r1", keys.queue("q1"))}) == 3
    assert api.Queue("q1").clear() == 3
    assert api.RetrySet().clear() == 1
    assert not conn.exists(keys.queue("q1")) and not conn.exists(keys.RETRY)
    assert conn.get("unique:q1") is None and conn.get("unique:r1") is None
    assert conn.get("unique:q2") == b"someone-else"  # owner-checked: another job's lock stays
    assert not conn.sismember(keys.QUEUES, "q1")
    assert _copies(conn) == []
    assert api.Queue("q1").clear() == 0  # nothing left: nothing set aside


def test_the_locks_page_releases_a_lock_only_for_its_owner_on_a_cluster(on_cluster):
    conn = on_cluster.cluster_client()
    conn.set(keys.unique("d1"), "jid-1", px=600_000)
    locks = api.UniqueLocks()
    assert locks.release("d1", owner="jid-2") is False
    assert conn.get(keys.unique("d1")) == b"jid-1"
    assert locks.release("d1", owner="jid-1") is True
    assert conn.get(keys.unique("d1")) is None
    assert locks.release("d1", owner="jid-1") is False


def _queued(conn) -> list[dict]:
    return [json.loads(raw) for raw in reversed(conn.lrange(keys.queue("periodic-out"), 0, -1))]


def _pending(conn) -> list[bytes]:
    return [name for name in conn.hkeys(STATE) if name.startswith(b"pending:")]


def test_run_now_on_a_cluster_pushes_once_and_a_no_overlap_run_holds_its_lock(on_cluster):
    conn = on_cluster.cluster_client()
    with override_settings(DJWORK={**settings.DJWORK, "PERIODIC": [{**ENTRY, "overlap": False}]}):
        periodic = api.Periodic()
        jid = periodic.run_now("yearly")
        (job,) = _queued(conn)
        assert job["jid"] == jid and job["djwork_periodic"]["entry"] == "yearly"
        assert _pending(conn) == [] and conn.sismember(keys.QUEUES, "periodic-out")
        assert conn.get(key_layout.CLUSTER.periodic_lock("yearly")).decode() == jid
        assert periodic.get("yearly").runs[0].kind == "run-now"
        with pytest.raises(api.ApiError, match=f"its run {jid} is still queued, running or retrying"):
            periodic.run_now("yearly")
        assert len(_queued(conn)) == 1
        assert periodic.release_lock("yearly") is True
        assert periodic.run_now("yearly") != jid
        assert len(_queued(conn)) == 2


def test_a_run_now_cut_short_after_its_claim_is_pushed_once_by_the_leader_s_next_tick(on_cluster):
    conn = on_cluster.cluster_client()
    with override_settings(DJWORK={**settings.DJWORK, "PERIODIC": [ENTRY]}):
        config = get_config()
        periodic = api.Periodic(config)
        entry = periodic.local["yearly"]
        call = claims.run_now_call(entry, resolve(entry.job), config, periodic.clock)
        # Step 1 alone, as a crash after it leaves it: the run counted and pending, nothing queued.
        history = key_layout.CLUSTER.periodic_history("yearly")
        reply = scripts.evaluate(conn, "periodic_claim_pending",
                                 [STATE, history, key_layout.CLUSTER.periodic_lock("yearly")], call.args)
        assert claims.status_of(reply)[0] == "fired" and len(_pending(conn)) == 1 and _queued(conn) == []
        ticker = ClusterPeriodicTicker(config, Leader(config, "host:1:abc"), "host:1:abc")
        assert ticker.push_pending() == 1
        assert [job["jid"] for job in _queued(conn)] == [call.jid] and _pending(conn) == []
        # Cut short after its push: the field back, the next tick's push is a no-op that clears it.
        conn.hset(STATE, f"pending:0:{call.jid}", "periodic-out\n" + json.dumps(_queued(conn)[0]))
        assert ticker.push_pending() == 1
        assert [job["jid"] for job in _queued(conn)] == [call.jid] and _pending(conn) == []
