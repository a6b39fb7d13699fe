"""When a cron entry fires: slots as UTC instants (epoch milliseconds), from a 5-field cron line and a time zone.

The cron line is matched against the zone's *wall clock* (croniter iterates
naive local times, where no DST question arises); each match is then placed
on the UTC time line by ``wall_to_utc``, which defines the two DST cases:

- a wall time the zone skips (02:30 on the spring-forward night in Berlin)
  fires once, at the first valid instant after the gap (03:00 local);
- a wall time the zone repeats (02:30 on the fall-back night) fires once, at
  its first occurrence.

Mapped matches never go backwards in time, and several matches landing on
one instant (every ``*/5`` minute of a skipped hour lands on its end) are
one slot. Times are integers of milliseconds so a slot compares and prints
the same in Python, in Lua and in Redis.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from croniter.croniter import CroniterError

UTC = dt.UTC
ALIASES = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
# A backward scan from an instant in the second pass of a DST fold must start
# this far later on the wall clock: the fold's first pass holds wall times
# after the instant's own that map before it (a fold repeats up to an hour,
# two in a few zones). Matches that map after the instant are only skipped.
WALL_MARGIN = dt.timedelta(hours=3)
# Matches examined per call: bounds the work a cron line that matches almost
# never (``0 0 29 2 1``) or a huge catch-up window can cost one tick.
SCAN_LIMIT = 20_000


class ScheduleError(ValueError):
    """A cron line or time zone that can't be used; the message says what and how to fix it."""


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; ScheduleError naming it if this system's tz database does not know it."""
    if not isinstance(name, str) or not name:
        raise ScheduleError(f"time zone must be an IANA name such as 'Europe/Berlin', got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ScheduleError(f"unknown time zone {name!r} ({error}); use an IANA name such as 'Europe/Berlin' "
                            "(the tzdata package provides them where the system has none)") from None


def normalized(line: str) -> str:
    """``line`` as five fields: aliases expanded, whitespace collapsed; ScheduleError for anything else."""
    if not isinstance(line, str):
        raise ScheduleError(f"cron must be a string such as '*/5 * * * *', got {line!r}")
    text = " ".join(line.split())
    if text.lower() in ALIASES:
        return ALIASES[text.lower()]
    if text.startswith("@"):
        raise ScheduleError(f"unknown cron alias {text!r}; use one of {', '.join(ALIASES)} or five fields")
    fields = text.split(" ")
    if len(fields) != 5:
        raise ScheduleError(f"cron {line!r} has {len(fields)} field(s); give exactly five "
                            "(minute hour day-of-month month day-of-week), e.g. '*/5 * * * *'")
    return text


def wall_to_utc(wall: dt.datetime, tz: ZoneInfo) -> dt.datetime:
    """The instant a naive wall-clock time of ``tz`` fires at (the module docstring's DST rules)."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if second >= first:
        return first  # a normal time (both equal) or a repeated one (fold 0 is the first occurrence)
    # A skipped time: fold=1 reads it with the offset after the gap, which puts
    # it before the transition, fold=0 after it. The transition is the first
    # valid instant after the gap: find it between the two, to the second.
    low, high = second, first
    before = low.astimezone(tz).utcoffset()
    while high - low > dt.timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(tz).utcoffset() == before:
            low = middle
        else:
            high = middle
    return high.replace(microsecond=0)


def to_ms(instant: dt.datetime) -> int:
    return int(instant.timestamp() * 1000)


def from_ms(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, UTC)


class Schedule:
    """One entry's cron line in one zone: its slots before and after any instant."""

    def __init__(self, cron: str, tz: str) -> None:
        self.cron = normalized(cron)
        self.tz_name = tz
        self.tz = zone(tz)
        try:
            croniter(self.cron, dt.datetime(2026, 1, 1))
        except (CroniterError, ValueError, KeyError, TypeError) as error:
            raise ScheduleError(f"cron {cron!r} can't be parsed: {error}") from None
        if self.next_after(to_ms(dt.datetime(2026, 1, 1, tzinfo=UTC))) is None:
            raise ScheduleError(f"cron {cron!r} never fires (no matching date in the next years)")

    def __repr__(self) -> str:
        return f"<Schedule {self.cron!r} {self.tz_name}>"

    def _forward(self, after_ms: int) -> Iterator[int]:
        """Slots strictly after ``after_ms``, ascending, at most SCAN_LIMIT matches examined."""
        # No match before this wall time can map after ``after_ms``: the mapping never goes backwards.
        wall = from_ms(after_ms).astimezone(self.tz).replace(tzinfo=None)
        matches = croniter(self.cron, wall)
        last = after_ms
        for _ in range(SCAN_LIMIT):
            try:
                match = matches.get_next(dt.datetime)
            except CroniterError:
                return
            slot = to_ms(wall_to_utc(match, self.tz))
            if slot > last:
                last = slot
                yield slot

    def _backward(self, until_ms: int) -> Iterator[int]:
        """Slots at or before ``until_ms``, descending, at most SCAN_LIMIT matches examined."""
        until = from_ms(until_ms)
        # A second later: get_prev never returns its own start, and a slot at ``until_ms`` counts.
        wall = until.astimezone(self.tz).replace(tzinfo=None) + dt.timedelta(seconds=1)
        if (until - WALL_MARGIN).astimezone(self.tz).utcoffset() != until.astimezone(self.tz).utcoffset():
            wall += WALL_MARGIN  # near a DST change only: the margin costs matches on every scan
        matches = croniter(self.cron, wall)
        last = until_ms + 1
        for _ in range(SCAN_LIMIT):
            try:
                match = matches.get_prev(dt.datetime)
            except CroniterError:
                return
            slot = to_ms(wall_to_utc(match, self.tz))
            if slot < last:
                last = slot
                yield slot

    def next_after(self, after_ms: int) -> int | None:
        """The first slot strictly after ``after_ms``; None if there is none within SCAN_LIMIT matches."""
        return next(self._forward(after_ms), None)

    def latest_until(self, until_ms: int) -> int | None:
        """The last slot at or before ``until_ms``."""
        return next(self._backward(until_ms), None)

    def after(self, after_ms: int, until_ms: int, limit: int) -> list[int]:
        """Slots in (after_ms, until_ms], ascending: the oldest ``limit`` of them."""
        slots: list[int] = []
        for slot in self._forward(after_ms):
            if slot > until_ms or len(slots) >= limit:
                break
            slots.append(slot)
        return slots

    def between(self, after_ms: int, until_ms: int, limit: int) -> tuple[list[int], bool]:
        """Slots in (after_ms, until_ms], ascending: the newest ``limit`` of them, and whether there were more."""
        newest_first: list[int] = []
        for slot in self._backward(until_ms):
            if slot <= after_ms:
                return newest_first[::-1], False
            if len(newest_first) == limit:
                return newest_first[::-1], True
            newest_first.append(slot)
        return newest_first[::-1], False

    def count_between(self, after_ms: int, until_ms: int, limit: int) -> int:
        """How many slots fall in (after_ms, until_ms], counted up to ``limit``."""
        count = 0
        for slot in self._forward(after_ms):
            if slot > until_ms or count >= limit:
                break
            count += 1
        return count
