"""Periodic entries run by real ``runworkers`` processes: leader killed, skewed clocks, downtime, no overlap.

The workers run on TEST_CLOCK: SPEED times faster than Redis's clock (a
``* * * * *`` slot every 3 s), leader lease, renew and look shrunk alike.
Slots are read back from what the leaders enqueued (queue:periodic-out, which
no worker reads) and from each entry's state hash; every wait is for such a
state, never for a length of time.
"""

from __future__ import annotations

import signal
from typing import Any

from djwork.periodic.claim import slot_jid
from djwork.periodic.clock import Clock
from tests.helpers_worker import identities, wait_until
from tests.support.periodic_clock import EVERY_MINUTE, MINUTE_MS, enqueued, fast_clock, overrides, redis_now
from tests.support.periodic_scenarios import no_overlap_entry_survives_a_killed_worker


def watermark(raw_redis, entry_id: str) -> int:
    value = raw_redis.hget(f"djwork:periodic:state:{entry_id}", "last_slot")
    return int(value) if value else 0


def leader_worker(raw_redis, started: list) -> Any:
    holder = raw_redis.get("dear-leader")
    pids = {identity: info["pid"] for identity, info in identities(raw_redis).items()}
    pid = pids.get(holder.decode()) if holder else None
    return next((worker for worker in started if worker.pid == pid), None)


def assert_one_job_per_slot(raw_redis, entry_id: str, first: int, last: int, clock: Clock) -> list[dict[str, Any]]:
    jobs = [job for job in enqueued(raw_redis) if job["djwork_periodic"]["entry"] == entry_id]
    slots = [int(job["djwork_periodic"]["slot"] * 1000) for job in jobs]
    assert sorted(slots) == list(range(first, last + 1, MINUTE_MS)), "every slot exactly once, none missed"
    for job, slot in zip(jobs, slots, strict=True):
        assert job["jid"] == slot_jid(entry_id, slot)
        # Never early on Redis's clock, whatever the enqueuing host's clock said.
        assert clock.simulated_ms(job["enqueued_at"]) >= slot
    return jobs


def test_leader_killed_just_before_a_slot_boundary_costs_no_slot_and_doubles_none(workers, raw_redis):
    clock = fast_clock(raw_redis)
    started = [workers.start("-c", "1", overrides=overrides(clock, EVERY_MINUTE), label=f"p{n}") for n in (1, 2, 3)]
    first = wait_until(lambda: watermark(raw_redis, "every-minute"), 30, "a first slot fired")
    simulated = Clock(**clock)

    def just_before_a_boundary() -> Any:
        into_minute = simulated.simulated(redis_now(raw_redis)) % 60
        victim = leader_worker(raw_redis, started)
        return victim if 40 <= into_minute < 57 and watermark(raw_redis, "every-minute") > first else None

    victim = wait_until(just_before_a_boundary, 30, "the leader, shortly before a slot boundary", interval=0.01)
    boundary = (simulated.simulated_ms(redis_now(raw_redis)) // MINUTE_MS + 1) * MINUTE_MS
    victim.send(signal.SIGKILL)
    assert victim.wait_exit(10) == -signal.SIGKILL
    wait_until(lambda: watermark(raw_redis, "every-minute") >= boundary + 2 * MINUTE_MS, 40,
               "two more slots after the one the killed leader would have fired")
    last = watermark(raw_redis, "every-minute")
    assert last - first >= 3 * MINUTE_MS
    assert_one_job_per_slot(raw_redis, "every-minute", first, last, simulated)
    assert leader_worker(raw_redis, started) not in (None, victim)


def test_two_processes_with_host_clocks_skewed_20s_either_way_fire_each_slot_once(workers, raw_redis):
    clock = fast_clock(raw_redis)
    ahead = workers.start("-c", "1", overrides=overrides({**clock, "skew": 20}, EVERY_MINUTE), label="ahead")
    behind = workers.start("-c", "1", overrides=overrides({**clock, "skew": -20}, EVERY_MINUTE), label="behind")
    first = wait_until(lambda: watermark(raw_redis, "every-minute"), 30, "a first slot fired")
    wait_until(lambda: watermark(raw_redis, "every-minute") >= first + MINUTE_MS, 30, "a second slot")
    # Hand the lease to the other process (a clean stop gives it up), so both clocks lead in turn.
    stopping = leader_worker(raw_redis, [ahead, behind])
    other = behind if stopping is ahead else ahead
    stopping.send(signal.SIGTERM)
    assert stopping.wait_exit(20) == 0
    other.wait_log("is the leader now", 20)
    handed_over = watermark(raw_redis, "every-minute")
    wait_until(lambda: watermark(raw_redis, "every-minute") >= handed_over + 2 * MINUTE_MS, 30,
               "two slots fired by the other process")
    assert_one_job_per_slot(raw_redis, "every-minute", first, watermark(raw_redis, "every-minute"), Clock(**clock))


def test_downtime_of_ten_slots_then_restart_fires_as_catch_up_says(workers, raw_redis):
    # Real speed, hourly slots, and a restart whose clock starts 10.5 hours later: a downtime of ten slots
    # chosen by the test, the restart landing mid-way between two slots whatever the boot takes.
    base = 1_780_272_000.0  # 2026-06-01T00:00:00Z, simulated
    entries = [{"cron": "0 * * * *", "job": "tests.periodic_jobs.tick", "name": name, "catch_up": catch_up,
                **({"max_lookback": lookback} if lookback else {})}
               for name, catch_up, lookback in (("none", "none", 0), ("latest", "latest", 0), ("all", "all", 0),
                                                ("capped", "all", 3 * 3600 + 60))]
    ids = [entry["name"] for entry in entries]
    before = workers.start("-c", "1", overrides=overrides({"origin": redis_now(raw_redis), "start": base + 900},
                                                          *entries), label="before")
    wait_until(lambda: all(raw_redis.hexists(f"djwork:periodic:state:{entry_id}", "last") for entry_id in ids), 30,
               "every entry watched")
    before.send(signal.SIGTERM)
    assert before.wait_exit(20) == 0
    assert enqueued(raw_redis) == []

    workers.start("-c", "1", overrides=overrides({"origin": redis_now(raw_redis), "start": base + 10.75 * 3600},
                                                 *entries), label="after")
    tenth = int((base + 10 * 3600) * 1000)
    wait_until(lambda: all(int(raw_redis.hget(f"djwork:periodic:state:{entry_id}", "last") or 0) == tenth
                           for entry_id in ids), 30, "every entry decided up to the tenth slot")
    fired = {entry_id: [int(job["djwork_periodic"]["slot"] * 1000 - base * 1000) // 3_600_000
                        for job in enqueued(raw_redis) if job["djwork_periodic"]["entry"] == entry_id]
             for entry_id in ids}
    assert fired == {"none": [], "latest": [10], "all": list(range(1, 11)), "capped": [8, 9, 10]}
    missed = {entry_id: int(raw_redis.hget(f"djwork:periodic:state:{entry_id}", "skipped_missed") or 0)
              for entry_id in ids}
    assert missed == {"none": 10, "latest": 9, "all": 0, "capped": 7}


# The worker releases the lock with the recovered run's ack (djwork_locks, djwork/job_locks.py); without
# that the entry stays wedged until lock_ttl and the last wait below times out.
def test_no_overlap_entry_never_runs_twice_at_once_and_fires_again_after_its_worker_is_killed(
        workers, raw_redis):
    no_overlap_entry_survives_a_killed_worker(workers, raw_redis)
