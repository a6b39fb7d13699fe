"""Rate limiters around real jobs on real workers: limits hold cluster-wide, refusals reschedule, crashes free slots."""

from __future__ import annotations

import signal

from djwork.api import History, Limiter
from djwork.redis import keys
from tests import limiter_jobs
from tests.helpers_worker import counts, wait_until

FAST_POLL = {"POLL_INTERVAL_AVERAGE": 0.1}


def _starts(raw_redis, key: str = limiter_jobs.STARTED_AT) -> list[float]:
    return sorted(float(stamp) for stamp in raw_redis.lrange(key, 0, -1))


def _most_in_any_span(starts: list[float], span: float) -> int:
    most, first = 0, 0
    for last, stamp in enumerate(starts):
        while stamp - starts[first] >= span:
            first += 1
        most = max(most, last - first + 1)
    return most


def _used(name: str) -> float | None:
    detail = Limiter(name).detail()
    return None if detail is None else detail.summary.used


def _drained(raw_redis, names: list[str]) -> bool:
    seen = counts(raw_redis)
    return all(seen.get(name) for name in names)


def _no_retry_count_anywhere(raw_redis) -> None:
    assert raw_redis.zcard("retry") == 0 and raw_redis.zcard("dead") == 0
    for member in raw_redis.zrange("schedule", 0, -1):
        assert b"retry_count" not in member


def test_concurrent_three_across_two_processes_of_ten_threads(workers, raw_redis):
    names = [f"c-{number}" for number in range(60)]
    for name in names:
        limiter_jobs.concurrent_job.delay(name, 0.1)
    for label in ("a", "b"):
        workers.start("-c", "10", overrides=FAST_POLL, label=label)
    wait_until(lambda: _drained(raw_redis, names), 90, "all 60 limited jobs")
    seen = counts(raw_redis)
    assert all(seen[name] == 1 for name in names), "a job ran twice"
    assert raw_redis.get(limiter_jobs.HIGHEST) == b"3"
    _no_retry_count_anywhere(raw_redis)
    # A refused job waited at most wait_timeout (1 s) for a slot, then went back to `schedule`:
    # no execution, waits included, held a processor thread much longer than that plus the job.
    runs = History().recent(count=500).runs
    assert runs and max(run.duration_ms for run in runs) < (1.0 + 0.1 + 2.0) * 1000
    # The bodies' counts come before their slots' releases: the last release can land after the drain is seen.
    def held_and_used() -> tuple[int, int]:
        summary = Limiter("test-three").detail().summary
        return summary.stats.held, summary.used

    wait_until(lambda: held_and_used() == (60, 0), 10, "all 60 slots released")


def test_window_of_ten_a_second_never_stampedes_nor_idles(workers, raw_redis):
    names = [f"w-{number}" for number in range(100)]
    for name in names:
        limiter_jobs.windowed_job.delay(name)
    workers.start("-c", "10", overrides=FAST_POLL)
    wait_until(lambda: _drained(raw_redis, names), 90, "all 100 windowed jobs")
    starts = _starts(raw_redis)
    admitted = _starts(raw_redis, limiter_jobs.ADMITTED_AT)
    assert len(starts) == len(admitted) == 100
    assert _most_in_any_span(admitted, 1.0) <= 10
    # 100 starts at 10 per sliding second: the 100th can come 9 s after the first at best.
    # Within 110 % of the ideal 10 s drain: no stampede-then-idle of a linear backoff.
    assert starts[-1] - starts[0] <= 11.0 - 1.0, f"drain took {starts[-1] - starts[0]:.2f} s from first start"
    assert all(count == 1 for count in counts(raw_redis).values())
    _no_retry_count_anywhere(raw_redis)


def test_celery_rate_limit_is_global_across_processes(workers, raw_redis):
    names = [f"r-{number}" for number in range(60)]
    for name in names:
        limiter_jobs.celery_rated_job.delay(name)
    for label in ("a", "b"):
        workers.start("-c", "5", overrides=FAST_POLL, label=label)
    wait_until(lambda: _drained(raw_redis, names), 90, "all 60 rate-limited jobs")
    admitted = _starts(raw_redis, limiter_jobs.ADMITTED_AT)
    assert len(admitted) == 60
    assert _most_in_any_span(admitted, 1.0) <= 20


