"""``{{ value|wall }}``: a time on the wall clock of its own zone, for the Periodic pages.

Django's ``date`` filter converts every aware datetime to the site's zone
first; a cron entry's next run must read in the entry's zone ("02:30 CEST"
for a Berlin entry on a UTC site), so this filter formats it as given.
"""

from __future__ import annotations

import datetime as dt

from django import template

register = template.Library()


@register.filter(expects_localtime=False)
def wall(value: dt.datetime | None) -> str:
    """"2026-06-02 02:30 CEST": minutes, as cron counts them; "—" for no time."""
    if not isinstance(value, dt.datetime):
        return "—"
    return value.strftime("%Y-%m-%d %H:%M %Z").strip()
