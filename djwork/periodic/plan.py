"""What a tick asks of one entry: which slots to fire, which to skip, given its watermark and Redis's time.

The plan is advice; ``lua/periodic_claim.lua`` decides. It re-reads the
watermark and the clock, so a plan made from a stale read (a second leader,
a replay) can only come back "done" or "early", never enqueue twice.

On time or missed: a slot fired within ``ON_TIME_GRACE`` of its instant is
on time, whatever ``catch_up`` says. The grace covers the longest leader
handoff (a 30 s lease left by a killed leader, then up to 60 s before a
follower looks), so a leader killed at the top of a minute costs no run.
A slot older than that when a leader first sees it was *missed* (no leader
was running): ``none`` skips it, ``latest`` collapses every missed slot into
one run of the most recent, ``all`` fires each one. Catch-up never reaches
further back than ``max_lookback``, nor fires more than ``FIRES_PER_TICK``
slots in one tick (the rest follow on the next).
"""

from __future__ import annotations

from dataclasses import dataclass

from djwork.periodic.entries import Entry

ON_TIME_GRACE = 120.0  # seconds (simulated ones, under a test clock)
FIRES_PER_TICK = 500
COUNT_LIMIT = 20_000  # missed slots counted one by one at most; the count is capped there


@dataclass(frozen=True)
class Claim:
    mode: str  # "init" | "fire" | "skip"
    slot: int  # epoch ms; for "init" the moment the plan was made
    skipped: int = 0  # due slots before ``slot`` this claim skips (they were missed)
    first_skipped: int = 0  # the oldest of them, epoch ms; 0 when none
    reason: str = ""  # why a "skip" skips its slot: "missed" | "paused"


def plan(entry: Entry, watermark: int | None, now_ms: int, paused: bool = False) -> list[Claim]:
    """The claims that bring ``entry`` from ``watermark`` (the last slot decided) up to ``now_ms``.

    An entry seen for the first time has no watermark: it starts watching
    now, and nothing before its first sight fires.
    """
    if watermark is None:
        return [Claim("init", now_ms)]
    schedule = entry.schedule
    newest = schedule.latest_until(now_ms)
    if newest is None or newest <= watermark:
        return []
    oldest = schedule.next_after(watermark) or newest
    if paused:
        return [_skip(entry, watermark, oldest, newest, "paused")]
    on_time_from = now_ms - int(ON_TIME_GRACE * 1000)
    lookback_from = now_ms - int(entry.max_lookback * 1000)
    if entry.catch_up == "all":
        start = max(watermark, min(on_time_from, lookback_from - 1))
        fires = schedule.after(start, now_ms, FIRES_PER_TICK)
    else:
        fires, _more = schedule.between(max(watermark, on_time_from - 1), now_ms, FIRES_PER_TICK)
        if not fires and entry.catch_up == "latest" and newest >= lookback_from:
            fires = [newest]
    if not fires:
        return [_skip(entry, watermark, oldest, newest, "missed")]
    skipped = schedule.count_between(watermark, fires[0] - 1, COUNT_LIMIT) if oldest < fires[0] else 0
    claims = [Claim("fire", fires[0], skipped, oldest if skipped else 0)]
    return claims + [Claim("fire", slot) for slot in fires[1:]]


def _skip(entry: Entry, watermark: int, oldest: int, newest: int, reason: str) -> Claim:
    before = entry.schedule.count_between(watermark, newest - 1, COUNT_LIMIT) if oldest < newest else 0
    return Claim("skip", newest, before, oldest if before else 0, reason)

