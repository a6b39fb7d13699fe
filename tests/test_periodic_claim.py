"""lua/periodic_claim.lua and the ticker's plan, in this process against the private Redis.

Time is placed with TEST_CLOCK (``start`` = the simulated moment at Redis's
"now"), so each test knows which slots are due without waiting for any.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from djwork import redis as redis_layer
from djwork.periodic import claim as claims
from djwork.periodic.entries import parse_entry
from djwork.periodic.plan import ON_TIME_GRACE, Claim, plan
from djwork.periodic.schedule import to_ms
from djwork.redis import keys, scripts
from djwork.settings.conf import build_config
from tests import periodic_jobs
from tests.support.periodic import BASE, HOUR, OUT, entry, queued, redis_now, ticker_at


def state(raw_redis, entry_id: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in raw_redis.hgetall(keys.periodic_state(entry_id)).items()}


def slot_ms(hours: float) -> int:
    return int((BASE + hours * HOUR) * 1000)


def test_first_sight_watches_from_now_then_each_slot_fires_once_with_a_jid_of_its_own(raw_redis):
    ticker_at(raw_redis, BASE + 0.25 * HOUR, entry()).run_once()
    assert queued(raw_redis) == []
    assert int(state(raw_redis, "tests.periodic_jobs.tick")["last"]) >= slot_ms(0.25)

    later = ticker_at(raw_redis, BASE + 1.01 * HOUR, entry())
    later.run_once()
    later.run_once()  # a second tick, a replay: nothing new
    ticker_at(raw_redis, BASE + 1.02 * HOUR, entry()).run_once()  # a second leader with its own clock
    (job,) = queued(raw_redis)
    assert job["class"] == "tests.periodic_jobs.tick" and job["args"] == [] and job["queue"] == "periodic-out"
    assert job["jid"] == claims.slot_jid("tests.periodic_jobs.tick", slot_ms(1))
    assert job["djwork_periodic"] == {"entry": "tests.periodic_jobs.tick", "slot": slot_ms(1) / 1000}
    assert abs(job["enqueued_at"] - redis_now(raw_redis)) < 5  # stamped by the script, on Redis's clock
    assert raw_redis.sismember("queues", "periodic-out")
    record = json.loads(raw_redis.lindex(keys.periodic_history("tests.periodic_jobs.tick"), 0))
    assert record["kind"] == "slot" and record["jid"] == job["jid"] and record["slot"] == slot_ms(1)


def test_a_slot_not_due_on_redis_clock_is_refused_whatever_the_caller_believes(raw_redis):
    ticker = ticker_at(raw_redis, BASE + 0.5 * HOUR, entry())
    ticker.run_once()
    parsed = parse_entry(entry(), "UTC", "test")
    job = periodic_jobs.tick
    # A process whose clock runs ahead asks for the next slot half an hour early.
    call = claims.call(parsed, job, Claim("fire", slot_ms(1)), ticker.config, ticker.clock)
    reply = redis_layer.run(lambda conn: scripts.evaluate(conn, claims.SCRIPT, call.keys, call.args))
    assert claims.status_of(reply)[0] == "early"
    assert queued(raw_redis) == []


def test_a_claim_planned_from_a_stale_watermark_is_answered_done(raw_redis):
    # Two leaders read the watermark before either claimed: both plan 01:00, both send the claim.
    ticker = ticker_at(raw_redis, BASE + 0.25 * HOUR, entry())
    ticker.run_once()
    ticker = ticker_at(raw_redis, BASE + 1.01 * HOUR, entry())
    call = claims.call(parse_entry(entry(), "UTC", "test"), periodic_jobs.tick, Claim("fire", slot_ms(1)),
                       ticker.config, ticker.clock)
    statuses = [claims.status_of(redis_layer.run(lambda conn: scripts.evaluate(conn, claims.SCRIPT, call.keys,
                                                                                call.args)))[0] for _ in range(2)]
    assert statuses == ["fired", "done"]
    assert len(queued(raw_redis)) == 1


@pytest.mark.parametrize(("catch_up", "max_lookback", "expected_hours", "missed"), [
    ("none", 86400, [], 10),
    ("latest", 86400, [10], 9),
    ("all", 86400, list(range(1, 11)), 0),
    ("all", 3 * HOUR + 60, [8, 9, 10], 7),
    ("latest", 1800, [], 10),  # the most recent missed slot is older than max_lookback
])
def test_catch_up_after_a_downtime_of_ten_slots(raw_redis, catch_up, max_lookback, expected_hours, missed):
    options = {"catch_up": catch_up, "max_lookback": max_lookback}
    ticker_at(raw_redis, BASE + 0.25 * HOUR, entry(**options)).run_once()
    ticker_at(raw_redis, BASE + 10.75 * HOUR, entry(**options)).run_once()
    assert [job["djwork_periodic"]["slot"] for job in queued(raw_redis)] == [slot_ms(h) / 1000 for h in expected_hours]
    current = state(raw_redis, "tests.periodic_jobs.tick")
    assert int(current["last"]) == slot_ms(10)
    assert int(current.get("skipped_missed", 0)) == missed


def test_late_slots_within_the_grace_fire_whatever_catch_up_says(raw_redis):
    # A leader handoff: nobody fired 01:00 and 01:01 for 90 s.
    minutely = entry(cron="* * * * *", catch_up="none")
    ticker_at(raw_redis, BASE + HOUR - 30, minutely).run_once()
    ticker_at(raw_redis, BASE + HOUR + 90, minutely).run_once()
    assert ON_TIME_GRACE > 90
    assert [job["djwork_periodic"]["slot"] for job in queued(raw_redis)] == [BASE + HOUR, BASE + HOUR + 60]


def test_paused_slots_are_counted_not_queued_and_unpausing_fires_no_backlog(raw_redis):
    from djwork.api import Periodic

    ticker_at(raw_redis, BASE + 0.25 * HOUR, entry(catch_up="all")).run_once()
    Periodic(build_config({"PERIODIC": [entry(catch_up="all")]})).pause("tests.periodic_jobs.tick")
    ticker_at(raw_redis, BASE + 3.1 * HOUR, entry(catch_up="all")).run_once()
    assert queued(raw_redis) == []
    assert state(raw_redis, "tests.periodic_jobs.tick")["skipped_paused"] == "3"
    Periodic(build_config({"PERIODIC": [entry(catch_up="all")]})).unpause("tests.periodic_jobs.tick")
    ticker_at(raw_redis, BASE + 3.2 * HOUR, entry(catch_up="all")).run_once()
    assert queued(raw_redis) == []
    ticker_at(raw_redis, BASE + 4.01 * HOUR, entry(catch_up="all")).run_once()
    assert [job["djwork_periodic"]["slot"] for job in queued(raw_redis)] == [BASE + 4 * HOUR]


def test_no_overlap_entry_skips_slots_while_its_run_holds_the_lock(raw_redis):
    guarded = entry(overlap=False, lock_ttl=7200)
    ticker_at(raw_redis, BASE + 0.25 * HOUR, guarded).run_once()
    ticker_at(raw_redis, BASE + 1.01 * HOUR, guarded).run_once()
    (first,) = queued(raw_redis)
    lock = keys.periodic_lock("tests.periodic_jobs.tick")
    assert first["djwork_periodic"]["lock"] == lock and first["djwork_periodic"]["lock_ttl"] == 7200
    assert first["djwork_locks"] == [lock]  # released with the job's ack or death (djwork/job_locks.py)
    assert raw_redis.get(lock).decode() == first["jid"]
    assert 7000_000 < raw_redis.pttl(lock) <= 7200_000

    ticker_at(raw_redis, BASE + 2.01 * HOUR, guarded).run_once()
    assert len(queued(raw_redis)) == 1
    skip = json.loads(raw_redis.lindex(keys.periodic_history("tests.periodic_jobs.tick"), 0))
    assert skip == {**skip, "kind": "skipped", "reason": "overlap", "holder": first["jid"], "slot": slot_ms(2)}

    released = redis_layer.run(lambda conn: scripts.evaluate(conn, "periodic_release", [lock], ["someone-else"]))
    assert released == 0 and raw_redis.exists(lock)  # compare-and-delete: not the holder's release
    redis_layer.run(lambda conn: scripts.evaluate(conn, "periodic_release", [lock], [first["jid"]]))
    ticker_at(raw_redis, BASE + 3.01 * HOUR, guarded).run_once()
    assert [job["djwork_periodic"]["slot"] for job in queued(raw_redis)] == [BASE + HOUR, BASE + 3 * HOUR]


def test_a_queue_key_of_the_wrong_type_fails_the_claim_without_advancing_the_watermark(raw_redis):
    ticker_at(raw_redis, BASE + 0.25 * HOUR, entry()).run_once()
    watermark = state(raw_redis, "tests.periodic_jobs.tick")["last"]
    raw_redis.set(OUT, "not a list")
    ticker_at(raw_redis, BASE + 1.01 * HOUR, entry()).run_once()
    assert state(raw_redis, "tests.periodic_jobs.tick")["last"] == watermark  # the run is not lost...
    raw_redis.delete(OUT)
    ticker_at(raw_redis, BASE + 1.02 * HOUR, entry()).run_once()
    assert len(queued(raw_redis)) == 1  # ...it fires once the key is fixed


def test_the_plan_of_a_fresh_entry_and_of_one_with_nothing_due():
    parsed = parse_entry(entry(), "UTC", "test")
    assert plan(parsed, None, slot_ms(1)) == [Claim("init", slot_ms(1))]
    assert plan(parsed, slot_ms(1), slot_ms(1.9)) == []
    assert plan(parsed, slot_ms(1), slot_ms(2)) == [Claim("fire", slot_ms(2))]
    assert to_ms(dt.datetime.fromtimestamp(BASE, dt.UTC)) == slot_ms(0)
