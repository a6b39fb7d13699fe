"""``{% unique_lock job as lock %}``: a unique job's digest and the state of its lock, for the job pages.

A tag, not view context: the job pages' views stay as they are, and only a
page that shows a unique job pays for the one extra read.
"""

from __future__ import annotations

from typing import Any

from django import template

from djwork import api

register = template.Library()


@register.simple_tag
def unique_lock(job: api.JobRecord) -> dict[str, Any] | None:
    """None for a job without a unique lock; else its digest, its lock (None once released), whether it holds it."""
    found = api.UniqueLocks().for_job(job)
    if found is None:
        return None
    digest, lock = found
    return {"digest": digest, "lock": lock, "mine": lock is not None and lock.owner == job.jid}
