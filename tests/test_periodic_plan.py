"""The periodic slot plan (djwork.periodic.plan.plan), directly: which slots a tick fires or skips, no Redis, no clock.

tests/test_periodic_claim.py drives the plan through the Lua claim against
Redis; these pin the plan's own rules: on time within ON_TIME_GRACE,
catch_up none / latest / all for missed slots, max_lookback, pauses, and
the per-tick cap.
"""

from __future__ import annotations

import itertools

from djwork.periodic.entries import parse_entry
from djwork.periodic.plan import FIRES_PER_TICK, ON_TIME_GRACE, Claim, plan
from tests.support.periodic import BASE, HOUR

MINUTE = 60


def ms(hours: float) -> int:
    """BASE (an exact hour) plus ``hours``, in epoch milliseconds."""
    return int((BASE + hours * HOUR) * 1000)


def hourly(**options):
    return parse_entry({"cron": "0 * * * *", "job": "tests.periodic_jobs.tick", **options}, "UTC", "test")


def test_an_entry_seen_first_starts_watching_now_and_fires_nothing_before():
    assert plan(hourly(), None, ms(5.5)) == [Claim("init", ms(5.5))]


def test_nothing_due_plans_nothing_and_a_due_slot_fires_once():
    assert plan(hourly(), ms(1), ms(1.99)) == []
    assert plan(hourly(), ms(1), ms(2)) == [Claim("fire", ms(2))]


def test_a_slot_within_the_grace_is_on_time_whatever_catch_up_says():
    late_but_on_time = ms(2) + int((ON_TIME_GRACE - 1) * 1000)
    assert plan(hourly(catch_up="none"), ms(1), late_but_on_time) == [Claim("fire", ms(2))]


def test_missed_slots_with_catch_up_none_are_skipped_and_counted():
    # Watermark at 1h, now 4h 30m: 2h, 3h and 4h were missed (past the grace).
    assert plan(hourly(catch_up="none"), ms(1), ms(4.5)) == [Claim("skip", ms(4), 2, ms(2), "missed")]


def test_missed_slots_with_catch_up_latest_collapse_into_one_run_of_the_newest():
    assert plan(hourly(catch_up="latest"), ms(1), ms(4.5)) == [Claim("fire", ms(4), 2, ms(2))]


def test_missed_slots_with_catch_up_all_fire_each_one_in_order():
    claims = plan(hourly(catch_up="all", max_lookback=10 * HOUR), ms(1), ms(4.5))
    assert claims == [Claim("fire", ms(2)), Claim("fire", ms(3)), Claim("fire", ms(4))]


def test_catch_up_never_reaches_past_max_lookback():
    claims = plan(hourly(catch_up="all", max_lookback=2 * HOUR), ms(1), ms(10.5))
    assert [claim.slot for claim in claims] == [ms(9), ms(10)]
    assert claims[0].skipped == 7 and claims[0].first_skipped == ms(2)  # 2h..8h: older than the lookback
    # latest: the newest slot is older than the lookback, so nothing fires; the slots are skipped.
    assert plan(hourly(catch_up="latest", max_lookback=10 * MINUTE), ms(1), ms(4.5))[0].mode == "skip"


def test_a_paused_entry_skips_every_due_slot_saying_so():
    assert plan(hourly(), ms(1), ms(2), paused=True) == [Claim("skip", ms(2), 0, 0, "paused")]
    assert plan(hourly(), ms(1), ms(4), paused=True) == [Claim("skip", ms(4), 2, ms(2), "paused")]


def test_one_tick_fires_at_most_fires_per_tick_slots_and_the_rest_wait():
    every_minute = parse_entry({"cron": "* * * * *", "job": "tests.periodic_jobs.tick", "catch_up": "all",
                                "max_lookback": 30 * 24 * HOUR}, "UTC", "test")
    claims = plan(every_minute, ms(0), ms(0) + (FIRES_PER_TICK + 100) * MINUTE * 1000)
    assert len(claims) == FIRES_PER_TICK
    assert claims[0].slot == ms(0) + MINUTE * 1000
    assert all(later.slot - earlier.slot == MINUTE * 1000 for earlier, later in itertools.pairwise(claims))
