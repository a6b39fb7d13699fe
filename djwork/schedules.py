"""``crontab()``: Celery's schedule of a beat entry, for ``CELERY_BEAT_SCHEDULE`` read as periodic entries.

A Celery project's ``from celery.schedules import crontab`` becomes ``from djwork.schedules import crontab``;
each ``CELERY_BEAT_SCHEDULE`` entry whose ``schedule`` is one becomes a ``PERIODIC`` entry with its five
cron fields (djwork/settings/from_celery.py; docs/periodic.md). Nothing else of Celery's schedules is here:
``solar`` has no cron form.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def _field(value: Any, name: str) -> str:
    if isinstance(value, bool):
        raise TypeError(f"crontab {name} must be a number, a cron field string or a list of numbers, got {value!r}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip().replace(" ", "")
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        parts = [_field(part, name) for part in value]
        if parts:
            return ",".join(parts)
    raise TypeError(f"crontab {name} must be a number, a cron field string or a list of numbers, got {value!r}")


class crontab:
    """Celery's ``crontab(minute, hour, day_of_week, day_of_month, month_of_year)``, as a cron line."""

    def __init__(self, minute: Any = "*", hour: Any = "*", day_of_week: Any = "*", day_of_month: Any = "*",
                 month_of_year: Any = "*", **unsupported: Any) -> None:
        if unsupported:
            raise TypeError(f"crontab(): unsupported argument(s) {sorted(unsupported)} (the five cron fields are)")
        self.minute, self.hour = _field(minute, "minute"), _field(hour, "hour")
        self.day_of_week, self.day_of_month = _field(day_of_week, "day_of_week"), _field(day_of_month, "day_of_month")
        self.month_of_year = _field(month_of_year, "month_of_year")

    @property
    def cron(self) -> str:
        """The five fields in cron's order: minute hour day-of-month month day-of-week."""
        return f"{self.minute} {self.hour} {self.day_of_month} {self.month_of_year} {self.day_of_week}"

    def __repr__(self) -> str:
        return f"<crontab: {self.cron}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, crontab) and other.cron == self.cron

    def __hash__(self) -> int:
        return hash(self.cron)
