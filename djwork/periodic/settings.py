"""The kinds of ``DJWORK["PERIODIC"]`` and ``DJWORK["TEST_CLOCK"]`` (djwork.settings.table).

``PERIODIC``'s kind only asks for a list: each entry is parsed on its own
(djwork.periodic.entries), so one bad entry leaves the others running instead
of the whole list falling back to its empty default.
"""

from __future__ import annotations

from typing import Any

from djwork.periodic.clock import Clock
from djwork.settings.kinds import Invalid


def periodic_list(value: Any) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise Invalid("a list of entry dicts such as {'cron': '*/5 * * * *', 'job': 'myapp.tasks.refresh'}")
    return tuple(value)


def clock_setting(value: Any) -> Clock:
    try:
        return Clock.from_setting(value)
    except ValueError as error:
        raise Invalid(str(error)) from None


