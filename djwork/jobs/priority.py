"""Job priorities: Celery's and Django Tasks' numbers, each mapped onto one of a queue's lanes (docs/priority.md).

A lane is a number from -9 to 9, higher taken first; lane 0 is the queue's own
``queue:<name>`` list, where every job without a priority stays (Sidekiq's layout).
Celery's API keeps Celery-on-Redis's direction: 0 is the most urgent and the
default, 9 the least, so ``priority=c`` goes to lane ``-c``. Django Tasks keeps
Django's: -100..100, higher more urgent, 0 the default, spread evenly over
lanes -9..9.
"""

from __future__ import annotations

import math
from typing import Any

from djwork import options as enqueue_options
from djwork.redis.lanes import LANE_FIELD, LANES

PRIORITY_FIELD = "priority"  # the Celery priority a call gave, as given (request.delivery_info['priority'])
CELERY_LEAST_URGENT = 9  # Celery-on-Redis's range: 0 (most urgent, the default) .. 9
DJANGO_MIN, DJANGO_MAX = -100, 100  # Django Tasks' MIN_PRIORITY and MAX_PRIORITY


def check_celery_priority(value: Any, where: str) -> int | None:
    """A Celery ``priority=``: None, or a whole number 0..9; anything else refused naming the range."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= CELERY_LEAST_URGENT:
        raise enqueue_options.OptionError(
            f"{where}: priority={value!r} is not a priority: give a whole number from 0 (most urgent, the default) "
            f"to {CELERY_LEAST_URGENT} (least urgent), as Celery on Redis numbers them (docs/priority.md)")
    return value


def celery_lane(priority: int) -> int:
    """The lane of a Celery priority (0..9, 0 most urgent): 0 is the queue itself, 1..9 the lanes below it."""
    return -priority


def django_lane(priority: int) -> int:
    """The lane of a Django Tasks priority (-100..100, higher more urgent), spread evenly: 1..11 -> 1, 100 -> 9."""
    if not DJANGO_MIN <= priority <= DJANGO_MAX:
        raise enqueue_options.OptionError(
            f"priority={priority!r} is outside Django Tasks' range {DJANGO_MIN}..{DJANGO_MAX}")
    steps = math.ceil(abs(priority) * LANES / DJANGO_MAX)
    return steps if priority > 0 else -steps


def celery_fields(priority: int | None) -> dict[str, Any]:
    """The payload fields of a Celery priority: the number as given, and its lane (0, the queue's own list,
    overrides a job's default lane and is dropped before the payload is written: ``settle_lane``)."""
    if priority is None:
        return {}
    return {PRIORITY_FIELD: priority, LANE_FIELD: celery_lane(priority)}


def settle_lane(fields: dict[str, Any]) -> None:
    """Drop a lane of 0: a job in the queue's own list keeps exactly the payload it would have had."""
    if fields.get(LANE_FIELD) == 0:
        del fields[LANE_FIELD]
