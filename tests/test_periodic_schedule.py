"""Schedule math (djwork/periodic/schedule.py, plan.py): cron lines, aliases, time zones and both DST cases."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from djwork.periodic.entries import parse_entry
from djwork.periodic.plan import plan
from djwork.periodic.schedule import Schedule, ScheduleError, from_ms, to_ms

UTC = dt.UTC
BERLIN = "Europe/Berlin"


def utc(*parts: int) -> int:
    return to_ms(dt.datetime(*parts, tzinfo=UTC))


def local(slots: list[int], tz: str = BERLIN) -> list[str]:
    return [from_ms(slot).astimezone(Schedule("* * * * *", tz).tz).strftime("%m-%d %H:%M%z") for slot in slots]


def fired_per_day(cron: str, tz: str, first: dt.datetime, days: int, step: dt.timedelta) -> list[int]:
    """Drive the planner with ticks every ``step`` from ``first`` for ``days``; the slots it fires, in order."""
    entry = parse_entry({"cron": cron, "job": "tests.periodic_jobs.tick", "tz": tz}, "UTC", "test")
    now = to_ms(first)
    watermark = now
    fired = []
    while now < to_ms(first + dt.timedelta(days=days)):
        for claim in plan(entry, watermark, now):
            assert claim.mode == "fire", claim
            assert claim.slot > watermark
            fired.append(claim.slot)
            watermark = claim.slot
        now += int(step.total_seconds() * 1000)
    return fired


@pytest.mark.parametrize(("day", "expected"), [
    # Spring forward, 29 March 2026: 02:30 does not exist; it fires once, at 03:00 CEST (01:00 UTC).
    (dt.datetime(2026, 3, 27, tzinfo=UTC), ["03-27 02:30+0100", "03-28 02:30+0100", "03-29 03:00+0200",
                                             "03-30 02:30+0200"]),
    # Fall back, 25 October 2026: 02:30 happens twice; it fires once, at the first (CEST, 00:30 UTC).
    (dt.datetime(2026, 10, 23, tzinfo=UTC), ["10-23 02:30+0200", "10-24 02:30+0200", "10-25 02:30+0200",
                                              "10-26 02:30+0100"]),
])
def test_daily_0230_in_berlin_fires_once_each_day_across_both_2026_transitions(day, expected):
    for step in (dt.timedelta(minutes=1), dt.timedelta(minutes=7), dt.timedelta(hours=5)):
        fired = fired_per_day("30 2 * * *", BERLIN, day, 4, step)
        assert local(fired) == expected, step
    slots, more = Schedule("30 2 * * *", BERLIN).between(to_ms(day), to_ms(day + dt.timedelta(days=4)), 100)
    assert local(slots) == expected and not more


def test_every_match_of_a_skipped_hour_lands_on_its_end_once():
    slots = Schedule("*/20 * * * *", BERLIN).after(utc(2026, 3, 29, 0, 0), utc(2026, 3, 29, 2, 0), 100)
    assert local(slots) == ["03-29 01:20+0100", "03-29 01:40+0100", "03-29 03:00+0200", "03-29 03:20+0200",
                            "03-29 03:40+0200", "03-29 04:00+0200"]


def test_a_repeated_hour_fires_its_wall_times_once_in_both_directions():
    schedule = Schedule("*/20 * * * *", BERLIN)
    forward = schedule.after(utc(2026, 10, 24, 23, 0), utc(2026, 10, 25, 3, 0), 100)
    backward, _more = schedule.between(utc(2026, 10, 24, 23, 0), utc(2026, 10, 25, 3, 0), 100)
    assert forward == backward
    assert local(forward)[:7] == ["10-25 01:20+0200", "10-25 01:40+0200", "10-25 02:00+0200", "10-25 02:20+0200",
                                  "10-25 02:40+0200", "10-25 03:00+0100", "10-25 03:20+0100"]
    # From inside the repeated hour (02:30 CET, the second pass), the previous slot is 02:40 CEST.
    assert local([schedule.latest_until(utc(2026, 10, 25, 1, 30))]) == ["10-25 02:40+0200"]
    assert local([schedule.next_after(utc(2026, 10, 25, 1, 30))]) == ["10-25 03:00+0100"]


def test_slot_boundaries_are_exact_to_the_millisecond():
    schedule = Schedule("0 * * * *", "UTC")
    assert schedule.latest_until(utc(2026, 6, 1, 1)) == utc(2026, 6, 1, 1)
    assert schedule.latest_until(utc(2026, 6, 1, 1) - 1) == utc(2026, 6, 1, 0)
    assert schedule.next_after(utc(2026, 6, 1, 1)) == utc(2026, 6, 1, 2)
    assert schedule.next_after(utc(2026, 6, 1, 1) - 1) == utc(2026, 6, 1, 1)
    assert schedule.count_between(utc(2026, 6, 1, 0), utc(2026, 6, 1, 10), 100) == 10
    slots, more = schedule.between(utc(2026, 6, 1, 0), utc(2026, 6, 1, 10), 3)
    assert slots == [utc(2026, 6, 1, hour) for hour in (8, 9, 10)] and more


@pytest.mark.parametrize(("alias", "fields"), [
    ("@hourly", "0 * * * *"), ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"), ("@weekly", "0 0 * * 0"),
    ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *"), ("  @Hourly ", "0 * * * *"),
])
def test_aliases(alias, fields):
    assert Schedule(alias, "UTC").cron == fields


@pytest.mark.parametrize(("cron", "says"), [
    ("* * * *", "has 4 field(s)"),
    ("0 0 * * * *", "has 6 field(s)"),  # croniter would read a sixth field as seconds
    ("61 * * * *", "can't be parsed"),
    ("@reboot", "unknown cron alias"),
    ("0 0 31 2 *", "never fires"),
    ("H * * * *", "can't be parsed"),
    (5, "must be a string"),
])
def test_cron_lines_refused_with_the_reason(cron, says):
    with pytest.raises(ScheduleError, match=re.escape(says)):
        Schedule(cron, "UTC")


def test_unknown_zone_is_refused_with_a_hint():
    with pytest.raises(ScheduleError, match=r"unknown time zone 'Mars/Olympus'.*IANA"):
        Schedule("* * * * *", "Mars/Olympus")


def test_weekday_names_and_ranges_in_a_zone():
    slots = Schedule("0 9 * * MON-FRI", "America/New_York").after(utc(2026, 6, 5), utc(2026, 6, 10), 10)
    assert [from_ms(slot).strftime("%a %H:%M") for slot in slots] == ["Fri 13:00", "Mon 13:00", "Tue 13:00"]