def test_a_killed_holder_frees_its_slot_with_orphan_recovery_not_lock_timeout(workers, raw_redis):
    overrides = {"ORPHAN_THRESHOLD": 2, "HEARTBEAT_INTERVAL": 0.5, "REAPER_INTERVAL": 0.5}
    victim = workers.start("-c", "2", overrides=overrides, label="victim")
    limiter_jobs.concurrent_long_once.delay("held", 600)
    wait_until(lambda: _used("test-three") == 1, 20, "the slot to be held")
    # And the body entered: killed between the acquire and the body's first write, the job would
    # look unstarted and take its long path again after recovery.
    wait_until(lambda: raw_redis.hget("t:starts", "held") == b"1", 20, "the body to start")
    victim.kill()
    assert victim.wait_exit(10) == -signal.SIGKILL
    assert _used("test-three") == 1  # still held: its owner is gone, not released
    survivor = workers.start("-c", "2", overrides=overrides, label="survivor")
    # lock_timeout is 300 s; orphan recovery (2 s threshold) must free it long before.
    wait_until(lambda: counts(raw_redis).get("held") == 1, 30, "the recovered job to run again")
    wait_until(lambda: _used("test-three") == 0, 10, "the slot to be free")
    assert "freed 1 limiter slot(s) held by dead process" in survivor.log()
    assert Limiter("test-three").detail().summary.stats.overages == 0


def test_a_stalled_holder_taken_for_dead_counts_its_overlap_as_overages_warns_and_shows_them(
        workers, raw_redis, admin_client):
    overrides = {"ORPHAN_THRESHOLD": 2, "HEARTBEAT_INTERVAL": 0.5, "REAPER_INTERVAL": 0.5}
    stalled = workers.start("-c", "3", "-q", "default", overrides=overrides, label="stalled")
    limiter_jobs.stalled_once.delay_many([(f"old-{index}", 5) for index in range(3)])
    wait_until(lambda: _used("test-stall") == 3 and raw_redis.hlen("t:starts") == 3, 20,
               "all three slots held and the bodies started")
    stalled.send(signal.SIGSTOP)  # past lock_timeout (1 s) and ORPHAN_THRESHOLD: taken for dead
    # The reaper only: it takes nothing from `default`, so no acquire reclaims the lapsed leases first.
    reaper = workers.start("-c", "1", "-q", "low", overrides=overrides, label="reaper")
    reaper.wait_log("freed 3 limiter slot(s) held by dead process", 30)
    stalled.send(signal.SIGCONT)
    wait_until(lambda: Limiter("test-stall").detail().summary.stats.overages == 3, 30,
               "the three holders that ran on counted as overages")
    # Logged after the release step that counted it: waited for (read at once, none was written yet beside two
    # CPU burners).
    wait_until(lambda: stalled.log().count("slot was freed under its holder") == 3, 30, "the three warnings")
    assert all(" WARNING " in line for line in stalled.log().splitlines() if "freed under its holder" in line)
    page = admin_client.get("/djwork/limits/").content.decode()
    assert "3 overages" in page


def test_a_refused_job_is_rescheduled_without_its_retry_count_until_the_cap(workers, raw_redis):
    ref = limiter_jobs.refused_inside.delay("never")
    worker = workers.start("-c", "2", overrides={**FAST_POLL, "LIMITER_MAX_RESCHEDULES": 3})
    wait_until(lambda: any(run.status == "failed" for run in History().recent(count=20).runs), 30,
               "the job to take the retry path once the reschedules are spent")
    statuses = [run.status for run in reversed(History().recent(count=20).runs) if run.jid == ref.jid]
    assert statuses == ["rescheduled", "rescheduled", "rescheduled", "failed"]
    assert raw_redis.hget("t:starts", "never") == b"4"
    # retry=False: after the cap it is dropped, never in retry or dead, and was never counted a retry.
    assert raw_redis.zcard("retry") == 0 and raw_redis.zcard("dead") == 0 and raw_redis.zcard("schedule") == 0
    assert "refused by limiter test-never 3 times; taking the retry path" in worker.log()
    assert int(raw_redis.hget(keys.limiter_stats("test-never"), "rescheduled") or 0) == 3
    # In the metrics, the three reschedules are their own outcome: one run (the failed one), not four.
    name = "tests.limiter_jobs.refused_inside"
    totals = wait_until(lambda: (found := raw_redis.hgetall("djwork:metrics:totals")).get(f"{name}|f".encode())
                        and found.get(f"{name}|r".encode()) == b"3" and found, 20,
                        "the failure and the three reschedules in the metrics totals")
    assert totals[f"{name}|p".encode()] == totals[f"{name}|f".encode()] == b"1"
