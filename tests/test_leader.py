"""Leader (djwork/worker/leader.py): the dear-leader lease, in this process against the private Redis.

TEST_CLOCK's speed shrinks the lease (30 s), renew (15 s) and look (60 s)
intervals; every wait is for a state the test can see in Redis or on the
component, never for a length of time.
"""

from __future__ import annotations

import threading

import pytest

from djwork import redis as redis_layer
from djwork.redis import scripts
from djwork.settings.conf import build_config
from djwork.worker.leader import Leader
from tests.helpers_worker import wait_until

SPEED = 30  # lease 1 s, renew 0.5 s, look 2 s


def leader(identity: str, **overrides) -> Leader:
    return Leader(build_config({"TEST_CLOCK": {"speed": SPEED}, **overrides}), identity)


def holder(raw_redis) -> str | None:
    value = raw_redis.get("dear-leader")
    return value.decode() if value else None


def test_one_process_leads_the_other_follows_and_takes_over_when_the_lease_is_released(raw_redis):
    first, second = leader("host:1:a"), leader("host:2:b")
    try:
        first.start()
        wait_until(first.is_leader, 5, "the first process to lead")
        second.start()
        assert holder(raw_redis) == "host:1:a"
        assert 0 < raw_redis.pttl("dear-leader") <= 1000
        # The leader renews: its lease outlives several of its own TTLs.
        # Seen as the TTL jumping back up between two reads (a first read taken just after a renew
        # is already the full TTL, so "higher than the first read" could never come).
        seen = {"last": raw_redis.pttl("dear-leader")}

        def renewed() -> bool:
            now = raw_redis.pttl("dear-leader")
            jumped, seen["last"] = now > seen["last"] + 50, now
            return jumped

        wait_until(renewed, 5, "a renew")
        assert not second.is_leader()
        first.stop()
        assert not first.is_leader()
        wait_until(second.is_leader, 5, "the follower to take over at its next look")
        assert holder(raw_redis) == "host:2:b" and second.term == 1
    finally:
        first.stop()
        second.stop()
    assert holder(raw_redis) is None  # a clean stop gives the lease up


def test_release_and_renew_never_touch_a_lease_someone_else_holds(raw_redis):
    raw_redis.set("dear-leader", "host:9:fresh", px=60_000)
    release = redis_layer.run(lambda conn: scripts.evaluate(conn, "leader_release", ["dear-leader"], ["host:1:old"]))
    renew = redis_layer.run(lambda conn: scripts.evaluate(conn, "leader_renew", ["dear-leader"], ["host:1:old", 5]))
    assert (release, renew) == (0, 0)
    assert holder(raw_redis) == "host:9:fresh" and raw_redis.pttl("dear-leader") > 5


def test_a_lapsed_lease_taken_by_another_is_not_renewed_and_is_campaigned_for_again(raw_redis):
    process = leader("host:1:a")
    try:
        process.start()
        wait_until(process.is_leader, 5, "leadership")
        # Our lease lapses and another process takes it (as after a long pause of ours).
        raw_redis.set("dear-leader", "host:2:b", px=1500)
        wait_until(lambda: not process.is_leader(), 5, "the loss to be noticed at the next renew")
        assert holder(raw_redis) == "host:2:b"
        # Re-campaigned for at once, not a minute later: it leads again when the other's lease lapses.
        wait_until(process.is_leader, 5, "leadership back after the other lease lapsed")
        assert process.term == 2
    finally:
        process.stop()


@pytest.mark.parametrize(("overrides", "env"), [({"LEADER": False}, ""), ({}, "false"), ({}, "0")])
def test_a_process_can_stay_out_of_the_campaign(raw_redis, monkeypatch, overrides, env):
    monkeypatch.setenv("DJWORK_LEADER", env)
    process = leader("host:1:a", **overrides)
    process.start()
    assert not process.running and not process.is_leader()
    process.stop()
    assert holder(raw_redis) is None


def test_racing_starts_spawn_one_campaigner_and_stop_is_bounded(raw_redis):
    process = leader("host:1:a")
    barrier = threading.Barrier(8)

    def start() -> None:
        barrier.wait()
        process.start()

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        wait_until(process.is_leader, 5, "leadership")
        campaigners = [thread for thread in threading.enumerate() if thread.name == "djwork-leader"]
        assert len(campaigners) == 1
    finally:
        process.stop(timeout=5)
    assert not process.running
    process.stop()  # idempotent
