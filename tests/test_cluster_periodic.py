"""Periodic entries on a real Redis Cluster (docs/cluster.md, Periodic entries): decide, push once, clear.

The claim decides a slot in the entry's slot and records its job as pending; the leader pushes it
(push_once, by its jid) and clears it; every tick completes a pending job a crash left. Real
``runworkers`` leaders on the 3+3 cluster, on a clock SPEED times faster than Redis's.
"""

from __future__ import annotations

import json
import signal
from typing import Any

from django.conf import settings
from django.test import override_settings
from redis.crc import key_slot

from djwork.periodic.claim import slot_jid
from djwork.redis import key_layout, keys
from djwork.settings.conf import get_config
from djwork.worker import mode
from djwork.worker.cluster.periodic import ClusterPeriodicTicker
from djwork.worker.leader import Leader
from tests.helpers_worker import identities, wait_until
from tests.support.periodic_scenarios import no_overlap_entry_survives_a_killed_worker

SPEED = 20
MINUTE_MS = 60_000
EVERY_MINUTE = {"cron": "* * * * *", "job": "tests.periodic_jobs.tick", "name": "every-minute"}
STATE = keys.periodic_state("every-minute")


def _now(conn) -> float:
    seconds, micros = conn.time()
    return seconds + micros / 1_000_000


def _watermark(conn) -> int:
    value = conn.hget(STATE, "last_slot")
    return int(value) if value else 0


def _enqueued(conn) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in reversed(conn.lrange(keys.queue("periodic-out"), 0, -1))]


def test_an_entry_s_state_and_history_share_a_slot_and_its_queue_is_elsewhere():
    assert key_slot(STATE.encode()) == key_slot(keys.cluster_periodic_history("every-minute").encode())
    assert key_slot(STATE.encode()) != key_slot(keys.queue("periodic-out").encode())


def _pending(conn) -> list[str]:
    return [name.decode() for name in conn.hkeys(STATE) if name.startswith(b"pending:")]


def test_pending_jobs_a_crash_left_are_pushed_once_by_the_next_tick_in_slot_order(on_cluster):
    with override_settings(DJWORK={**settings.DJWORK, "PERIODIC": [EVERY_MINUTE]}):
        config = get_config()
        ticker = ClusterPeriodicTicker(config, Leader(config, "host:1:abc"), "host:1:abc")
        conn = on_cluster.cluster_client()

        def job(jid: str) -> str:
            return "periodic-out\n" + json.dumps({"class": "tests.periodic_jobs.tick", "args": [],
                                                   "queue": "periodic-out", "jid": jid, "enqueued_at": 1.0})

        # A catch-up's claims cut short after their first step: decided, recorded as pending, not pushed.
        pending = {f"pending:120000:{'b' * 24}": job("b" * 24), f"pending:60000:{'a' * 24}": job("a" * 24)}
        conn.hset(STATE, mapping=pending)
        assert ticker.push_pending() == 2
        assert [each["jid"] for each in _enqueued(conn)] == ["a" * 24, "b" * 24]  # the older slot first
        assert _pending(conn) == []
        assert conn.sismember(keys.QUEUES, "periodic-out")
        # Cut short after their second step: pushed, not cleared. The next tick's pushes are no-ops.
        conn.hset(STATE, mapping=pending)
        assert ticker.push_pending() == 2
        assert [each["jid"] for each in _enqueued(conn)] == ["a" * 24, "b" * 24]
        assert _pending(conn) == []
        assert ticker.push_pending() == 0


def test_a_no_overlap_entry_runs_its_lock_in_its_state_s_slot(on_cluster):
    with override_settings(DJWORK={**settings.DJWORK, "PERIODIC": [{**EVERY_MINUTE, "overlap": False}]}):
        assert mode.mode_for(get_config()) is mode.CLUSTER  # no longer refused
    lock = key_layout.CLUSTER.periodic_lock("every-minute")
    assert lock.startswith(keys.PERIODIC_LOCK_PREFIX) and key_slot(lock.encode()) == key_slot(STATE.encode())


def test_leaders_on_a_cluster_fire_each_slot_once_across_a_killed_leader(on_cluster, workers):
    conn = on_cluster.cluster_client()
    clock = {"speed": SPEED, "origin": _now(conn)}
    overrides = {"PERIODIC": [EVERY_MINUTE], "TEST_CLOCK": clock, "LOG_JOBS": False}
    started = [workers.start("-c", "1", overrides=overrides, label=f"p{n}", redis_url=on_cluster.url())
               for n in (1, 2)]
    first = wait_until(lambda: _watermark(conn), 30, "a first slot fired")
    wait_until(lambda: _watermark(conn) >= first + MINUTE_MS, 30, "a second slot")

    def leader() -> Any:
        holder = conn.get(keys.LEADER)
        pids = {identity: info["pid"] for identity, info in identities(conn).items()}
        pid = pids.get(holder.decode()) if holder else None
        return next((worker for worker in started if worker.pid == pid), None)

    victim = wait_until(leader, 20, "the leader")
    victim.send(signal.SIGKILL)
    assert victim.wait_exit(10) == -signal.SIGKILL
    killed_at = _watermark(conn)
    wait_until(lambda: _watermark(conn) >= killed_at + 2 * MINUTE_MS, 60, "two slots fired by the other process")
    wait_until(lambda: not _pending(conn), 20, "the last claim's push")
    last = _watermark(conn)
    jobs = [job for job in _enqueued(conn) if job["djwork_periodic"]["entry"] == "every-minute"]
    slots = sorted(int(job["djwork_periodic"]["slot"] * 1000) for job in jobs)
    assert slots == list(range(first, last + 1, MINUTE_MS)), "every slot exactly once, none missed"
    assert all(job["jid"] == slot_jid("every-minute", int(job["djwork_periodic"]["slot"] * 1000)) for job in jobs)
    assert conn.llen(keys.cluster_periodic_history("every-minute")) > 0
    for worker in started:
        assert "CROSSSLOT" not in worker.log()


def test_a_no_overlap_entry_never_runs_twice_at_once_across_a_killed_worker(on_cluster, workers):
    """One server's test of it (tests/test_periodic_workers.py), its workers and reads on the cluster: two
    workers, the one running the entry's job killed with ``kill -9``; the run is recovered, finishes, and a
    later slot fires; no two runs overlap, and a slot was skipped while the lock was held."""
    workers.redis_url = on_cluster.url()
    no_overlap_entry_survives_a_killed_worker(workers, on_cluster.cluster_client())
