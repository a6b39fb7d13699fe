"""Display filters: thousands separators, relative times with the absolute UTC one beside, durations, sizes.

Our own rather than django.contrib.humanize, so the dashboard works without
the host project adding that app. Every filter that builds HTML goes through
format_html, which escapes its arguments.
"""

from __future__ import annotations

import datetime as dt
import math
import re

from django import template
from django.utils import timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def number(value: object) -> str:
    """12345 -> "12,345"; anything that is not a number is shown as is."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "" if value is None else str(value)
    if not math.isfinite(number):
        return str(value)
    if number == int(number):
        return f"{int(number):,}"
    return f"{number:,.1f}"


def _ago(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 60:
        return f"{int(seconds)}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h {int(seconds % 3600 // 60)}m"
    return f"{int(seconds // 86400)}d {int(seconds % 86400 // 3600)}h"


def _from_now(value: dt.datetime) -> str:
    delta = (timezone.now() - value).total_seconds()
    return "just now" if abs(delta) < 1 else f"{_ago(delta)} ago" if delta > 0 else f"in {_ago(delta)}"


def utc(value: dt.datetime) -> dt.datetime:
    """Every time the dashboard prints is UTC, as its footer is: one clock whatever the project's TIME_ZONE."""
    return value.astimezone(dt.UTC) if timezone.is_aware(value) else value.replace(tzinfo=dt.UTC)


@register.filter
def reltime(value: dt.datetime | None) -> str:
    """``<time>`` saying "3m ago" / "in 12s", with the absolute UTC time beside it (the time alone when it is
    today, UTC) and in full as its title."""
    if not isinstance(value, dt.datetime):
        return format_html('<span class="muted">{}</span>', "—")
    shown = _from_now(value)
    at = utc(value)
    absolute = at.strftime("%Y-%m-%d %H:%M:%S UTC")
    beside = at.strftime("%H:%M:%S UTC") if at.date() == dt.datetime.now(dt.UTC).date() else absolute
    return format_html('<time datetime="{}" title="{}">{} <span class="abs">{}</span></time>', value.isoformat(),
                       absolute, shown, beside)


@register.filter
def duration(seconds: float | None) -> str:
    """Seconds -> "12.5ms", "850ms", "4.2s", "3m 04s", "2h 5m"."""
    if seconds is None:
        return "—"
    try:
        seconds = float(seconds)
    except (TypeError, ValueError):
        return "—"
    if seconds == 0:
        return "0s"
    if seconds < 0.001:
        return f"{seconds * 1_000_000:.0f}µs"
    if seconds < 0.1:
        return f"{seconds * 1000:.1f}ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"
    return _ago(seconds)


# A run's outcome as a badge: red only for a failure. A job a rate limit put off ("rescheduled") did not fail,
# and wore red on the History page while the Periodic page showed it neutral.
OUTCOME_BADGE = {"ok": "badge-ok", "retry": "badge-warn", "rescheduled": "badge-plain"}


@register.filter
def status_badge(status: str) -> str:
    return OUTCOME_BADGE.get(status, "badge-bad")


@register.filter
def utc_stamp(value: dt.datetime | None) -> str:
    """"2026-06-02 03:04:05 UTC" (Django's ``date`` filter would print the project's TIME_ZONE)."""
    return utc(value).strftime("%Y-%m-%d %H:%M:%S UTC") if isinstance(value, dt.datetime) else "—"


@register.filter
def relative(value: dt.datetime | None) -> str:
    """Only "3m ago" / "in 12s" (full UTC time on hover), beside a time already printed in full."""
    if not isinstance(value, dt.datetime):
        return format_html('<span class="muted">{}</span>', "—")
    return format_html('<time datetime="{}" title="{}">{}</time>', value.isoformat(),
                       utc(value).strftime("%Y-%m-%d %H:%M:%S UTC"), _from_now(value))


SEPARATORS = re.compile(r"([.:/_|@-])")


@register.filter
def breakable(value: object) -> str:
    """Escaped, with a line-break opportunity after each separator (. : / _ | @ -): an identity or a class
    name wraps between its parts, never mid-word ("worker-1:4242:a1b2" broke as "work / er-1")."""
    return mark_safe(SEPARATORS.sub(r"\1<wbr>", str(conditional_escape("" if value is None else value))))


@register.filter
def ms(value: float | None) -> str:
    """Milliseconds -> a duration."""
    return duration(None if value is None else float(value) / 1000)


@register.filter
def run_time(item: object, which: str = "total") -> str:
    """A class's ``total`` or ``average`` time of successful runs. Runs are counted in whole milliseconds
    (Sidekiq's rule), so a class whose runs each took under 1 ms has a total of 0: "< 1 ms", not "0s"."""
    succeeded, total_ms = getattr(item, "succeeded", 0), getattr(item, "totals", {}).get("ms", 0)
    if succeeded and not total_ms:
        return "< 1 ms"
    return ms(total_ms if which == "total" else getattr(item, "average_ms", 0.0))


@register.filter
def kilobytes(value: int | float | None) -> str:
    """RSS in KB -> "512 KB" / "87.3 MB" / "1.2 GB"."""
    try:
        kb = float(value or 0)
    except (TypeError, ValueError):
        return "—"
    if kb < 1024:
        return f"{kb:.0f} KB"
    if kb < 1024 * 1024:
        return f"{kb / 1024:.1f} MB"
    return f"{kb / 1024 / 1024:.2f} GB"


@register.filter
def get(mapping: dict, key: str) -> object:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.simple_tag
def queue_url(name: object, action: bool = False) -> str:
    """The queue page (or its action URL); "" for a name the URLs can't carry (bad data in ``queues``)."""
    from django.urls import NoReverseMatch, reverse

    try:
        return reverse("djwork_dashboard:queue_action" if action else "djwork_dashboard:queue", args=[str(name)])
    except NoReverseMatch:
        return ""


@register.simple_tag
def queue_link(name: object) -> str:
    """A link to the queue, or just its (escaped) name when it has no page."""
    url = queue_url(name)
    if not url:
        return format_html('<span title="not a valid queue name">{}</span>', name)
    return format_html('<a href="{}">{}</a>', url, name)


@register.filter
def tojson(value: object) -> str:
    """A job argument as JSON text (escaped by the template like any string)."""
    import json

    return json.dumps(value, ensure_ascii=False, default=str)
